// The one parameterized decoder: every supported architecture runs through Model::Forward; the
// differences are ModelConfig flags (see model/arch/).
#include <cmath>

#include "model/model.h"
#include "model/rope.h"

namespace loom {
namespace {

RopeTable MakeRopeTable(const ModelConfig& cfg, const RopeConfig& rc, Backend* backend) {
  RopeFrequencies f = ComputeRopeFrequencies(rc, cfg.rotary_dim, cfg.max_position_embeddings);
  Tensor host = HostTensor(DType::kF32, Shape{static_cast<int64_t>(f.inv_freq.size())});
  std::copy(f.inv_freq.begin(), f.inv_freq.end(), host.data_as<float>());
  RopeTable t;
  t.inv_freq = backend->Upload(host);
  t.rotary_dim = cfg.rotary_dim;
  t.attention_factor = f.attention_factor;
  t.interleaved = cfg.rope_interleaved;
  return t;
}

}  // namespace

Model::Model(ModelConfig config, Weights weights, ModelInfo info, Backend* backend)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      info_(std::move(info)),
      backend_(backend) {
  if (backend_->prefers_fused_ops()) FuseProjections(&weights_, backend_);
  rope_global_ = MakeRopeTable(config_, config_.rope, backend_);
  rope_local_ = MakeRopeTable(config_, config_.rope_local, backend_);
}

std::vector<KvLayer> Model::AllocateKv(int num_blocks, int block_size, KvFormat format) const {
  std::vector<KvLayer> kv(static_cast<size_t>(config_.num_layers));
  const auto pool = [&](KvQuant q) {
    if (q == KvQuant::kNone) {
      return backend_->Alloc(format.dtype,
                             Shape{num_blocks, block_size, config_.num_kv_heads, config_.head_dim});
    }
    const auto row = static_cast<int64_t>(KvQuantRowBytes(q, config_.head_dim));
    return backend_->Alloc(DType::kU8, Shape{num_blocks, block_size, config_.num_kv_heads, row});
  };
  for (auto& layer : kv) {
    layer.k = pool(format.k);
    layer.v = pool(format.v);
    layer.k_quant = format.k;
    layer.v_quant = format.v;
  }
  return kv;
}

size_t Model::KvBytesPerToken(KvFormat format) const {
  return static_cast<size_t>(config_.num_layers) * config_.num_kv_heads *
         format.RowPairBytes(config_.head_dim);
}

Status Model::Forward(const ForwardInput& in, const std::vector<KvLayer>& kv, const Tensor& logits,
                      const ActivationSink* sink, const Tensor& hidden) const {
  const ModelConfig& c = config_;
  Backend& be = *backend_;
  const int64_t n = in.token_ids.numel();
  const int64_t d = c.hidden_size, hd = c.head_dim, f = c.intermediate_size;
  const int64_t q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  const DType act = be.act_dtype();
  if (static_cast<int>(kv.size()) != c.num_layers) {
    return InternalError("KV pools for " + std::to_string(kv.size()) + " layers, model has " +
                         std::to_string(c.num_layers));
  }
  auto emit = [&](const std::string& name, const Tensor& t) {
    if (sink != nullptr) (*sink)(name, t);
  };
  const float norm_offset = c.norm_plus_one ? 1.f : 0.f;

  // Activations for this step ([n, ...], act dtype; every op overwrites its output in full).
  // A layer's projections are fused (wqkv, w_gate_up: Phi-3, or FuseProjections on backends that
  // prefer it) or separate; layers may differ (a GGUF file's q / k / v of different quant types
  // stay separate).
  bool any_fused_qkv = false, any_split_qkv = false, any_split_gate_up = false;
  for (const LayerWeights& l : weights_.layers) {
    (l.wqkv.defined() ? any_fused_qkv : any_split_qkv) = true;
    any_split_gate_up |= !l.w_gate_up.defined();
  }
  auto scratch = [&](int64_t cols) { return be.AllocScratch(act, Shape{n, cols}); };
  Tensor x = scratch(d);  // residual stream
  Tensor h = scratch(d);  // normed input of a sub-block
  Tensor q = scratch(q_dim);
  Tensor attn = scratch(q_dim);
  Tensor o = scratch(d);
  Tensor gate = scratch(f);  // the MLP's activation, act(gate) * up
  Tensor k = any_split_qkv ? scratch(kv_dim) : Tensor();
  Tensor v = any_split_qkv ? scratch(kv_dim) : Tensor();
  Tensor qkv = any_fused_qkv ? scratch(q_dim + 2 * kv_dim) : Tensor();
  Tensor up = any_split_gate_up ? scratch(f) : Tensor();
  const Backend::GatedAct gated_act =
      c.activation == Activation::kSilu ? Backend::GatedAct::kSilu : Backend::GatedAct::kGeluTanh;
  // Sparse layers: the router's logits and each row's experts (visible to the sink).
  Tensor router_logits, expert_ids;
  Backend::MoeParams moe_params;
  if (c.num_experts > 0) {
    // f32 whatever the activations: a bf16 logit's rounding (2^-8 relative) moves the routing
    // weights by as much and flips near-tied experts.
    router_logits = be.AllocScratch(DType::kF32, Shape{n, c.num_experts});
    expert_ids = be.AllocScratch(DType::kI32, Shape{n, c.num_experts_per_tok});
    moe_params.top_k = c.num_experts_per_tok;
    moe_params.norm_topk_prob = c.moe_norm_topk_prob;
    moe_params.act = gated_act;
    moe_params.swiglu_limit = c.moe_swiglu_limit;
  }

  // On backends that prefer fused ops (CUDA) and with no sink, each sub-block's input norm is
  // folded into the projection that reads it (RmsNormMatMul*) and each output projection adds
  // straight into the residual stream (MatMulAdd): at batch 1 these are single GEMV launches.
  // Otherwise every activation is materialized (the CPU reference; a sink's debugging dumps).
  // Sandwich norms (Gemma) normalize a projection's output before the add, so that half always
  // takes the materialized path.
  const bool fold = sink == nullptr && be.prefers_fused_ops();
  auto norm_spec = [&](const Tensor& w) {
    return Backend::NormSpec{w, c.rms_norm_eps, norm_offset};
  };
  auto norm_x = [&](const Tensor& w, const std::string& name) {
    be.RmsNorm(x, w, c.rms_norm_eps, norm_offset, h);
    emit(name, h);
  };
  // x += proj(in) @ w^T (+ bias), through `post_norm` first when the model has sandwich norms.
  auto add_projection = [&](const Tensor& in, const Tensor& w, const Tensor& bias,
                            const Tensor& post_norm, const std::string& name) {
    if (fold && !c.sandwich_norm) {
      be.MatMulAdd(in, w, bias, x);
      return;
    }
    be.MatMul(in, w, bias, o);
    if (c.sandwich_norm) be.RmsNorm(o, post_norm, c.rms_norm_eps, norm_offset, o);
    emit(name, o);
    be.Add(x, o, x);
  };

  // The step's attention is planned once; every layer runs that plan (same heads throughout).
  AttentionMeta meta = in.meta;
  const AttentionShape attn_shape{c.num_heads, c.num_kv_heads, static_cast<int>(hd),
                                  kv.empty() ? KvQuant::kNone : kv[0].k_quant,
                                  kv.empty() ? KvQuant::kNone : kv[0].v_quant};
  if (meta.plan == nullptr) meta.plan = be.PlanAttention(meta, attn_shape);

  be.Embed(weights_.embed, in.token_ids, c.embed_scale, x);
  emit("embed", x);

  for (int i = 0; i < c.num_layers; ++i) {
    const LayerWeights& l = weights_.layers[static_cast<size_t>(i)];
    const std::string li = "." + std::to_string(i);
    const KvLayer& layer_kv = kv[static_cast<size_t>(i)];
    const bool sliding = c.is_sliding(i);
    const RopeTable& rope = sliding ? rope_local_ : rope_global_;

    // Attention: q, and this step's k / v rows into the cache.
    if (l.wqkv.defined()) {
      Backend::QkvLayout layout;
      layout.num_heads = c.num_heads;
      layout.num_kv_heads = c.num_kv_heads;
      layout.head_dim = static_cast<int>(hd);
      if (c.qk_norm) {
        layout.q_norm = l.q_norm;
        layout.k_norm = l.k_norm;
      }
      layout.eps = c.rms_norm_eps;
      layout.norm_offset = norm_offset;
      if (fold) {
        be.RmsNormQkvRopeStore(x, norm_spec(l.attn_norm), l.wqkv, l.bqkv, in.positions, rope,
                               layout, meta, layer_kv, qkv, q);
      } else {
        norm_x(l.attn_norm, "attn_norm" + li);
        be.MatMul(h, l.wqkv, l.bqkv, qkv);
        be.QkvRopeStore(qkv, in.positions, rope, layout, meta, layer_kv, q);
      }
    } else {
      norm_x(l.attn_norm, "attn_norm" + li);
      be.MatMul(h, l.wq, l.bq, q);
      be.MatMul(h, l.wk, l.bk, k);
      be.MatMul(h, l.wv, l.bv, v);
      if (c.qk_norm) {
        Tensor q_heads = q.Reshape(Shape{n * c.num_heads, hd});
        Tensor k_heads = k.Reshape(Shape{n * c.num_kv_heads, hd});
        be.RmsNorm(q_heads, l.q_norm, c.rms_norm_eps, norm_offset, q_heads);
        be.RmsNorm(k_heads, l.k_norm, c.rms_norm_eps, norm_offset, k_heads);
      }
      be.Rope(q, in.positions, rope, c.num_heads, static_cast<int>(hd));
      be.Rope(k, in.positions, rope, c.num_kv_heads, static_cast<int>(hd));
      be.StoreKv(k, v, meta, layer_kv);
    }
    AttentionParams ap;
    ap.num_heads = c.num_heads;
    ap.num_kv_heads = c.num_kv_heads;
    ap.head_dim = static_cast<int>(hd);
    ap.scale = c.softmax_scale();
    ap.sliding_window = c.layer_window[static_cast<size_t>(i)];
    ap.logit_softcap = c.attn_logit_softcap;
    ap.sinks = l.sinks;
    be.Attention(q, layer_kv, meta, ap, attn);
    add_projection(attn, l.wo, l.bo, l.post_attn_norm, "attn_out" + li);

    // MLP: gate = act(x W_gate) * (x W_up), then x += gate W_down; or the experts' sum.
    const bool fused_gate_up = l.w_gate_up.defined();
    if (c.is_moe(i)) {
      norm_x(l.ffn_norm, "ffn_norm" + li);
      be.MoeMlp(h, l.moe, moe_params, router_logits, expert_ids, o);
      emit("router" + li, router_logits);
      emit("experts" + li, expert_ids);
      if (c.sandwich_norm) be.RmsNorm(o, l.post_ffn_norm, c.rms_norm_eps, norm_offset, o);
      emit("ffn_out" + li, o);
      be.Add(x, o, x);
      emit("hidden" + li, x);
      continue;
    }
    if (fused_gate_up && fold) {
      be.RmsNormMatMulGated(x, norm_spec(l.ffn_norm), l.w_gate_up, gated_act, gate);
    } else if (fused_gate_up) {
      norm_x(l.ffn_norm, "ffn_norm" + li);
      be.MatMulGated(h, l.w_gate_up, gated_act, gate);
    } else {
      norm_x(l.ffn_norm, "ffn_norm" + li);
      be.MatMul(h, l.w_gate, Tensor(), gate);
      be.MatMul(h, l.w_up, Tensor(), up);
      if (gated_act == Backend::GatedAct::kSilu) {
        be.SiluMul(gate, up, gate);
      } else {
        be.GeluTanhMul(gate, up, gate);
      }
    }
    add_projection(gate, l.w_down, Tensor(), l.post_ffn_norm, "ffn_out" + li);
    emit("hidden" + li, x);
  }

  // Embeddings: the final norm of the wanted rows, without lm_head (the same row-wise RmsNorm the
  // logits rows get, so a row's value does not depend on what else the step holds).
  if (const int64_t hn = in.num_hidden_rows; hn > 0) {
    if (!hidden.defined() || hidden.shape() != Shape{hn, d} || hidden.dtype() != act) {
      return InternalError("Forward: the hidden output must be [" + std::to_string(hn) + ", " +
                           std::to_string(d) + "] in the activation dtype");
    }
    be.GatherRows(x, in.hidden_rows.Slice(0, hn), hidden);
    be.RmsNorm(hidden, weights_.final_norm, c.rms_norm_eps, norm_offset, hidden);
    emit("final_hidden", hidden);
  }

  const int64_t r = in.num_sample_rows;
  if (r == 0) return OkStatus();
  Tensor last = x;  // every row, in order (decode): no gather
  if (!(in.sample_rows_all && r == n)) {
    last = be.AllocScratch(act, Shape{r, d});
    be.GatherRows(x, in.sample_rows.Slice(0, r), last);
  }
  if (fold) {  // one GEMV with the norm in its prologue at batch 1
    be.RmsNormMatMul(last, norm_spec(weights_.final_norm), weights_.lm_head, Tensor(), logits);
  } else {
    be.RmsNorm(last, weights_.final_norm, c.rms_norm_eps, norm_offset, last);
    emit("final_norm", last);
    be.MatMul(last, weights_.lm_head, Tensor(), logits);
  }
  if (c.final_logit_softcap > 0.f) be.SoftCap(logits, c.final_logit_softcap);
  emit("logits", logits);
  return OkStatus();
}

}  // namespace loom
