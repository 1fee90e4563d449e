#include "model/weights.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "io/file_bytes.h"
#include "model/hf_quantization.h"
#include "tensor/quant.h"

namespace loom {
namespace {

// Role names in both namings. `layer` < 0 for global tensors.
std::string Name(TensorNaming naming, const std::string& hf, const std::string& gguf, int layer) {
  if (naming == TensorNaming::kHuggingFace) {
    return layer < 0 ? hf : "model.layers." + std::to_string(layer) + "." + hf;
  }
  return layer < 0 ? gguf : "blk." + std::to_string(layer) + "." + gguf;
}

// Routers (a sparse layer's expert gate, the shared expert's gate) stay as stored under
// --quantize: they are small and pick the experts (vLLM keeps them unquantized too).
bool IsRouter(const std::string& name) {
  return name.ends_with(".gate.weight") || name.ends_with(".router.weight") ||
         name.ends_with("ffn_gate_inp.weight") || name.ends_with("ffn_gate_inp_shexp.weight") ||
         name.ends_with("shared_expert_gate.weight");
}

// `t` (a float matrix or stack of them) re-encoded as `dtype`, rows split over threads.
Tensor QuantizeMatrix(const Tensor& t, DType dtype) {
  const int64_t cols = t.shape()[t.ndim() - 1], rows = t.numel() / cols;
  Tensor out = HostTensor(dtype, t.shape());
  const size_t in_rb = RowBytes(t.dtype(), cols), out_rb = RowBytes(dtype, cols);
  const int64_t threads =
      std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 1 + rows / 64);
  auto work = [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      DequantizeRow(t.dtype(), static_cast<const char*>(t.data()) + r * in_rb, row.data(), cols);
      QuantizeRow(dtype, row.data(), static_cast<char*>(out.data()) + r * out_rb, cols);
    }
  };
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < threads; ++i) {
    pool.emplace_back(work, rows * i / threads, rows * (i + 1) / threads);
  }
  work(0, rows / threads);
  for (auto& th : pool) th.join();
  return out;
}

class Loader {
 public:
  Loader(const TensorSource& source, TensorNaming naming, Backend* backend,
         const ProgressFn& progress, const WeightOptions& options)
      : source_(source),
        naming_(naming),
        backend_(backend),
        progress_(progress),
        options_(options),
        expected_bytes_(source.data_bytes()) {}

  // Loads a required tensor and checks its shape (2-D [rows, cols] or 1-D [rows] when cols == 0).
  StatusOr<Tensor> Required(const std::string& hf, const std::string& gguf, int layer, int64_t rows,
                            int64_t cols) {
    std::string name = Name(naming_, hf, gguf, layer);
    if (!source_.Has(name)) {
      return NotFoundError(source_.Describe() + ": missing tensor '" + name + "'");
    }
    return Fetch(name, rows, cols, layer);
  }

  // Loads a tensor if the checkpoint has it; an undefined Tensor otherwise.
  StatusOr<Tensor> Optional(const std::string& hf, const std::string& gguf, int layer, int64_t rows,
                            int64_t cols) {
    std::string name = Name(naming_, hf, gguf, layer);
    if (!source_.Has(name)) return Tensor();
    return Fetch(name, rows, cols, layer);
  }

