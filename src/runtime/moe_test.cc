// Mixture-of-experts layers on the CPU backend (issue 29's first slice):
//   - RouteExperts: softmax top-k, ties to the lower index, renormalization;
//   - CpuBackend::MoeMlp against a per-row reference written out longhand (every row's experts
//     computed on their own), with and without a shared expert, f32 and bf16 weights;
//   - the loader: per-expert tensors (the checkpoints' layout) and transformers 5's stacked
//     gate_up_proj give the same experts; errors name the missing or misshapen tensor;
//   - config.json: which layers are sparse (decoder_sparse_step, mlp_only_layers), Validate;
//   - a sparse model's rows are the same alone, batched with others, and chunked + decoded.
// The transformers goldens of the MoE families (tools/goldens/make_model_goldens.py qwen3_moe
// qwen2_moe mixtral) are generated on the GPU machine; they are not in tests/goldens yet.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "backend/cpu/cpu_backend.h"
#include "io/io_test_util.h"
#include "model/arch/arch.h"
#include "model/dummy_weights.h"
#include "model/weights.h"
#include "runtime/golden_models.h"
#include "runtime/model_test_util.h"
#include "tensor/quant.h"

namespace loom {
namespace {

using model_test::HostF32;
using model_test::MapSource;
using model_test::ParseConfig;
using model_test::RandomValues;
using model_test::SameBytes;

TEST(MoeRouteTest, TopKOfTheSoftmaxWithTiesToTheLowerIndex) {
  const float logits[5] = {0.5f, 2.f, -1.f, 2.f, 1.f};
  int32_t ids[3];
  float w[3];
  Backend::RouteExperts(logits, 5, 3, /*norm_topk_prob=*/false, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 4);
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  EXPECT_NEAR(w[0], std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(w[1], std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(w[2], std::exp(1.0) / z, 1e-6);

  Backend::RouteExperts(logits, 5, 3, /*norm_topk_prob=*/true, ids, w);
  const double chosen = 2 * std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(w[0], std::exp(2.0) / chosen, 1e-6);
  EXPECT_NEAR(w[2], std::exp(1.0) / chosen, 1e-6);
  EXPECT_NEAR(w[0] + w[1] + w[2], 1.0, 1e-6);
}

Tensor HostBf16(const std::vector<float>& v, Shape shape) {
  Tensor t = HostTensor(DType::kBF16, shape);
  for (size_t i = 0; i < v.size(); ++i) t.data_as<uint16_t>()[i] = F32ToBf16(v[i]);
  return t;
}

// What the weights hold, as f32 (a bf16 weight's rounded values).
// A weight of `dtype` (f32, bf16 or a GGUF block type) holding `v` as closely as it can.
Tensor HostWeight(DType dtype, const std::vector<float>& v, Shape shape) {
  if (dtype == DType::kF32) return HostF32(v, shape);
  if (dtype == DType::kBF16) return HostBf16(v, shape);
  Tensor t = HostTensor(dtype, shape);
  for (int64_t r = 0; r < t.rows(); ++r) {
    QuantizeRow(dtype, v.data() + r * t.cols(), static_cast<char*>(t.data()) + r * t.row_bytes(),
                t.cols());
  }
  return t;
}

std::vector<float> Values(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (GetDTypeInfo(t.dtype()).quantized) {
    for (int64_t r = 0; r < t.rows(); ++r) {
      DequantizeRow(t.dtype(), static_cast<const char*>(t.data()) + r * t.row_bytes(),
                    v.data() + r * t.cols(), t.cols());
    }
    return v;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = t.dtype() == DType::kF32 ? t.data_as<const float>()[i]
                                    : Bf16ToF32(t.data_as<const uint16_t>()[i]);
  }
  return v;
}

// y = W x for W [rows, cols] (row-major), in double.
std::vector<double> Apply(const std::vector<float>& w, size_t offset, int64_t rows, int64_t cols,
                          const std::vector<double>& x) {
  std::vector<double> y(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      y[static_cast<size_t>(r)] +=
          static_cast<double>(w[offset + static_cast<size_t>(r * cols + c)]) *
          x[static_cast<size_t>(c)];
    }
  }
  return y;
}

struct MoeCase {
  int64_t n = 7, hidden = 24, experts = 6, f = 10, shared_f = 0;
  int top_k = 2;
  bool norm = true;
  DType dtype = DType::kF32;
};

// Each row longhand: its router logits, its experts by Backend::RouteExperts (the routing rule is
// tested above), the experts' SwiGLU MLPs in double, their weighted sum, the shared expert.
TEST(MoeMlpTest, MatchesAPerRowReference) {
  std::vector<MoeCase> cases(6);
  cases[1].norm = false;
  cases[1].top_k = 3;
  cases[2].shared_f = 12;
  cases[2].norm = false;
  cases[3].dtype = DType::kBF16;
  cases[3].n = 40;  // prefill-sized: several rows per expert
  // GGUF experts: the CPU's quantized kernels round x to 8 bits per block, so these compare by
  // relative error (below) instead of element by element.
  cases[4].dtype = DType::kQ8_0;
  cases[4].hidden = 64;
  cases[4].f = 32;
  cases[5].dtype = DType::kQ4_K;
  cases[5].hidden = 256;
  cases[5].f = 256;
  cases[5].n = 20;
  CpuBackend be(2);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const MoeCase& c = cases[ci];
    SCOPED_TRACE("case " + std::to_string(ci));
    auto weight = [&](Shape shape, uint32_t seed, float scale) {
      std::vector<float> v = RandomValues(static_cast<size_t>(shape.numel()), seed, scale);
      return be.UploadWeight(HostWeight(c.dtype, v, shape));
    };
    Backend::MoeWeights w;
    // Routers stay f32 with quantized experts (as llama.cpp's k-quant files keep them), so the
    // reference's routing is the op's.
    const bool quantized = GetDTypeInfo(c.dtype).quantized;
    w.router = quantized ? be.UploadWeight(HostF32(
                               RandomValues(static_cast<size_t>(c.experts * c.hidden), 1, 0.5f),
                               Shape{c.experts, c.hidden}))
                         : weight(Shape{c.experts, c.hidden}, 1, 0.5f);
    w.gate = weight(Shape{c.experts, c.f, c.hidden}, 2, 0.2f);
    w.up = weight(Shape{c.experts, c.f, c.hidden}, 3, 0.2f);
    w.down = weight(Shape{c.experts, c.hidden, c.f}, 4, 0.2f);
    if (c.shared_f > 0) {
      w.shared_gate = weight(Shape{c.shared_f, c.hidden}, 5, 0.2f);
      w.shared_up = weight(Shape{c.shared_f, c.hidden}, 6, 0.2f);
      w.shared_down = weight(Shape{c.hidden, c.shared_f}, 7, 0.2f);
      w.shared_router = weight(Shape{1, c.hidden}, 8, 0.5f);
    }
    Backend::MoeParams p;
    p.top_k = c.top_k;
    p.norm_topk_prob = c.norm;
    std::vector<float> xv = RandomValues(static_cast<size_t>(c.n * c.hidden), 9, 1.f);
    Tensor x = HostF32(xv, Shape{c.n, c.hidden});
    Tensor out = be.Alloc(DType::kF32, Shape{c.n, c.hidden});
    Tensor logits = be.Alloc(DType::kF32, Shape{c.n, c.experts});
    Tensor ids = be.Alloc(DType::kI32, Shape{c.n, c.top_k});
    be.MoeMlp(x, w, p, logits, ids, out);

    const std::vector<float> router = Values(w.router), gate = Values(w.gate), up = Values(w.up),
                             down = Values(w.down);
    auto silu = [](double v) { return v / (1.0 + std::exp(-v)); };
    auto mlp = [&](const std::vector<float>& g, const std::vector<float>& u,
                   const std::vector<float>& d, size_t g_off, size_t d_off, int64_t f,
                   const std::vector<double>& xr) {
      std::vector<double> a = Apply(g, g_off, f, c.hidden, xr);
      std::vector<double> b = Apply(u, g_off, f, c.hidden, xr);
      for (size_t j = 0; j < a.size(); ++j) a[j] = silu(a[j]) * b[j];
      return Apply(d, d_off, c.hidden, f, a);
    };
    int rows_of_expert[64] = {};
    for (int64_t i = 0; i < c.n; ++i) {
      std::vector<double> xr(xv.begin() + i * c.hidden, xv.begin() + (i + 1) * c.hidden);
      std::vector<double> lr = Apply(router, 0, c.experts, c.hidden, xr);
      std::vector<float> lf(lr.begin(), lr.end());
      for (int64_t e = 0; e < c.experts; ++e) {
        EXPECT_NEAR(logits.data_as<const float>()[i * c.experts + e], lf[static_cast<size_t>(e)],
                    1e-4)
            << "row " << i;
      }
      std::vector<int32_t> want_ids(static_cast<size_t>(c.top_k));
      std::vector<float> probs(static_cast<size_t>(c.top_k));
      Backend::RouteExperts(lf.data(), static_cast<int>(c.experts), c.top_k, c.norm,
                            want_ids.data(), probs.data());
      std::vector<double> want(static_cast<size_t>(c.hidden), 0.0);
      for (int j = 0; j < c.top_k; ++j) {
        const int32_t e = want_ids[static_cast<size_t>(j)];
        EXPECT_EQ(ids.data_as<const int32_t>()[i * c.top_k + j], e) << "row " << i;
        ++rows_of_expert[e];
        std::vector<double> y = mlp(gate, up, down, static_cast<size_t>(e * c.f * c.hidden),
                                    static_cast<size_t>(e * c.hidden * c.f), c.f, xr);
        for (size_t col = 0; col < want.size(); ++col)
          want[col] += probs[static_cast<size_t>(j)] * y[col];
      }
      if (c.shared_f > 0) {
        std::vector<double> y = mlp(Values(w.shared_gate), Values(w.shared_up),
                                    Values(w.shared_down), 0, 0, c.shared_f, xr);
        const double s = Apply(Values(w.shared_router), 0, 1, c.hidden, xr)[0];
        for (size_t col = 0; col < want.size(); ++col) want[col] += y[col] / (1.0 + std::exp(-s));
      }
      double err = 0, norm = 0;
      for (int64_t col = 0; col < c.hidden; ++col) {
        const double got = out.data_as<const float>()[i * c.hidden + col];
        const double ref = want[static_cast<size_t>(col)];
        err += (got - ref) * (got - ref);
        norm += ref * ref;
        if (!quantized) {
          EXPECT_NEAR(got, ref, 2e-5) << "row " << i << " col " << col;
        }
      }
      if (quantized) {
        EXPECT_LT(std::sqrt(err / norm), 3e-2) << "row " << i;
      }
    }
    if (c.n >= 40) {  // the prefill case exercises several rows per expert
      EXPECT_GE(*std::max_element(rows_of_expert, rows_of_expert + c.experts), 10);
    }
  }
}

// A 2-layer Qwen3-MoE-shaped config: layer 0 dense, layer 1 sparse (4 experts, 2 a token).
nlohmann::json TinyQwen3MoeJson() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 64,
    "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
    "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
    "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [0]})");
}

