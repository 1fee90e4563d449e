// Gemma 3 (text): Gemma 2's norms and scaling plus per-head (1 + w) q/k norms, no soft-capping by
// default, and interleaved sliding (local rope base, rope_local_base_freq) and global layers
// (global rope with its own scaling); by default every `sliding_window_pattern`-th layer is global.
#include <cmath>

#include "model/arch/arch.h"
#include "model/gguf_config.h"

namespace loom {
namespace {

Status Gemma3FromHf(const nlohmann::json& c, ModelConfig* cfg) {
  cfg->arch = "gemma3";
  RETURN_IF_ERROR(arch_util::ParseCommon(c, cfg, /*default_tie=*/true));
  if (!c.contains("rope_parameters") && !c.contains("rope_theta")) cfg->rope.theta = 1000000.f;
  cfg->norm_plus_one = true;
  cfg->sandwich_norm = true;
  cfg->qk_norm = true;
  cfg->embed_scale = std::sqrt(static_cast<float>(cfg->hidden_size));
  float qpas = c.contains("query_pre_attn_scalar") && c["query_pre_attn_scalar"].is_number()
                   ? c["query_pre_attn_scalar"].get<float>()
                   : static_cast<float>(cfg->head_dim);
  cfg->query_scale = 1.0f / std::sqrt(qpas);
  auto cap = [&](const char* key) {
    auto it = c.find(key);
    return it != c.end() && it->is_number() ? it->get<float>() : 0.f;
  };
  cfg->attn_logit_softcap = cap("attn_logit_softcapping");
  cfg->final_logit_softcap = cap("final_logit_softcapping");
  // Sliding layers: transformers 5 puts their rope in rope_parameters["sliding_attention"];
  // transformers 4 uses rope_local_base_freq with default (unscaled) rope.
  if (c.contains("rope_parameters") && c["rope_parameters"].is_object() &&
      c["rope_parameters"].contains("sliding_attention")) {
    RETURN_IF_ERROR(arch_util::ParseRope(c, "sliding_attention", 10000.f, &cfg->rope_local));
  } else {
    cfg->rope_local = RopeConfig{};
    cfg->rope_local.theta =
        c.contains("rope_local_base_freq") && c["rope_local_base_freq"].is_number()
            ? c["rope_local_base_freq"].get<float>()
            : 10000.f;
  }
  int window = arch_util::SlidingWindowOrZero(c);
  int pattern = c.value("sliding_window_pattern", 6);
  arch_util::SetLayerWindows(
      c, window, cfg, [&](int i) { return window > 0 && pattern > 0 && (i + 1) % pattern != 0; });
  return OkStatus();
}

// GGUF "gemma3" as llama.cpp reads it: per-head q/k norms (attn_q_norm / attn_k_norm, stored as
// 1 + w like every Gemma norm), optional gemma3.final_logit_softcapping, no attention soft-capping.
// With gemma3.attention.sliding_window > 0, layers slide per attention.sliding_window_pattern
// (default 6: five local, one global) and local layers use unscaled rope with base
// rope.freq_base_swa (default 10000); the global rope (rope.freq_base, rope.scaling.*) is the
// common one. The softmax scale comes from head_dim (27B: 62 layers).
Status Gemma3FromGguf(const GgufArchKeys& keys, ModelConfig* cfg) {
  RETURN_IF_ERROR(arch_util::GemmaFromGguf(keys, /*layers_27b=*/62, cfg));
  cfg->qk_norm = true;
  ASSIGN_OR_RETURN(int window, keys.Int("attention.sliding_window", 0));
  if (window <= 0) return OkStatus();
  cfg->rope_local = RopeConfig{};
  ASSIGN_OR_RETURN(cfg->rope_local.theta, keys.Float("rope.freq_base_swa", 10000.f));
  ASSIGN_OR_RETURN(std::vector<bool> sliding, GgufSlidingLayers(keys, cfg->num_layers, 6));
  for (int i = 0; i < cfg->num_layers; ++i) {
    cfg->layer_window[static_cast<size_t>(i)] = sliding[static_cast<size_t>(i)] ? window : 0;
  }
  return OkStatus();
}

}  // namespace

const ArchSpec kGemma3Arch = {"gemma3", {"Gemma3ForCausalLM"}, {"gemma3_text", "gemma3"},
                              "gemma3", &Gemma3FromHf,         &Gemma3FromGguf};

}  // namespace loom
