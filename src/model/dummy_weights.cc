#include "model/dummy_weights.h"

#include <xxhash.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "base/hash_uniform.h"
#include "io/json_file.h"
#include "model/arch/arch.h"
#include "model/weights.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

constexpr float kStd = 0.02f;

class Filler {
 public:
  Filler(Backend* backend, DType matrix_dtype, uint64_t seed, DummyScale scale,
         std::optional<DType> quantize)
      : backend_(backend), matrix_dtype_(matrix_dtype), seed_(seed), scale_(scale) {
    // A device backend keeps matrices in bf16 (what Upload would make of them there).
    if (backend_->device() != Device::kCpu) matrix_dtype_ = DType::kBF16;
    layer_dtype_ = quantize.value_or(matrix_dtype_);
    stacked_dtype_ = backend_->device() == Device::kCpu ? layer_dtype_ : matrix_dtype_;
  }

  // A decoder layer's matrix: as Matrix, in the --quantize dtype when its rows fit the blocks.
  Tensor LayerMatrix(int64_t rows, int64_t cols) {
    return Uniform(
        cols % GetDTypeInfo(layer_dtype_).block_elems == 0 ? layer_dtype_ : matrix_dtype_,
        Shape{rows, cols});
  }

  // [rows, cols], uniform with std kStd (kUnitGain: 1 / sqrt(cols)).
  Tensor Matrix(int64_t rows, int64_t cols) { return Uniform(matrix_dtype_, Shape{rows, cols}); }
  // The token embedding [vocab, d] (and a tied lm_head).
  Tensor Embedding(int64_t rows, int64_t cols) {
    return scale_ == DummyScale::kHf ? Matrix(rows, cols)
                                     : Make(matrix_dtype_, Shape{rows, cols}, -1.f, 2.f);
  }
  // [experts, rows, cols], each expert's matrix as Matrix(rows, cols) draws it.
  Tensor Stacked(int64_t experts, int64_t rows, int64_t cols) {
    return Uniform(
        cols % GetDTypeInfo(stacked_dtype_).block_elems == 0 ? stacked_dtype_ : matrix_dtype_,
        Shape{experts, rows, cols});
  }
  Tensor Norm(int64_t d, bool plus_one) {
    return plus_one ? Make(DType::kF32, Shape{d}, -0.1f, 0.2f)
                    : Make(DType::kF32, Shape{d}, 0.9f, 0.2f);
  }
  Tensor Bias(int64_t d) { return Make(DType::kF32, Shape{d}, -kStd, 2 * kStd); }
  // Stacked per-expert biases [experts, d] (f32).
  Tensor Biases(int64_t experts, int64_t d) {
    return Make(DType::kF32, Shape{experts, d}, -kStd, 2 * kStd);
  }

  size_t bytes() const { return bytes_; }
  // The dtype holding most matrix bytes (the ready card's label, as the loader's).
  DType main_dtype() const {
    DType best = matrix_dtype_;
    size_t most = 0;
    for (const auto& [dtype, bytes] : matrix_bytes_) {
      if (bytes > most) most = bytes, best = dtype;
    }
    return best;
  }

 private:
  // Uniform with std kStd (kUnitGain: 1 / sqrt(cols)), cols = the last dimension.
  Tensor Uniform(DType dtype, Shape shape) {
    const int64_t cols = shape[shape.ndim() - 1];
    const float std_dev =
        scale_ == DummyScale::kHf ? kStd : 1.f / std::sqrt(static_cast<float>(cols));
    const float a = std_dev * std::sqrt(3.f);
    Tensor t = Make(dtype, std::move(shape), -a, 2 * a);
    matrix_bytes_[dtype] += t.nbytes();
    return t;
  }

  Tensor Make(DType dtype, Shape shape, float lo, float scale) {
    const uint64_t seed = seed_ * 1000003u + counter_++;
    // Filled where it lives: on a device without a host copy. 1-D tensors stay f32.
    Tensor t = backend_->device() == Device::kCpu ? HostTensor(dtype, shape)
                                                  : backend_->Alloc(dtype, shape);
    backend_->FillUniform(t, seed, lo, scale);
    bytes_ += t.nbytes();
    return t;
  }