  // A stacked expert weight [num_experts, rows, cols]: the GGUF tensor `gguf` (3-D already), or
  // from a Hugging Face checkpoint either one tensor per expert,
  // `<prefix>.experts.<e>.<name>.weight` for each of `names` (the checkpoints' own layout:
  // gate_proj / w1 ...), or transformers 5's stacked `<prefix>.experts.<fused>` where `fused_half`
  // picks rows [0, rows) (0) or [rows, 2 rows) (1) of its [E, 2 rows, cols] gate_up_proj (-1: the
  // tensor as is).
  struct ExpertNames {
    std::vector<std::string> prefixes;  // "mlp", "block_sparse_moe"
    std::vector<std::string> names;     // "gate_proj", "w1"
    std::string fused;                  // "gate_up_proj" / "down_proj"
    int fused_half = -1;
    std::string gguf;  // "ffn_gate_exps.weight"
  };
  StatusOr<Tensor> Experts(const ExpertNames& n, int layer, int64_t num_experts, int64_t rows,
                           int64_t cols) {
    const Shape want{num_experts, rows, cols};
    if (naming_ == TensorNaming::kGguf) {
      std::string name = Name(naming_, "", n.gguf, layer);
      if (!source_.Has(name)) {
        return NotFoundError(source_.Describe() + ": missing tensor '" + name + "'");
      }
      ASSIGN_OR_RETURN(Tensor t, source_.Get(name));
      read_bytes_ += static_cast<int64_t>(t.nbytes());
      RETURN_IF_ERROR(CheckShape(name, t, want));
      if (t.dtype() == DType::kMXFP4) {  // gpt-oss
        RETURN_IF_ERROR(CheckMxfp4Scales(t, source_.Describe() + ": '" + name + "'"));
      }
      return UploadStacked(t);
    }
    std::string tried;
    for (const std::string& prefix : n.prefixes) {
      const std::string base = Name(naming_, prefix + ".experts.", "", layer);
      for (const std::string& part : n.names) {
        std::string first = base + "0." + part + ".weight";
        tried += (tried.empty() ? "'" : ", '") + first + "'";
        if (!source_.Has(first)) continue;
        std::vector<Tensor> parts;
        for (int64_t e = 0; e < num_experts; ++e) {
          std::string name = base + std::to_string(e) + "." + part + ".weight";
          if (!source_.Has(name)) {
            return NotFoundError(source_.Describe() + ": missing tensor '" + name + "'");
          }
          ASSIGN_OR_RETURN(Tensor t, source_.Get(name));
          read_bytes_ += static_cast<int64_t>(t.nbytes());
          RETURN_IF_ERROR(CheckShape(name, t, Shape{rows, cols}));
          if (!parts.empty() && t.dtype() != parts[0].dtype()) {
            return InvalidArgumentError(source_.Describe() + ": tensor '" + name + "' is " +
                                        std::string(DTypeName(t.dtype())) + ", expert 0's is " +
                                        std::string(DTypeName(parts[0].dtype())));
          }
          parts.push_back(std::move(t));
        }
        Tensor stacked = HostTensor(parts[0].dtype(), want);
        for (size_t e = 0; e < parts.size(); ++e) {
          std::memcpy(static_cast<char*>(stacked.data()) + e * parts[e].nbytes(), parts[e].data(),
                      parts[e].nbytes());
        }
        return UploadStacked(stacked);
      }
      std::string fused = base + n.fused;
      tried += ", '" + fused + "'";
      if (!source_.Has(fused)) continue;
      ASSIGN_OR_RETURN(Tensor t, source_.Get(fused));
      if (n.fused_half < 0) {
        read_bytes_ += static_cast<int64_t>(t.nbytes());
        RETURN_IF_ERROR(CheckShape(fused, t, want));
        return UploadStacked(t);
      }
      read_bytes_ += static_cast<int64_t>(t.nbytes()) / 2;  // each half is read once
      RETURN_IF_ERROR(CheckShape(fused, t, Shape{num_experts, 2 * rows, cols}));
      Tensor half = HostTensor(t.dtype(), want);
      const size_t bytes = static_cast<size_t>(rows) * t.row_bytes();
      for (int64_t e = 0; e < num_experts; ++e) {
        std::memcpy(static_cast<char*>(half.data()) + static_cast<size_t>(e) * bytes,
                    static_cast<const char*>(t.data()) +
                        (2 * static_cast<size_t>(e) + static_cast<size_t>(n.fused_half)) * bytes,
                    bytes);
      }
      return UploadStacked(half);
    }
    return NotFoundError(source_.Describe() + ": missing the experts of layer " +
                         std::to_string(layer) + " (looked for " + tried + ")");
  }

