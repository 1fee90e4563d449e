// Mistral: Llama plus an optional sliding window on every layer.
#include "model/arch/arch.h"

namespace loom {
namespace {

Status MistralFromHf(const nlohmann::json& c, ModelConfig* cfg) {
  cfg->arch = "mistral";
  RETURN_IF_ERROR(arch_util::ParseCommon(c, cfg, /*default_tie=*/false));
  int window = arch_util::SlidingWindowOrZero(c);
  arch_util::SetLayerWindows(c, window, cfg, [&](int) { return window > 0; });
  return OkStatus();
}

}  // namespace

const ArchSpec kMistralArch = {"mistral", {"MistralForCausalLM"}, {"mistral"}, "", &MistralFromHf};

}  // namespace loom
