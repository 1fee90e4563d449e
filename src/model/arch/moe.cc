// The mixture-of-experts families: Qwen2-MoE, Qwen3-MoE and Mixtral. Their attention is that of
// their dense relatives (Qwen2's q/k/v biases, Qwen3's q/k norms, Mistral's plain one); their MLPs
// are sparse: see ModelConfig's MoE fields.
#include "model/arch/arch.h"
#include "model/gguf_config.h"

namespace loom {
namespace {

// Qwen's expert count: `num_experts` in the published configs, `num_local_experts` in what
// transformers 5 writes (save_pretrained renames it).
const char* QwenExpertsKey(const nlohmann::json& c) {
  return c.contains("num_experts") ? "num_experts" : "num_local_experts";
}

// Qwen's sliding-window keys, as in qwen2.cc / qwen3.cc.
void QwenWindows(const nlohmann::json& c, ModelConfig* cfg) {
  bool use_sw = c.value("use_sliding_window", false);
  int window = use_sw ? arch_util::SlidingWindowOrZero(c) : 0;
  int max_window_layers = c.value("max_window_layers", cfg->num_layers);
  arch_util::SetLayerWindows(c, window, cfg,
                             [&](int i) { return window > 0 && i >= max_window_layers; });
}

Status Qwen2MoeFromHf(const nlohmann::json& c, ModelConfig* cfg) {
  cfg->arch = "qwen2_moe";
  RETURN_IF_ERROR(arch_util::ParseCommon(c, cfg, /*default_tie=*/false));
  cfg->attention_bias = c.value("qkv_bias", true);
  QwenWindows(c, cfg);
  RETURN_IF_ERROR(arch_util::ParseMoe(c, QwenExpertsKey(c), "moe_intermediate_size",
                                      /*default_norm=*/false, cfg));
  cfg->shared_expert_intermediate_size = c.value("shared_expert_intermediate_size", 0);
  return OkStatus();
}

Status Qwen3MoeFromHf(const nlohmann::json& c, ModelConfig* cfg) {
  cfg->arch = "qwen3_moe";
  RETURN_IF_ERROR(arch_util::ParseCommon(c, cfg, /*default_tie=*/false));
  cfg->qk_norm = true;
  QwenWindows(c, cfg);
  return arch_util::ParseMoe(c, QwenExpertsKey(c), "moe_intermediate_size",
                             /*default_norm=*/false, cfg);
}

// Mixtral: Mistral's attention, every layer sparse, experts intermediate_size wide, top-k
// weights always renormalized.
Status MixtralFromHf(const nlohmann::json& c, ModelConfig* cfg) {
  cfg->arch = "mixtral";
  RETURN_IF_ERROR(arch_util::ParseCommon(c, cfg, /*default_tie=*/false));
  int window = arch_util::SlidingWindowOrZero(c);
  arch_util::SetLayerWindows(c, window, cfg, [&](int) { return window > 0; });
  return arch_util::ParseMoe(c, "num_local_experts", "intermediate_size", /*default_norm=*/true,
                             cfg);
}

// A Qwen MoE file must say how many experts it has (ModelConfigFromGguf reads expert_count).
Status RequireExperts(const GgufArchKeys& keys, const ModelConfig& cfg) {
  if (cfg.num_experts > 0) return OkStatus();
  return InvalidArgumentError(keys.file().path() + ": a " + keys.arch() + " file without " +
                              keys.arch() + ".expert_count");
}

// GGUF "qwen3moe": Qwen3's q/k norms; llama.cpp renormalizes the top-k weights (as
// Qwen3-MoE's configs ask) and makes every layer sparse.
Status Qwen3MoeFromGguf(const GgufArchKeys& keys, ModelConfig* cfg) {
  RETURN_IF_ERROR(RequireExperts(keys, *cfg));
  cfg->qk_norm = true;
  cfg->moe_norm_topk_prob = true;
  return OkStatus();
}

// GGUF "qwen2moe": Qwen2's q/k/v biases; llama.cpp never renormalizes the top-k weights (Qwen1.5-
// and Qwen2-MoE configs ask for none) and makes every layer sparse; the shared expert is
// expert_shared_feed_forward_length wide (read by ModelConfigFromGguf) with its sigmoid gate.
Status Qwen2MoeFromGguf(const GgufArchKeys& keys, ModelConfig* cfg) {
  RETURN_IF_ERROR(RequireExperts(keys, *cfg));
  cfg->attention_bias = true;
  cfg->moe_norm_topk_prob = false;
  return OkStatus();
}

}  // namespace

const ArchSpec kQwen2MoeArch = {"qwen2_moe", {"Qwen2MoeForCausalLM"}, {"qwen2_moe"},
                                "qwen2moe",  &Qwen2MoeFromHf,         &Qwen2MoeFromGguf};
const ArchSpec kQwen3MoeArch = {"qwen3_moe", {"Qwen3MoeForCausalLM"}, {"qwen3_moe"},
                                "qwen3moe",  &Qwen3MoeFromHf,         &Qwen3MoeFromGguf};
const ArchSpec kMixtralArch = {"mixtral", {"MixtralForCausalLM"}, {"mixtral"}, "", &MixtralFromHf};

}  // namespace loom