  // gpt-oss's experts into loom's layout: gate and up [E, f, hidden], down [E, hidden, f], and
  // their biases (f32) [E, f] x2, [E, hidden]. The checkpoint holds `<mlp>.experts.gate_up_proj`
  // [E, hidden, 2f] with gate and up columns interleaved (gate 2j, up 2j + 1) and `down_proj`
  // [E, f, hidden] (x @ W layout), or their MXFP4 `_blocks` / `_scales` (the published files),
  // which decode to [E, out, in]; `gate_up_proj_bias` [E, 2f] (interleaved), `down_proj_bias`.
  Status GptOssExperts(int layer, int64_t num_experts, int64_t f, int64_t d,
                       Backend::MoeWeights* m) {
    if (naming_ == TensorNaming::kGguf) return GgufGptOssExperts(layer, num_experts, f, d, m);
    const std::string base = Name(naming_, "mlp.experts.", "", layer);
    ASSIGN_OR_RETURN(Tensor gate_up, OutInExperts(base + "gate_up_proj", num_experts, 2 * f, d));
    m->gate = UploadStacked(EveryOtherRow(gate_up, 0));
    m->up = UploadStacked(EveryOtherRow(gate_up, 1));
    gate_up = Tensor();
    ASSIGN_OR_RETURN(Tensor down, OutInExperts(base + "down_proj", num_experts, d, f));
    m->down = UploadStacked(std::move(down));

    ASSIGN_OR_RETURN(Tensor gate_up_bias,
                     F32Matrix(base + "gate_up_proj_bias", Shape{num_experts, 2 * f}));
    m->gate_bias = UploadVector(EveryOtherRow(gate_up_bias, 0));
    m->up_bias = UploadVector(EveryOtherRow(gate_up_bias, 1));
    ASSIGN_OR_RETURN(Tensor down_bias, F32Matrix(base + "down_proj_bias", Shape{num_experts, d}));
    m->down_bias = UploadVector(down_bias);
    return OkStatus();
  }

  // The same from a GGUF file as llama.cpp's converter writes gpt-oss: ffn_{gate,up,down}_exps
  // (already loom's [E, out, in], MXFP4 in the published conversions, kept as such) and their
  // `.bias` [E, out].
  Status GgufGptOssExperts(int layer, int64_t num_experts, int64_t f, int64_t d,
                           Backend::MoeWeights* m) {
    ASSIGN_OR_RETURN(m->gate,
                     Experts({{}, {}, "", -1, "ffn_gate_exps.weight"}, layer, num_experts, f, d));
    ASSIGN_OR_RETURN(m->up,
                     Experts({{}, {}, "", -1, "ffn_up_exps.weight"}, layer, num_experts, f, d));
    ASSIGN_OR_RETURN(m->down,
                     Experts({{}, {}, "", -1, "ffn_down_exps.weight"}, layer, num_experts, d, f));
    const auto bias = [&](const char* name, int64_t cols) -> StatusOr<Tensor> {
      ASSIGN_OR_RETURN(Tensor t,
                       F32Matrix(Name(naming_, "", name, layer), Shape{num_experts, cols}));
      return UploadVector(t);
    };
    ASSIGN_OR_RETURN(m->gate_bias, bias("ffn_gate_exps.bias", f));
    ASSIGN_OR_RETURN(m->up_bias, bias("ffn_up_exps.bias", f));
    ASSIGN_OR_RETURN(m->down_bias, bias("ffn_down_exps.bias", d));
    return OkStatus();
  }

  size_t total_bytes() const { return total_bytes_; }
  // The dtype holding the most matrix bytes (a Q4_K_M file: q4_K, though its largest matrix, the
  // output, is q6_K).
  DType main_dtype() const {
    DType best = DType::kF32;
    size_t most = 0;
    for (const auto& [dtype, bytes] : matrix_bytes_) {
      if (bytes > most) most = bytes, best = dtype;
    }
    return best;
  }
  // The last progress report: everything read.
  void ReportDone() const {
    if (progress_) progress_(read_bytes_, read_bytes_);
  }

 private:
  StatusOr<Tensor> Fetch(const std::string& name, int64_t rows, int64_t cols, int layer) {
    ASSIGN_OR_RETURN(Tensor t, source_.Get(name));
    ASSIGN_OR_RETURN(Tensor uploaded,
                     CheckAndUpload(name, std::move(t), rows, cols, layer >= 0 && !IsRouter(name)));
    if (progress_) progress_(read_bytes_, std::max(expected_bytes_, read_bytes_));
    return uploaded;
  }

