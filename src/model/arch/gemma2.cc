// Gemma 2: embeddings scaled by sqrt(hidden), (1 + w) RMSNorms, sandwich norms around attention
// and MLP, GeGLU (tanh), query_pre_attn_scalar, attention and final logit soft-capping, and
// sliding-window attention on every other layer (layer 0 slides).
#include <cmath>

#include "model/arch/arch.h"

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

}  // namespace

const ArchSpec kGemma2Arch = {"gemma2", {"Gemma2ForCausalLM"}, {"gemma2"}, "", &Gemma2FromHf};

}  // namespace loom
