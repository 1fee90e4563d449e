// ModelConfig: everything the decoder needs to know about an architecture instance, filled once
// from config.json (HF) or GGUF metadata by the architecture files in model/arch/, validated once.
// The decoder (decoder.cc) reads only this struct: architectures differ by flags, not by code.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace loom {

enum class RopeType { kDefault, kLinear, kLlama3, kYarn };
enum class Activation { kSilu, kGeluTanh };

// One rope configuration (Gemma 3 has two: global and sliding layers).
struct RopeConfig {
  RopeType type = RopeType::kDefault;
  float theta = 10000.f;
  float factor = 1.f;                        // linear / llama3 / yarn
  float low_freq_factor = 1.f;               // llama3
  float high_freq_factor = 4.f;              // llama3
  int original_max_position_embeddings = 0;  // llama3 / yarn
  float beta_fast = 32.f;                    // yarn
  float beta_slow = 1.f;                     // yarn
  float attention_factor = 0.f;              // yarn: 0 = derive from factor (0.1 ln(s) + 1)
  bool truncate = true;                      // yarn: round the correction range (HF default true)
  // [rotary_dim / 2] f32 or empty. Per-dimension divisors of the inverse frequencies, applied
  // after the scaling above: GGUF's `rope_freqs.weight`, llama.cpp's form of Llama 3.1 scaling.
  std::vector<float> freq_factors;
};

struct ModelConfig {
  std::string arch;  // registry key: "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3",
                     // "phi3", "qwen2_moe", "qwen3_moe", "mixtral", "gpt_oss"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int rotary_dim = 0;  // <= head_dim (partial rotary)
  int max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;

  RopeConfig rope;                // global layers
  RopeConfig rope_local;          // sliding-window layers (== rope unless the arch says otherwise)
  bool rope_interleaved = false;  // GGUF llama stores q/k for pairwise rotation

  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
  bool attention_out_bias = false;
  bool mlp_bias = false;
  bool qk_norm = false;        // RMSNorm over head_dim on q and k before rope (Qwen3, Gemma 3)
  bool norm_plus_one = false;  // RMSNorm multiplies by (1 + w) (Gemma)
  bool sandwich_norm = false;  // extra norms after attention and after the MLP (Gemma 2/3)
  bool fused_qkv = false;      // one qkv projection (Phi-3)
  bool fused_gate_up = false;  // one gate_up projection (Phi-3)
  Activation activation = Activation::kSilu;
  float embed_scale = 1.f;  // Gemma: sqrt(hidden_size), rounded to the weights' dtype
  float query_scale = 0.f;  // softmax scale; 0 -> head_dim^-0.5
  float attn_logit_softcap = 0.f;
  float final_logit_softcap = 0.f;
  // Per layer: 0 = global attention, else the sliding window in tokens.
  std::vector<int> layer_window;
  // A learned logit per query head joins every softmax of its head (gpt-oss): the weights of
  // the keys then sum to less than 1 (`self_attn.sinks`, [num_heads]).
  bool attention_sinks = false;

  // Mixture of experts (num_experts == 0: every layer's MLP is dense). A sparse layer routes each
  // token to its top num_experts_per_tok experts by softmax of the router logits (no token is
  // dropped) and sums the experts' gated MLPs, weighted by those probabilities (renormalized over
  // the chosen ones when moe_norm_topk_prob); Qwen2-MoE adds a shared expert every token takes,
  // scaled by sigmoid(x . shared_expert_gate).
  int num_experts = 0;
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;  // each expert's MLP width
  bool moe_norm_topk_prob = false;
  int shared_expert_intermediate_size = 0;  // 0: no shared expert
  std::vector<bool> layer_moe;              // per layer: sparse (true) or dense MLP
  // gpt-oss's experts: the router and every expert projection carry a bias, and the experts'
  // activation is the clamped SwiGLU, with g = min(x W_gate, limit), u = clamp(x W_up, +-limit):
  // g * sigmoid(1.702 g) * (u + 1). 0: the plain `activation`, no biases.
  float moe_swiglu_limit = 0.f;

  std::vector<int> eos_token_ids;
  int bos_token_id = -1;

  // Checks ranges and consistency; errors name the field.
  Status Validate() const;
  bool is_sliding(int layer) const { return layer_window[static_cast<size_t>(layer)] > 0; }
  bool is_moe(int layer) const { return num_experts > 0 && layer_moe[static_cast<size_t>(layer)]; }
  float softmax_scale() const;
};

}  // namespace loom