  // Shape-checks a source tensor and uploads it (the read from the file happens here).
  // `quantizable`: a decoder layer's matrix, which --quantize re-encodes.
  StatusOr<Tensor> CheckAndUpload(const std::string& name, Tensor t, int64_t rows, int64_t cols,
                                  bool quantizable) {
    read_bytes_ += static_cast<int64_t>(t.nbytes());
    bool ok =
        cols == 0 ? (t.numel() == rows) : (t.ndim() == 2 && t.dim(0) == rows && t.dim(1) == cols);
    if (!ok) {
      std::string want = cols == 0 ? "[" + std::to_string(rows) + "]"
                                   : "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
      return InvalidArgumentError(source_.Describe() + ": tensor '" + name + "' has shape " +
                                  t.shape().ToString() + ", expected " + want);
    }
    if (cols == 0) {
      t = t.Reshape(Shape{rows});
      if (t.dtype() != DType::kF32 && t.dtype() != DType::kF16 && t.dtype() != DType::kBF16) {
        return InvalidArgumentError(source_.Describe() + ": vector tensor '" + name +
                                    "' must be f32/f16/bf16, got " +
                                    std::string(DTypeName(t.dtype())));
      }
      t = ToF32(t);  // norms and biases are tiny: keep them f32 for every backend op
    } else if (quantizable) {
      t = Requantize(std::move(t));
    }
    // Counted as the backend holds them (a device may dequantize what it does not keep).
    Tensor uploaded = backend_->UploadWeight(t);
    total_bytes_ += uploaded.nbytes();
    if (cols != 0) matrix_bytes_[uploaded.dtype()] += uploaded.nbytes();
    return uploaded;
  }

  Status CheckShape(const std::string& name, const Tensor& t, const Shape& want) const {
    if (t.shape() == want) return OkStatus();
    return InvalidArgumentError(source_.Describe() + ": tensor '" + name + "' has shape " +
                                t.shape().ToString() + ", expected " + want.ToString());
  }

  // A float matrix re-encoded as options_.quantize (when set and its rows fit the blocks).
  Tensor Requantize(Tensor t) const {
    if (!options_.quantize || GetDTypeInfo(t.dtype()).quantized ||
        (t.dtype() != DType::kF32 && t.dtype() != DType::kF16 && t.dtype() != DType::kBF16) ||
        t.shape()[t.ndim() - 1] % GetDTypeInfo(*options_.quantize).block_elems != 0) {
      return t;
    }
    return QuantizeMatrix(t, *options_.quantize);
  }

  Tensor UploadStacked(Tensor t) {
    t = Requantize(std::move(t));
    Tensor uploaded = backend_->UploadWeight(t);
    total_bytes_ += uploaded.nbytes();
    matrix_bytes_[uploaded.dtype()] += uploaded.nbytes();
    if (progress_) progress_(read_bytes_, std::max(expected_bytes_, read_bytes_));
    return uploaded;
  }

  // Stacked expert matrices [E, out, in] from `name`_blocks / `name`_scales (MXFP4, kept: the
  // backend's UploadWeight decides) or from `name` [E, in, out] (float, transposed).
  StatusOr<Tensor> OutInExperts(const std::string& name, int64_t num_experts, int64_t out,
                                int64_t in) {
    if (source_.Has(name + "_blocks")) {
      ASSIGN_OR_RETURN(Tensor blocks, source_.Get(name + "_blocks"));
      ASSIGN_OR_RETURN(Tensor scales, source_.Get(name + "_scales"));
      read_bytes_ += static_cast<int64_t>(blocks.nbytes() + scales.nbytes());
      RETURN_IF_ERROR(CheckShape(name + "_blocks", blocks, Shape{num_experts, out, in / 32, 16}));
      RETURN_IF_ERROR(CheckShape(name + "_scales", scales, Shape{num_experts, out, in / 32}));
      if (in % 32 != 0) {
        return InvalidArgumentError(source_.Describe() + ": MXFP4 tensor '" + name +
                                    "' has rows of " + std::to_string(in) +
                                    ", not a multiple of 32");
      }
      return Mxfp4FromHfBlocks(blocks, scales, source_.Describe() + ": '" + name + "'");
    }
    if (!source_.Has(name)) {
      return NotFoundError(source_.Describe() + ": missing tensor '" + name + "' (or its MXFP4 '" +
                           name + "_blocks')");
    }
    ASSIGN_OR_RETURN(Tensor t, source_.Get(name));
    read_bytes_ += static_cast<int64_t>(t.nbytes());
    RETURN_IF_ERROR(CheckShape(name, t, Shape{num_experts, in, out}));
    if (t.dtype() != DType::kF32 && t.dtype() != DType::kF16 && t.dtype() != DType::kBF16) {
      return InvalidArgumentError(source_.Describe() + ": tensor '" + name + "' must be " +
                                  "f32/f16/bf16, got " + std::string(DTypeName(t.dtype())));
    }
    return TransposeExperts(t);
  }

