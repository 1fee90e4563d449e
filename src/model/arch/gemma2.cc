// Gemma 2: embeddings scaled by sqrt(hidden), (1 + w) RMSNorms, sandwich norms around attention
// and MLP, GeGLU (tanh), query_pre_attn_scalar, attention and final logit soft-capping, and
// sliding-window attention on every other layer (layer 0 slides).
#include <cmath>

#include "model/arch/arch.h"
#include "model/gguf_config.h"

namespace loom {
namespace {

Status Gemma2FromHf(const nlohmann::json& c, ModelConfig* cfg) {
  cfg->arch = "gemma2";
  RETURN_IF_ERROR(arch_util::ParseCommon(c, cfg, /*default_tie=*/true));
  cfg->norm_plus_one = true;
  cfg->sandwich_norm = true;
  cfg->embed_scale = std::sqrt(static_cast<float>(cfg->hidden_size));
  float qpas = c.contains("query_pre_attn_scalar") && c["query_pre_attn_scalar"].is_number()
                   ? c["query_pre_attn_scalar"].get<float>()
                   : static_cast<float>(cfg->head_dim);
  cfg->query_scale = 1.0f / std::sqrt(qpas);
  auto cap = [&](const char* key, float def) {
    auto it = c.find(key);
    if (it == c.end()) return def;
    return it->is_number() ? it->get<float>() : 0.f;  // null disables
  };
  cfg->attn_logit_softcap = cap("attn_logit_softcapping", 50.f);
  cfg->final_logit_softcap = cap("final_logit_softcapping", 30.f);
  int window = arch_util::SlidingWindowOrZero(c);
  arch_util::SetLayerWindows(c, window, cfg, [&](int i) { return window > 0 && i % 2 == 0; });
  return OkStatus();
}

// GGUF "gemma2" as llama.cpp reads it: soft-capping from gemma2.attn_logit_softcapping and
// gemma2.final_logit_softcapping (defaults 50 and 30, HF's), gemma2.attention.sliding_window
// (default 4096) on the even layers, the softmax scale from head_dim (27B: 46 layers).
Status Gemma2FromGguf(const GgufArchKeys& keys, ModelConfig* cfg) {
  RETURN_IF_ERROR(arch_util::GemmaFromGguf(keys, /*layers_27b=*/46, cfg));
  ASSIGN_OR_RETURN(cfg->attn_logit_softcap, keys.Float("attn_logit_softcapping", 50.f));
  ASSIGN_OR_RETURN(cfg->final_logit_softcap, keys.Float("final_logit_softcapping", 30.f));
  ASSIGN_OR_RETURN(int window, keys.Int("attention.sliding_window", 4096));
  ASSIGN_OR_RETURN(std::vector<bool> sliding, GgufSlidingLayers(keys, cfg->num_layers, 2));
  for (int i = 0; i < cfg->num_layers; ++i) {
    const bool slides = window > 0 && sliding[static_cast<size_t>(i)];
    cfg->layer_window[static_cast<size_t>(i)] = slides ? window : 0;
  }
  return OkStatus();
}

}  // namespace

const ArchSpec kGemma2Arch = {"gemma2", {"Gemma2ForCausalLM"}, {"gemma2"},
                              "gemma2", &Gemma2FromHf,         &Gemma2FromGguf};

}  // namespace loom