TEST(MoeConfigTest, SparseLayersFromTheConfig) {
  ModelConfig cfg = ParseConfig(TinyQwen3MoeJson());
  EXPECT_EQ(cfg.arch, "qwen3_moe");
  EXPECT_TRUE(cfg.qk_norm);
  EXPECT_EQ(cfg.num_experts, 4);
  EXPECT_EQ(cfg.moe_intermediate_size, 16);
  EXPECT_TRUE(cfg.moe_norm_topk_prob);
  EXPECT_FALSE(cfg.is_moe(0));
  EXPECT_TRUE(cfg.is_moe(1));

  nlohmann::json j = TinyQwen3MoeJson();
  j["num_hidden_layers"] = 4;
  j["mlp_only_layers"] = nlohmann::json::array();
  j["decoder_sparse_step"] = 2;
  cfg = ParseConfig(j);
  EXPECT_EQ(cfg.layer_moe, (std::vector<bool>{false, true, false, true}));

  nlohmann::json mixtral = nlohmann::json::parse(R"({
    "architectures": ["MixtralForCausalLM"], "vocab_size": 64, "hidden_size": 32,
    "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "num_local_experts": 8, "num_experts_per_tok": 2,
    "sliding_window": null})");
  cfg = ParseConfig(mixtral);
  EXPECT_EQ(cfg.arch, "mixtral");
  EXPECT_EQ(cfg.moe_intermediate_size, 40);
  EXPECT_TRUE(cfg.moe_norm_topk_prob);
  EXPECT_EQ(cfg.layer_moe, (std::vector<bool>{true, true}));
  EXPECT_EQ(cfg.layer_window, (std::vector<int>{0, 0}));

  cfg.num_experts_per_tok = 9;
  Status bad = cfg.Validate();
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("num_experts_per_tok 9"), std::string::npos) << bad.ToString();

  j = TinyQwen3MoeJson();
  j.erase("moe_intermediate_size");
  ModelConfig missing;
  Status s = kQwen3MoeArch.from_hf(j, &missing);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("moe_intermediate_size"), std::string::npos) << s.ToString();
}