  // A small float tensor of shape `want` as f32 on the host.
  StatusOr<Tensor> F32Matrix(const std::string& name, const Shape& want) {
    if (!source_.Has(name)) {
      return NotFoundError(source_.Describe() + ": missing tensor '" + name + "'");
    }
    ASSIGN_OR_RETURN(Tensor t, source_.Get(name));
    read_bytes_ += static_cast<int64_t>(t.nbytes());
    RETURN_IF_ERROR(CheckShape(name, t, want));
    if (t.dtype() != DType::kF32 && t.dtype() != DType::kF16 && t.dtype() != DType::kBF16) {
      return InvalidArgumentError(source_.Describe() + ": tensor '" + name + "' must be " +
                                  "f32/f16/bf16, got " + std::string(DTypeName(t.dtype())));
    }
    return ToF32(t);
  }

  // A small f32 tensor kept f32 on every backend (uploaded as a vector, as biases are).
  Tensor UploadVector(const Tensor& t) {
    Tensor uploaded = backend_->UploadWeight(t.Reshape(Shape{t.numel()})).Reshape(t.shape());
    total_bytes_ += uploaded.nbytes();
    return uploaded;
  }

  static Tensor ToF32(const Tensor& t) {
    if (t.dtype() == DType::kF32) return t;
    Tensor out = HostTensor(DType::kF32, t.shape());
    const auto* src = t.data_as<const uint16_t>();
    float* dst = out.data_as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      dst[i] = t.dtype() == DType::kF16 ? F16ToF32(src[i]) : Bf16ToF32(src[i]);
    }
    return out;
  }

  const TensorSource& source_;
  TensorNaming naming_;
  Backend* backend_;
  const ProgressFn& progress_;
  const WeightOptions& options_;
  int64_t expected_bytes_;  // source_.data_bytes(): the progress total
  int64_t read_bytes_ = 0;  // source bytes of the tensors fetched so far
  size_t total_bytes_ = 0;
  std::map<DType, size_t> matrix_bytes_;  // bytes of the matrices of each dtype
};

}  // namespace

