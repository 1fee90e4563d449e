// RoPE frequency tables for every scaling type HF transformers implements for our architectures
// (default, linear, llama3, yarn), computed on the host exactly as transformers'
// modeling_rope_utils does (in double, then rounded to f32), then divided by the per-dimension
// factors of a GGUF's rope_freqs.weight when RopeConfig::freq_factors is set. Both backends rotate
// with this one table, so every scaling variant lives here and nowhere in the kernels.
#pragma once

#include <vector>

#include "model/model_config.h"

namespace loom {

struct RopeFrequencies {
  std::vector<float> inv_freq;   // [rotary_dim / 2]
  float attention_factor = 1.f;  // multiplies cos and sin (yarn)
};

// `max_position_embeddings` is the model's (yarn uses it when original_max_position_embeddings
// is unset).
RopeFrequencies ComputeRopeFrequencies(const RopeConfig& rope, int rotary_dim,
                                       int max_position_embeddings);

}  // namespace loom
