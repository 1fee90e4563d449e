// The CUDA benchmarks' model: Llama-3.1-8B's shapes with random bf16 weights filled on the
// device (model/dummy_weights.h, DummyScale::kUnitGain: O(1) activations through the layers).
#pragma once

#include <memory>

#include "model/dummy_weights.h"

namespace loom {

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

inline std::unique_ptr<Model> MakeBenchModel(Backend* backend, uint64_t seed = 42) {
  return MakeDummyModelFromConfig(Llama31_8BConfig(), backend, DType::kBF16, seed,
                                  "llama-3.1-8b shapes", DummyScale::kUnitGain);
}

}  // namespace loom
