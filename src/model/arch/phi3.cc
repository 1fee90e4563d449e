// Phi-3: Llama with a fused qkv projection and a fused gate_up projection (gate first), optional
// partial rotary factor and sliding window on every layer. LongRoPE ("longrope"/"su") scaling is
// not supported yet and is refused by the rope parser.
#include "model/arch/arch.h"

namespace loom {
namespace {

Status Phi3FromHf(const nlohmann::json& c, ModelConfig* cfg) {
  cfg->arch = "phi3";
  RETURN_IF_ERROR(arch_util::ParseCommon(c, cfg, /*default_tie=*/false));
  cfg->fused_qkv = true;
  cfg->fused_gate_up = true;
  int window = arch_util::SlidingWindowOrZero(c);
  arch_util::SetLayerWindows(c, window, cfg, [&](int) { return window > 0; });
  return OkStatus();
}

}  // namespace

const ArchSpec kPhi3Arch = {"phi3", {"Phi3ForCausalLM"}, {"phi3"}, "", &Phi3FromHf};

}  // namespace loom