// A sparse layer's router, experts and shared expert. Router names: Qwen's `mlp.gate`, Mixtral's
// `block_sparse_moe.gate` (or `mlp.gate` as transformers 5 renames it), GGUF's ffn_gate_inp.
Status LoadMoe(Loader& L, const ModelConfig& cfg, int i, Backend::MoeWeights* m) {
  const int64_t d = cfg.hidden_size, fe = cfg.moe_intermediate_size, e = cfg.num_experts;
  if (cfg.moe_swiglu_limit > 0.f) {  // gpt-oss: `mlp.router` with a bias, its own expert layout
    ASSIGN_OR_RETURN(m->router, L.Required("mlp.router.weight", "ffn_gate_inp.weight", i, e, d));
    ASSIGN_OR_RETURN(m->router_bias, L.Required("mlp.router.bias", "ffn_gate_inp.bias", i, e, 0));
    return L.GptOssExperts(i, e, fe, d, m);
  }
  const std::vector<std::string> prefixes = {"mlp", "block_sparse_moe"};
  ASSIGN_OR_RETURN(m->router, L.Optional("mlp.gate.weight", "ffn_gate_inp.weight", i, e, d));
  if (!m->router.defined()) {
    ASSIGN_OR_RETURN(m->router,
                     L.Required("block_sparse_moe.gate.weight", "ffn_gate_inp.weight", i, e, d));
  }
  ASSIGN_OR_RETURN(
      m->gate, L.Experts({prefixes, {"gate_proj", "w1"}, "gate_up_proj", 0, "ffn_gate_exps.weight"},
                         i, e, fe, d));
  ASSIGN_OR_RETURN(
      m->up, L.Experts({prefixes, {"up_proj", "w3"}, "gate_up_proj", 1, "ffn_up_exps.weight"}, i, e,
                       fe, d));
  ASSIGN_OR_RETURN(
      m->down, L.Experts({prefixes, {"down_proj", "w2"}, "down_proj", -1, "ffn_down_exps.weight"},
                         i, e, d, fe));
  if (const int64_t fs = cfg.shared_expert_intermediate_size; fs > 0) {
    ASSIGN_OR_RETURN(m->shared_gate, L.Required("mlp.shared_expert.gate_proj.weight",
                                                "ffn_gate_shexp.weight", i, fs, d));
    ASSIGN_OR_RETURN(m->shared_up, L.Required("mlp.shared_expert.up_proj.weight",
                                              "ffn_up_shexp.weight", i, fs, d));
    ASSIGN_OR_RETURN(m->shared_down, L.Required("mlp.shared_expert.down_proj.weight",
                                                "ffn_down_shexp.weight", i, d, fs));
    ASSIGN_OR_RETURN(m->shared_router, L.Required("mlp.shared_expert_gate.weight",
                                                  "ffn_gate_inp_shexp.weight", i, 1, d));
  }
  return OkStatus();
}

Status CheckBackendRunsModel(const ModelConfig& cfg, const Backend& backend) {
  RETURN_IF_ERROR(backend.CheckHeadDim(cfg.head_dim));
  if (cfg.attention_sinks && !backend.has_attention_sinks()) {
    return UnimplementedError(cfg.arch + "'s attention sinks: the " + backend.name() +
                              " backend has none yet: run it with --device cpu");
  }
  if (cfg.moe_swiglu_limit > 0.f && !backend.has_moe_biases()) {
    return UnimplementedError(cfg.arch + "'s experts (biases, clamped SwiGLU): the " +
                              backend.name() + " backend has none yet: run it with --device cpu");
  }
  if (cfg.num_experts == 0) return OkStatus();
  if (!backend.has_moe()) {
    return UnimplementedError("a mixture-of-experts model (" + cfg.arch + ", " +
                              std::to_string(cfg.num_experts) + " experts); the " + backend.name() +
                              " backend has no MoE layers yet: run it with --device cpu");
  }
  return backend.CheckMoe(cfg.hidden_size, cfg.moe_intermediate_size, cfg.num_experts,
                          cfg.num_experts_per_tok);
}

bool IsLoadQuantizeDType(DType dtype) { return dtype == DType::kFP8; }