  Backend* backend_;
  DType matrix_dtype_, layer_dtype_, stacked_dtype_;
  std::map<DType, size_t> matrix_bytes_;
  uint64_t seed_;
  DummyScale scale_;
  uint64_t counter_ = 0;
  size_t bytes_ = 0;
};

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::unique_ptr<Model> MakeDummyModelFromConfig(ModelConfig c, Backend* backend, DType weight_dtype,
                                                uint64_t seed, std::string origin, DummyScale scale,
                                                std::optional<DType> quantize) {
  CHECK_OK(c.Validate());
  CHECK(c.num_experts == 0 || backend->has_moe())
      << "dummy weights: " << backend->name() << " has no MoE layers";
  CHECK(weight_dtype == DType::kBF16 || weight_dtype == DType::kF16 || weight_dtype == DType::kF32)
      << "dummy weights: unsupported weight dtype " << DTypeName(weight_dtype);
  CHECK(!quantize || IsLoadQuantizeDType(*quantize))
      << "dummy weights: --quantize " << DTypeName(*quantize);
  Filler f(backend, weight_dtype, seed, scale, quantize);
  const bool p1 = c.norm_plus_one;
  const int64_t d = c.hidden_size, ff = c.intermediate_size, hd = c.head_dim;
  const int64_t q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  Weights w;
  w.embed = f.Embedding(c.vocab_size, d);
  w.final_norm = f.Norm(d, p1);
  w.lm_head = c.tie_word_embeddings ? w.embed : f.Matrix(c.vocab_size, d);
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    l.attn_norm = f.Norm(d, p1);
    if (c.fused_qkv) {
      l.wqkv = f.LayerMatrix(q_dim + 2 * kv_dim, d);
    } else {
      l.wq = f.LayerMatrix(q_dim, d);
      l.wk = f.LayerMatrix(kv_dim, d);
      l.wv = f.LayerMatrix(kv_dim, d);
      if (c.attention_bias) {
        l.bq = f.Bias(q_dim);
        l.bk = f.Bias(kv_dim);
        l.bv = f.Bias(kv_dim);
      }
    }
    l.wo = f.LayerMatrix(d, q_dim);
    if (c.attention_out_bias) l.bo = f.Bias(d);
    if (c.attention_sinks) l.sinks = f.Bias(c.num_heads);
    if (c.qk_norm) {
      l.q_norm = f.Norm(hd, p1);
      l.k_norm = f.Norm(hd, p1);
    }
    if (c.sandwich_norm) {
      l.post_attn_norm = f.Norm(d, p1);
      l.post_ffn_norm = f.Norm(d, p1);
    }
    l.ffn_norm = f.Norm(d, p1);
    if (c.is_moe(i)) {
      const int64_t e = c.num_experts, fe = c.moe_intermediate_size;
      l.moe.router = f.Matrix(e, d);
      l.moe.gate = f.Stacked(e, fe, d);
      l.moe.up = f.Stacked(e, fe, d);
      l.moe.down = f.Stacked(e, d, fe);
      if (c.moe_swiglu_limit > 0.f) {  // gpt-oss's biases
        l.moe.router_bias = f.Bias(e);
        l.moe.gate_bias = f.Biases(e, fe);
        l.moe.up_bias = f.Biases(e, fe);
        l.moe.down_bias = f.Biases(e, d);
      }
      if (const int64_t fs = c.shared_expert_intermediate_size; fs > 0) {
        l.moe.shared_gate = f.LayerMatrix(fs, d);
        l.moe.shared_up = f.LayerMatrix(fs, d);
        l.moe.shared_down = f.LayerMatrix(d, fs);
        l.moe.shared_router = f.Matrix(1, d);
      }
      continue;
    }
    if (c.fused_gate_up) {
      l.w_gate_up = f.LayerMatrix(2 * ff, d);
    } else {
      l.w_gate = f.LayerMatrix(ff, d);
      l.w_up = f.LayerMatrix(ff, d);
    }
    l.w_down = f.LayerMatrix(d, ff);
  }
  w.total_bytes = f.bytes();
  w.dtype = f.main_dtype();
  // Gemma scales embeddings by sqrt(hidden) rounded to the embedding's dtype (as LoadModel does).
  if (c.embed_scale != 1.f && w.embed.dtype() == DType::kBF16) {
    c.embed_scale = Bf16ToF32(F32ToBf16(c.embed_scale));
  } else if (c.embed_scale != 1.f && w.embed.dtype() == DType::kF16) {
    c.embed_scale = F16ToF32(F32ToF16(c.embed_scale));
  }
  const uint64_t fp = XXH3_64bits_withSeed(origin.data(), origin.size(), seed);
  ModelInfo info{origin, "dummy", "dummy:" + Hex(fp) + ":" + std::string(DTypeName(w.dtype))};
  return std::make_unique<Model>(std::move(c), std::move(w), std::move(info), backend);
}

StatusOr<std::unique_ptr<Model>> MakeDummyModel(const std::string& config_path, Backend* backend,
                                                DType weight_dtype, uint64_t seed,
                                                std::optional<DType> quantize) {
  std::error_code ec;
  std::string path = config_path;
  if (fs::is_directory(path, ec)) path = (fs::path(path) / "config.json").string();
  if (!fs::is_regular_file(path, ec)) {
    return NotFoundError("--dummy-weights " + config_path +
                         ": no such config.json (pass a config.json file or a directory with one)");
  }
  if (weight_dtype != DType::kBF16 && weight_dtype != DType::kF16 && weight_dtype != DType::kF32) {
    return InvalidArgumentError("dummy weights: weight dtype must be bf16, f16 or f32, got " +
                                std::string(DTypeName(weight_dtype)));
  }
  ASSIGN_OR_RETURN(nlohmann::json j, LoadJsonFile(path));
  if (!j.is_object()) return InvalidArgumentError(path + ": expected a JSON object");
  ASSIGN_OR_RETURN(const ArchSpec* arch, FindArchForHfConfig(j));
  ModelConfig cfg;
  try {
    RETURN_IF_ERROR(arch->from_hf(j, &cfg).WithContext(path));
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(path + ": " + e.what());
  }
  RETURN_IF_ERROR(cfg.Validate().WithContext(path));
  RETURN_IF_ERROR(CheckBackendRunsModel(cfg, *backend).WithContext(path));
  if (quantize && !IsLoadQuantizeDType(*quantize)) {
    return InvalidArgumentError("--quantize " + std::string(DTypeName(*quantize)) +
                                ": loom quantizes weights at load to fp8 only");
  }
  return MakeDummyModelFromConfig(std::move(cfg), backend, weight_dtype, seed, path,
                                  DummyScale::kHf, quantize);
}

}  // namespace loom
