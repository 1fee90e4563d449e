// RoPE frequency tables for every scaling type HF transformers implements for our architectures
// (default, linear, llama3, yarn), computed on the host exactly as transformers'
// modeling_rope_utils does (in double, then rounded to f32).
#pragma once

#include <vector>

#include "model/model_config.h"

namespace loom {

struct RopeFrequencies {
  std::vector<float> inv_freq;  // [rotary_dim / 2]
  float attention_factor = 1.f; // multiplies cos and sin (yarn)
};

// `max_position_embeddings` is the model's (yarn uses it when original_max_position_embeddings
// is unset).
RopeFrequencies ComputeRopeFrequencies(const RopeConfig& rope, int rotary_dim,
                                       int max_position_embeddings);

}  // namespace loom