StatusOr<Weights> LoadWeights(const ModelConfig& cfg, const TensorSource& source,
                              TensorNaming naming, Backend* backend, const ProgressFn& progress,
                              const WeightOptions& options) {
  RETURN_IF_ERROR(CheckBackendRunsModel(cfg, *backend).WithContext(source.Describe()));
  if (options.quantize && !IsLoadQuantizeDType(*options.quantize)) {
    return InvalidArgumentError("--quantize " + std::string(DTypeName(*options.quantize)) +
                                ": loom quantizes weights at load to fp8 only");
  }
  Loader L(source, naming, backend, progress, options);
  const int64_t d = cfg.hidden_size, f = cfg.intermediate_size, hd = cfg.head_dim;
  const int64_t q_dim = cfg.num_heads * hd, kv_dim = cfg.num_kv_heads * hd;
  Weights w;
  ASSIGN_OR_RETURN(
      w.embed, L.Required("model.embed_tokens.weight", "token_embd.weight", -1, cfg.vocab_size, d));
  ASSIGN_OR_RETURN(w.final_norm, L.Required("model.norm.weight", "output_norm.weight", -1, d, 0));
  ASSIGN_OR_RETURN(w.lm_head, L.Optional("lm_head.weight", "output.weight", -1, cfg.vocab_size, d));
  if (!w.lm_head.defined()) {
    if (!cfg.tie_word_embeddings && naming == TensorNaming::kHuggingFace) {
      return NotFoundError(source.Describe() +
                           ": missing tensor 'lm_head.weight' (tie_word_embeddings is false)");
    }
    w.lm_head = w.embed;
  }
  w.layers.resize(static_cast<size_t>(cfg.num_layers));
  for (int i = 0; i < cfg.num_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    ASSIGN_OR_RETURN(l.attn_norm,
                     L.Required("input_layernorm.weight", "attn_norm.weight", i, d, 0));
    if (cfg.fused_qkv) {
      ASSIGN_OR_RETURN(l.wqkv, L.Required("self_attn.qkv_proj.weight", "attn_qkv.weight", i,
                                          q_dim + 2 * kv_dim, d));
    } else {
      ASSIGN_OR_RETURN(l.wq, L.Required("self_attn.q_proj.weight", "attn_q.weight", i, q_dim, d));
      ASSIGN_OR_RETURN(l.wk, L.Required("self_attn.k_proj.weight", "attn_k.weight", i, kv_dim, d));
      ASSIGN_OR_RETURN(l.wv, L.Required("self_attn.v_proj.weight", "attn_v.weight", i, kv_dim, d));
      if (cfg.attention_bias) {
        ASSIGN_OR_RETURN(l.bq, L.Required("self_attn.q_proj.bias", "attn_q.bias", i, q_dim, 0));
        ASSIGN_OR_RETURN(l.bk, L.Required("self_attn.k_proj.bias", "attn_k.bias", i, kv_dim, 0));
        ASSIGN_OR_RETURN(l.bv, L.Required("self_attn.v_proj.bias", "attn_v.bias", i, kv_dim, 0));
      }
    }
    ASSIGN_OR_RETURN(l.wo,
                     L.Required("self_attn.o_proj.weight", "attn_output.weight", i, d, q_dim));
    ASSIGN_OR_RETURN(l.bo, L.Optional("self_attn.o_proj.bias", "attn_output.bias", i, d, 0));
    if (cfg.attention_sinks) {
      ASSIGN_OR_RETURN(l.sinks,
                       L.Required("self_attn.sinks", "attn_sinks.weight", i, cfg.num_heads, 0));
    }
    if (cfg.qk_norm) {
      ASSIGN_OR_RETURN(l.q_norm,
                       L.Required("self_attn.q_norm.weight", "attn_q_norm.weight", i, hd, 0));
      ASSIGN_OR_RETURN(l.k_norm,
                       L.Required("self_attn.k_norm.weight", "attn_k_norm.weight", i, hd, 0));
    }
    if (cfg.sandwich_norm) {
      ASSIGN_OR_RETURN(l.post_attn_norm, L.Required("post_attention_layernorm.weight",
                                                    "post_attention_norm.weight", i, d, 0));
      ASSIGN_OR_RETURN(l.ffn_norm,
                       L.Required("pre_feedforward_layernorm.weight", "ffn_norm.weight", i, d, 0));
      ASSIGN_OR_RETURN(l.post_ffn_norm, L.Required("post_feedforward_layernorm.weight",
                                                   "post_ffw_norm.weight", i, d, 0));
    } else {
      // The norm before the MLP (llama.cpp names gpt-oss's post_attention_norm).
      const char* gguf_name =
          cfg.arch == "gpt_oss" ? "post_attention_norm.weight" : "ffn_norm.weight";
      ASSIGN_OR_RETURN(l.ffn_norm,
                       L.Required("post_attention_layernorm.weight", gguf_name, i, d, 0));
    }
    if (cfg.is_moe(i)) {
      RETURN_IF_ERROR(LoadMoe(L, cfg, i, &l.moe));
    } else if (cfg.fused_gate_up) {
      ASSIGN_OR_RETURN(l.w_gate_up,
                       L.Required("mlp.gate_up_proj.weight", "ffn_up.weight", i, 2 * f, d));
    } else {
      ASSIGN_OR_RETURN(l.w_gate, L.Required("mlp.gate_proj.weight", "ffn_gate.weight", i, f, d));
      ASSIGN_OR_RETURN(l.w_up, L.Required("mlp.up_proj.weight", "ffn_up.weight", i, f, d));
    }
    if (!cfg.is_moe(i)) {
      ASSIGN_OR_RETURN(l.w_down, L.Required("mlp.down_proj.weight", "ffn_down.weight", i, d, f));
    }
  }
  w.total_bytes = L.total_bytes();
  w.dtype = L.main_dtype();
  L.ReportDone();
  return w;
}