// Every tensor of the tiny config, named the Hugging Face way (Qwen3-MoE's, or Mixtral's
// block_sparse_moe / w1 w3 w2 when cfg.arch is "mixtral"), experts per expert or stacked as
// transformers 5 stacks them (under `mlp.`).
MapSource TinyCheckpoint(const ModelConfig& cfg, bool stacked_experts) {
  const bool mixtral = cfg.arch == "mixtral";
  const std::string moe = mixtral ? "block_sparse_moe." : "mlp.";
  const std::string gate_name = mixtral ? "w1" : "gate_proj", up_name = mixtral ? "w3" : "up_proj",
                    down_name = mixtral ? "w2" : "down_proj";
  MapSource src;
  uint32_t seed = 100;
  auto add = [&](const std::string& name, Shape shape) {
    src.tensors[name] =
        HostF32(RandomValues(static_cast<size_t>(shape.numel()), seed++, 0.2f), shape);
  };
  const int64_t d = cfg.hidden_size, hd = cfg.head_dim;
  add("model.embed_tokens.weight", Shape{cfg.vocab_size, d});
  add("model.norm.weight", Shape{d});
  add("lm_head.weight", Shape{cfg.vocab_size, d});
  for (int i = 0; i < cfg.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", Shape{d});
    add(p + "post_attention_layernorm.weight", Shape{d});
    add(p + "self_attn.q_proj.weight", Shape{cfg.num_heads * hd, d});
    add(p + "self_attn.k_proj.weight", Shape{cfg.num_kv_heads * hd, d});
    add(p + "self_attn.v_proj.weight", Shape{cfg.num_kv_heads * hd, d});
    add(p + "self_attn.o_proj.weight", Shape{d, cfg.num_heads * hd});
    if (cfg.qk_norm) {
      add(p + "self_attn.q_norm.weight", Shape{hd});
      add(p + "self_attn.k_norm.weight", Shape{hd});
    }
    if (!cfg.is_moe(i)) {
      add(p + "mlp.gate_proj.weight", Shape{cfg.intermediate_size, d});
      add(p + "mlp.up_proj.weight", Shape{cfg.intermediate_size, d});
      add(p + "mlp.down_proj.weight", Shape{d, cfg.intermediate_size});
      continue;
    }
    const int64_t e = cfg.num_experts, f = cfg.moe_intermediate_size;
    add(p + moe + "gate.weight", Shape{e, d});
    // Per-expert tensors first (same seeds either way), then stacked from them if asked.
    for (int64_t x = 0; x < e; ++x) {
      const std::string q = p + moe + "experts." + std::to_string(x) + ".";
      add(q + gate_name + ".weight", Shape{f, d});
      add(q + up_name + ".weight", Shape{f, d});
      add(q + down_name + ".weight", Shape{d, f});
    }
    if (stacked_experts) {
      Tensor gate_up = HostTensor(DType::kF32, Shape{e, 2 * f, d});
      Tensor down = HostTensor(DType::kF32, Shape{e, d, f});
      for (int64_t x = 0; x < e; ++x) {
        const std::string q = p + moe + "experts." + std::to_string(x) + ".";
        const size_t mat = static_cast<size_t>(f * d);
        float* gu = gate_up.data_as<float>() + 2 * mat * static_cast<size_t>(x);
        std::copy_n(src.tensors[q + gate_name + ".weight"].data_as<const float>(), mat, gu);
        std::copy_n(src.tensors[q + up_name + ".weight"].data_as<const float>(), mat, gu + mat);
        std::copy_n(src.tensors[q + down_name + ".weight"].data_as<const float>(), mat,
                    down.data_as<float>() + mat * static_cast<size_t>(x));
        for (const std::string& part : {gate_name, up_name, down_name}) {
          src.tensors.erase(q + part + ".weight");
        }
      }
      if (mixtral) {  // transformers 5 names Mixtral's MoE block `mlp` too
        src.tensors[p + "mlp.gate.weight"] = src.tensors[p + moe + "gate.weight"];
        src.tensors.erase(p + moe + "gate.weight");
      }
      src.tensors[p + "mlp.experts.gate_up_proj"] = gate_up;
      src.tensors[p + "mlp.experts.down_proj"] = down;
    }
  }
  return src;
}

