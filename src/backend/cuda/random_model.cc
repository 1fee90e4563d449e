#include "backend/cuda/random_model.h"

#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "base/hash_uniform.h"

namespace loom {
namespace {

class Filler {
 public:
  Filler(Backend* backend, uint64_t seed)
      : backend_(backend), cuda_(dynamic_cast<CudaBackend*>(backend)), seed_(seed) {}

  Tensor Matrix(int64_t rows, int64_t cols) {
    const float a = std::sqrt(3.0f / static_cast<float>(cols));
    return Make(DType::kBF16, Shape{rows, cols}, -a, 2 * a);
  }
  Tensor Embedding(int64_t rows, int64_t cols) {
    return Make(DType::kBF16, Shape{rows, cols}, -1.f, 2.f);
  }
  Tensor Norm(int64_t d) { return Make(DType::kF32, Shape{d}, 0.9f, 0.2f); }
  size_t bytes() const { return bytes_; }

 private:
  Tensor Make(DType dtype, Shape shape, float lo, float scale) {
    const uint64_t seed = seed_ * 1000003u + counter_++;
    if (cuda_ != nullptr) {
      Tensor t = cuda_->Alloc(dtype, shape);
      cuda_->FillUniform(t, seed, lo, scale);
      bytes_ += t.nbytes();
      return t;
    }
    Tensor h = HostTensor(DType::kF32, shape);
    float* p = h.data_as<float>();
    for (int64_t i = 0; i < h.numel(); ++i) {
      const float v = HashUniform(seed, static_cast<uint64_t>(i), lo, scale);
      p[i] = dtype == DType::kBF16 ? Bf16ToF32(F32ToBf16(v)) : v;
    }
    bytes_ += h.nbytes();
    return backend_->Upload(h);
  }

  Backend* backend_;
  CudaBackend* cuda_;
  uint64_t seed_;
  uint64_t counter_ = 0;
  size_t bytes_ = 0;
};

}  // namespace

ModelConfig Llama31_8BConfig() {
  ModelConfig c;
  c.arch = "llama";
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.rotary_dim = 128;
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5f;
  c.rope.type = RopeType::kLlama3;
  c.rope.theta = 500000.f;
  c.rope.factor = 8.f;
  c.rope.low_freq_factor = 1.f;
  c.rope.high_freq_factor = 4.f;
  c.rope.original_max_position_embeddings = 8192;
  c.rope_local = c.rope;
  c.layer_window.assign(static_cast<size_t>(c.num_layers), 0);
  return c;
}

std::unique_ptr<Model> MakeRandomModel(const ModelConfig& c, Backend* backend, uint64_t seed) {
  CHECK_OK(c.Validate());
  CHECK(!c.fused_qkv && !c.fused_gate_up) << "MakeRandomModel: fused projections not built";
  Filler f(backend, seed);
  const int64_t d = c.hidden_size, ff = c.intermediate_size, hd = c.head_dim;
  const int64_t q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  Weights w;
  w.embed = f.Embedding(c.vocab_size, d);
  w.final_norm = f.Norm(d);
  w.lm_head = c.tie_word_embeddings ? w.embed : f.Matrix(c.vocab_size, d);
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights l;
    l.attn_norm = f.Norm(d);
    l.wq = f.Matrix(q_dim, d);
    l.wk = f.Matrix(kv_dim, d);
    l.wv = f.Matrix(kv_dim, d);
    l.wo = f.Matrix(d, q_dim);
    if (c.attention_bias) {
      l.bq = f.Norm(q_dim);
      l.bk = f.Norm(kv_dim);
      l.bv = f.Norm(kv_dim);
    }
    if (c.qk_norm) {
      l.q_norm = f.Norm(hd);
      l.k_norm = f.Norm(hd);
    }
    if (c.sandwich_norm) {
      l.post_attn_norm = f.Norm(d);
      l.post_ffn_norm = f.Norm(d);
    }
    l.ffn_norm = f.Norm(d);
    l.w_gate = f.Matrix(ff, d);
    l.w_up = f.Matrix(ff, d);
    l.w_down = f.Matrix(d, ff);
    w.layers.push_back(std::move(l));
  }
  w.total_bytes = f.bytes();
  w.dtype = DType::kBF16;
  ModelInfo info{"random", "random", "random:" + std::to_string(seed)};
  return std::make_unique<Model>(c, std::move(w), std::move(info), backend);
}

}  // namespace loom