Tensor TransposeExperts(const Tensor& t) {
  const int64_t e = t.dim(0), a = t.dim(1), b = t.dim(2);
  Tensor out = HostTensor(t.dtype(), Shape{e, b, a});
  const size_t es = GetDTypeInfo(t.dtype()).block_bytes;
  constexpr int64_t kTile = 64;  // in tiles
  for (int64_t x = 0; x < e; ++x) {
    const char* src = static_cast<const char*>(t.data()) + static_cast<size_t>(x * a * b) * es;
    char* dst = static_cast<char*>(out.data()) + static_cast<size_t>(x * a * b) * es;
    for (int64_t i0 = 0; i0 < a; i0 += kTile) {
      for (int64_t j0 = 0; j0 < b; j0 += kTile) {
        for (int64_t i = i0; i < std::min(a, i0 + kTile); ++i) {
          for (int64_t j = j0; j < std::min(b, j0 + kTile); ++j) {
            std::memcpy(dst + static_cast<size_t>(j * a + i) * es,
                        src + static_cast<size_t>(i * b + j) * es, es);
          }
        }
      }
    }
  }
  return out;
}

Tensor EveryOtherRow(const Tensor& t, int half) {
  std::vector<int64_t> dims;
  for (int i = 0; i < t.ndim(); ++i) dims.push_back(t.dim(i));
  const size_t row = t.nbytes() / static_cast<size_t>(dims[0] * dims[1]);
  dims[1] /= 2;
  Tensor out = HostTensor(t.dtype(), ShapeFromDims(dims));
  for (int64_t r = 0; r < dims[0] * dims[1]; ++r) {
    std::memcpy(static_cast<char*>(out.data()) + static_cast<size_t>(r) * row,
                static_cast<const char*>(t.data()) + static_cast<size_t>(2 * r + half) * row, row);
  }
  return out;
}

void FuseProjections(Weights* weights, Backend* backend) {
  for (LayerWeights& l : weights->layers) {
    // Parts of different types (a GGUF file's quant mix) stay separate.
    if (!l.wqkv.defined() && l.wq.defined() && l.wk.dtype() == l.wq.dtype() &&
        l.wv.dtype() == l.wq.dtype()) {
      l.wqkv = backend->ConcatRows({l.wq, l.wk, l.wv});
      if (l.bq.defined() || l.bk.defined() || l.bv.defined()) {
        CHECK(l.bq.defined() && l.bk.defined() && l.bv.defined())
            << "FuseProjections: q/k/v biases must all be present or all absent";
        l.bqkv = backend->ConcatRows({l.bq, l.bk, l.bv});
      }
      l.wq = l.wk = l.wv = l.bq = l.bk = l.bv = Tensor();
    }
    if (!l.w_gate_up.defined() && l.w_gate.defined() && l.w_up.dtype() == l.w_gate.dtype()) {
      l.w_gate_up = backend->FuseGateUp(l.w_gate, l.w_up);
      l.w_gate = l.w_up = Tensor();
    } else if (l.w_gate_up.defined() && !l.w_gate.defined()) {  // fused in the checkpoint
      const int64_t f = l.w_gate_up.rows() / 2;
      l.w_gate_up = backend->FuseGateUp(l.w_gate_up.Slice(0, f), l.w_gate_up.Slice(f, f));
    }
    backend->TrimMemory();  // one layer's separate copies at a time: peak = model + one layer
  }
}

}  // namespace loom