TEST(MoeLoadTest, PerExpertAndStackedCheckpointsLoadTheSameExperts) {
  CpuBackend be(2);
  ModelConfig cfg = ParseConfig(TinyQwen3MoeJson());
  MapSource per_expert = TinyCheckpoint(cfg, false), stacked = TinyCheckpoint(cfg, true);
  auto a = LoadWeights(cfg, per_expert, TensorNaming::kHuggingFace, &be);
  auto b = LoadWeights(cfg, stacked, TensorNaming::kHuggingFace, &be);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const Backend::MoeWeights& ma = a->layers[1].moe;
  const Backend::MoeWeights& mb = b->layers[1].moe;
  EXPECT_EQ(ma.gate.shape(), (Shape{4, 16, 32}));
  EXPECT_EQ(ma.down.shape(), (Shape{4, 32, 16}));
  EXPECT_TRUE(SameBytes(ma.gate, mb.gate));
  EXPECT_TRUE(SameBytes(ma.up, mb.up));
  EXPECT_TRUE(SameBytes(ma.down, mb.down));
  EXPECT_TRUE(SameBytes(ma.router, mb.router));
  // Expert 2's up rows are what the checkpoint's expert 2 holds.
  const Tensor& up2 = per_expert.tensors.at("model.layers.1.mlp.experts.2.up_proj.weight");
  EXPECT_EQ(std::memcmp(ma.up.Slice(2, 1).data(), up2.data(), up2.nbytes()), 0);
  EXPECT_FALSE(a->layers[0].moe.router.defined());
  EXPECT_TRUE(a->layers[0].w_gate.defined());
  EXPECT_FALSE(a->layers[1].w_gate.defined());

  MapSource missing = TinyCheckpoint(cfg, false);
  missing.tensors.erase("model.layers.1.mlp.experts.3.down_proj.weight");
  model_test::ExpectLoadFails(cfg, missing, &be, "'model.layers.1.mlp.experts.3.down_proj.weight'");

  MapSource none = TinyCheckpoint(cfg, true);
  none.tensors.erase("model.layers.1.mlp.experts.gate_up_proj");
  model_test::ExpectLoadFails(cfg, none, &be, "missing the experts of layer 1");

  MapSource misshapen = TinyCheckpoint(cfg, true);
  misshapen.tensors["model.layers.1.mlp.experts.down_proj"] =
      HostTensor(DType::kF32, Shape{4, 16, 32});
  model_test::ExpectLoadFails(cfg, misshapen, &be,
                              "'model.layers.1.mlp.experts.down_proj' has shape");
}

