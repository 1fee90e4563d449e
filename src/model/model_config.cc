#include "model/model_config.h"

#include <cmath>

namespace loom {

float ModelConfig::softmax_scale() const {
  return query_scale > 0.f ? query_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

Status ModelConfig::Validate() const {
  auto positive = [](int v, const char* name) -> Status {
    if (v <= 0)
      return InvalidArgumentError(std::string(name) + " must be > 0, got " + std::to_string(v));
    return OkStatus();
  };
  RETURN_IF_ERROR(positive(vocab_size, "vocab_size"));
  RETURN_IF_ERROR(positive(hidden_size, "hidden_size"));
  RETURN_IF_ERROR(positive(intermediate_size, "intermediate_size"));
  RETURN_IF_ERROR(positive(num_layers, "num_hidden_layers"));
  RETURN_IF_ERROR(positive(num_heads, "num_attention_heads"));
  RETURN_IF_ERROR(positive(num_kv_heads, "num_key_value_heads"));
  RETURN_IF_ERROR(positive(head_dim, "head_dim"));
  RETURN_IF_ERROR(positive(max_position_embeddings, "max_position_embeddings"));
  if (num_heads % num_kv_heads != 0) {
    return InvalidArgumentError("num_attention_heads (" + std::to_string(num_heads) +
                                ") must be a multiple of num_key_value_heads (" +
                                std::to_string(num_kv_heads) + ")");
  }
  if (rotary_dim <= 0 || rotary_dim > head_dim || rotary_dim % 2 != 0) {
    return InvalidArgumentError("rotary dim " + std::to_string(rotary_dim) +
                                " must be even and in (0, head_dim=" + std::to_string(head_dim) +
                                "]");
  }
  if (!(rms_norm_eps > 0.f)) return InvalidArgumentError("rms_norm_eps must be > 0");
  if (static_cast<int>(layer_window.size()) != num_layers) {
    return InvalidArgumentError("layer_window has " + std::to_string(layer_window.size()) +
                                " entries for " + std::to_string(num_layers) + " layers");
  }
  for (int w : layer_window) {
    if (w < 0) return InvalidArgumentError("sliding_window must be >= 0");
  }
  if (num_experts < 0) return InvalidArgumentError("num_experts must be >= 0");
  if (num_experts > 0) {
    if (num_experts_per_tok < 1 || num_experts_per_tok > num_experts) {
      return InvalidArgumentError("num_experts_per_tok " + std::to_string(num_experts_per_tok) +
                                  " must be in [1, num_experts=" + std::to_string(num_experts) +
                                  "]");
    }
    RETURN_IF_ERROR(positive(moe_intermediate_size, "moe_intermediate_size"));
    if (moe_swiglu_limit > 0.f && shared_expert_intermediate_size > 0) {
      return InvalidArgumentError("the clamped SwiGLU experts take no shared expert");
    }
    if (shared_expert_intermediate_size < 0) {
      return InvalidArgumentError("shared_expert_intermediate_size must be >= 0");
    }
    if (moe_swiglu_limit < 0.f || !std::isfinite(moe_swiglu_limit)) {
      return InvalidArgumentError("swiglu_limit must be finite and > 0");
    }
    if (static_cast<int>(layer_moe.size()) != num_layers) {
      return InvalidArgumentError("layer_moe has " + std::to_string(layer_moe.size()) +
                                  " entries for " + std::to_string(num_layers) + " layers");
    }
  }
  for (const RopeConfig* r : {&rope, &rope_local}) {
    if (!(r->theta > 0.f)) return InvalidArgumentError("rope_theta must be > 0");
    if (r->type != RopeType::kDefault && !(r->factor > 0.f)) {
      return InvalidArgumentError("rope_scaling.factor must be > 0");
    }
    if ((r->type == RopeType::kLlama3 || r->type == RopeType::kYarn) &&
        r->original_max_position_embeddings <= 0) {
      return InvalidArgumentError("rope_scaling.original_max_position_embeddings must be > 0");
    }
    if (!r->freq_factors.empty()) {
      if (static_cast<int>(r->freq_factors.size()) != rotary_dim / 2) {
        return InvalidArgumentError(
            "rope frequency factors: " + std::to_string(r->freq_factors.size()) +
            " values for rotary dim " + std::to_string(rotary_dim) + " (expected " +
            std::to_string(rotary_dim / 2) + ")");
      }
      for (float f : r->freq_factors) {
        if (!(f > 0.f) || !std::isfinite(f)) {
          return InvalidArgumentError("rope frequency factors must be finite and > 0");
        }
      }
    }
  }
  return OkStatus();
}

}  // namespace loom
