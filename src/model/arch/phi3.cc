// Phi-3: Llama with a fused qkv projection and a fused gate_up projection (gate first), optional
// partial rotary factor and sliding window on every layer. LongRoPE ("longrope"/"su") scaling is
// not supported yet and is refused by the rope parser.
#include <algorithm>

#include "model/arch/arch.h"
#include "model/gguf_config.h"

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

// GGUF "phi3": fused blk.N.attn_qkv and blk.N.ffn_up (gate rows first, as HF), half rotation over
// phi3.rope.dimension_count dims. phi3.attention.sliding_window (0 = none, Phi-4) applies to every
// layer as in HF; llama.cpp currently ignores it, so the two differ past the window.
Status Phi3FromGguf(const GgufArchKeys& keys, ModelConfig* cfg) {
  cfg->fused_qkv = true;
  cfg->fused_gate_up = true;
  ASSIGN_OR_RETURN(int window, keys.Int("attention.sliding_window", 0));
  for (int& w : cfg->layer_window) w = std::max(window, 0);
  return OkStatus();
}

}  // namespace

const ArchSpec kPhi3Arch = {"phi3", {"Phi3ForCausalLM"}, {"phi3"},
                            "phi3", &Phi3FromHf,         &Phi3FromGguf};

}  // namespace loom