nlohmann::json TinyMixtralJson() {
  return nlohmann::json::parse(R"({
    "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": 64,
    "hidden_size": 32, "intermediate_size": 24, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "num_local_experts": 4,
    "num_experts_per_tok": 2, "sliding_window": null})");
}

// The checkpoint as a Hugging Face directory (config.json + model.safetensors, f32).
void WriteHfDir(const std::string& dir, const nlohmann::json& config, const MapSource& src) {
  std::vector<testing::StTensor> tensors;
  for (const auto& [name, t] : src.tensors) {
    std::vector<int64_t> shape;
    for (int i = 0; i < t.ndim(); ++i) shape.push_back(t.dim(i));
    tensors.push_back(
        {name, "F32", shape, std::string(static_cast<const char*>(t.data()), t.nbytes())});
  }
  testing::WriteBytes(dir + "/model.safetensors", testing::MakeSafetensors(tensors));
  testing::WriteBytes(dir + "/config.json", config.dump());
}

// The same weights through the safetensors loader and through a GGUF file written the way
// llama.cpp's converter writes it (qwen3moe; Mixtral as a "llama" file with experts, q/k rows
// permuted): one config, one set of logits.
TEST(MoeLoadTest, GgufConversionsServeTheSameLogits) {
  nlohmann::json qwen = TinyQwen3MoeJson();
  qwen["mlp_only_layers"] = nlohmann::json::array();  // llama.cpp: every layer sparse
  for (const nlohmann::json& j : {qwen, TinyMixtralJson()}) {
    for (bool stacked : {false, true}) {
      SCOPED_TRACE(j["model_type"].get<std::string>() + (stacked ? " stacked" : " per expert"));
      CpuBackend be(2);
      ModelConfig cfg = ParseConfig(j);
      const std::string dir = testing::ScratchDir();
      WriteHfDir(dir, j, TinyCheckpoint(cfg, stacked));
      auto gguf = ConvertHfToGguf(dir);
      ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
      const std::string gguf_path = dir + "/model.gguf";
      ASSERT_TRUE(gguf->WriteFile(gguf_path).ok());
      auto hf_model = LoadModel(dir, &be);
      auto gguf_model = LoadModel(gguf_path, &be);
      ASSERT_TRUE(hf_model.ok()) << hf_model.status().ToString();
      ASSERT_TRUE(gguf_model.ok()) << gguf_model.status().ToString();
      const ModelConfig& gc = (*gguf_model)->config();
      EXPECT_EQ(gc.num_experts, 4);
      EXPECT_EQ(gc.num_experts_per_tok, 2);
      EXPECT_EQ(gc.moe_intermediate_size, cfg.moe_intermediate_size);
      EXPECT_TRUE(gc.moe_norm_topk_prob);
      EXPECT_EQ(gc.layer_moe, cfg.layer_moe);
      std::vector<int32_t> ids = {1, 9, 33, 2, 60, 17, 17, 40, 5};
      std::vector<int32_t> blocks = {0};
      auto logits = [&](const Model& m) {
        std::vector<KvLayer> kv = m.AllocateKv(4, 16, DType::kF32);
        return golden::ForwardLogits(m, kv, {SeqSlice{ids, 0, blocks, true}}, 16, true);
      };
      std::vector<float> a = logits(**hf_model), b = logits(**gguf_model);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f) << "logit " << i;
    }
  }
}

