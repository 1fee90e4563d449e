// Random-weight model configs shared by the tests and the CUDA benchmarks (header-only).
#pragma once

#include <memory>

#include "model/dummy_weights.h"

namespace loom::test_models {

// Llama-3.1-8B: 32 layers, hidden 4096, 32 heads / 8 kv heads of 128, FFN 14336, vocab 128256,
// llama3 rope scaling (factor 8, theta 500000), untied lm_head.
inline ModelConfig Llama31_8BConfig() {
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

// A 1-layer llama: vocab 32, hidden 16, 2 query heads over 1 KV head of dim 8; f32, seed 5.
inline std::unique_ptr<Model> TinyLlama(Backend* be) {
  ModelConfig c;
  c.arch = "llama";
  c.vocab_size = 32;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_layers = 1;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.rotary_dim = 8;
  c.max_position_embeddings = 64;
  c.layer_window = {0};
  c.rope_local = c.rope;
  return MakeDummyModelFromConfig(c, be, DType::kF32, 5, "tiny");
}

// A 2-layer Gemma-3-like config: a sliding-window layer (8) then a global one, q/k norms,
// sandwich norms, (1 + w) RMSNorm, GeGLU; 4 query heads over 2 KV heads of dim 64.
inline ModelConfig GemmaLikeConfig(int vocab_size) {
  ModelConfig c;
  c.arch = "gemma3";
  c.vocab_size = vocab_size;
  c.hidden_size = 128;
  c.intermediate_size = 256;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.rotary_dim = 64;
  c.max_position_embeddings = 256;
  c.qk_norm = true;
  c.norm_plus_one = true;
  c.sandwich_norm = true;
  c.activation = Activation::kGeluTanh;
  c.layer_window = {8, 0};
  c.rope_local = c.rope;
  return c;
}

}  // namespace loom::test_models