// A sparse model's promise of every model: a row's logits do not depend on the step around it.
TEST(MoeModelTest, RowsAreTheSameAloneBatchedAndChunked) {
  CpuBackend be(2);
  nlohmann::json j = TinyQwen3MoeJson();
  j["num_hidden_layers"] = 3;
  j["mlp_only_layers"] = {1};
  j["shared_expert_intermediate_size"] = 0;
  ModelConfig cfg = ParseConfig(j);
  std::unique_ptr<Model> model =
      MakeDummyModelFromConfig(cfg, &be, DType::kF32, 7, "moe", DummyScale::kUnitGain);
  std::vector<KvLayer> kv = model->AllocateKv(64, 16, DType::kF32);
  std::vector<int32_t> a(37), b(5);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>((i * 7 + 3) % 64);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int32_t>((i * 11 + 1) % 64);
  std::vector<int32_t> ba = {0, 1, 2}, bb = {10};
  std::vector<float> alone_a =
      golden::ForwardLogits(*model, kv, {SeqSlice{a, 0, ba, true}}, 16, /*all_rows=*/true);
  std::vector<float> alone_b =
      golden::ForwardLogits(*model, kv, {SeqSlice{b, 0, bb, true}}, 16, /*all_rows=*/true);
  std::vector<float> both = golden::ForwardLogits(
      *model, kv, {SeqSlice{b, 0, bb, true}, SeqSlice{a, 0, ba, true}}, 16, /*all_rows=*/true);
  const size_t vocab = static_cast<size_t>(cfg.vocab_size);
  ASSERT_EQ(both.size(), (a.size() + b.size()) * vocab);
  auto near = [&](const float* got, const float* want, size_t rows, const char* what) {
    for (size_t i = 0; i < rows * vocab; ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5f) << what << " row " << i / vocab;
    }
  };
  near(both.data(), alone_b.data(), b.size(), "b batched");
  near(both.data() + b.size() * vocab, alone_a.data(), a.size(), "a batched");
  // a's last token as a decode step after a 36-token prefill chunk.
  std::span<const int32_t> all(a);
  golden::ForwardLogits(*model, kv, {SeqSlice{all.subspan(0, 36), 0, ba, false}}, 16, false);
  std::vector<float> last =
      golden::ForwardLogits(*model, kv, {SeqSlice{all.subspan(36, 1), 36, ba, true}}, 16, false);
  near(last.data(), alone_a.data() + 36 * vocab, 1, "a decoded");
  // The experts differ between tokens (the test would be weak if routing were constant).
  std::set<int32_t> firsts;
  ActivationSink sink = [&](const std::string& name, const Tensor& t) {
    if (name != "experts.0") return;
    for (int64_t r = 0; r < t.rows(); ++r) firsts.insert(t.data_as<const int32_t>()[r * t.cols()]);
  };
  golden::ForwardLogits(*model, kv, {SeqSlice{a, 0, ba, true}}, 16, true, &sink);
  EXPECT_GE(firsts.size(), 3u);
}

TEST(MoeModelTest, ABackendWithoutMoeRefusesTheModelNamingTheDevice) {
  // The CPU backend has MoE layers; a backend that declines is refused at load, not mid-step.
  class NoMoe : public CpuBackend {
   public:
    NoMoe() : CpuBackend(1) {}
    bool has_moe() const override { return false; }
  } be;
  ModelConfig cfg = ParseConfig(TinyQwen3MoeJson());
  MapSource src = TinyCheckpoint(cfg, false);
  model_test::ExpectLoadFails(cfg, src, &be, "--device cpu");
}

}  // namespace
}  // namespace loom
