// Qwen2 / Qwen2.5: Llama with biases on the q/k/v projections (never on o_proj); optional sliding
// window on layers >= max_window_layers when use_sliding_window is set.
#include "model/arch/arch.h"
#include "model/gguf_config.h"

namespace loom {
namespace {

Status Qwen2FromHf(const nlohmann::json& c, ModelConfig* cfg) {
  cfg->arch = "qwen2";
  RETURN_IF_ERROR(arch_util::ParseCommon(c, cfg, /*default_tie=*/false));
  cfg->attention_bias = true;
  bool use_sw = c.value("use_sliding_window", false);
  int window = use_sw ? arch_util::SlidingWindowOrZero(c) : 0;
  int max_window_layers = c.value("max_window_layers", cfg->num_layers);
  arch_util::SetLayerWindows(c, window, cfg,
                             [&](int i) { return window > 0 && i >= max_window_layers; });
  return OkStatus();
}

// GGUF keeps HF's half rotation (llama.cpp's NEOX rope) and the q/k/v biases; llama.cpp applies
// no sliding window to qwen2, and neither do we.
Status Qwen2FromGguf(const GgufArchKeys&, ModelConfig* cfg) {
  cfg->attention_bias = true;
  return OkStatus();
}

}  // namespace

const ArchSpec kQwen2Arch = {"qwen2", {"Qwen2ForCausalLM"}, {"qwen2"},
                             "qwen2", &Qwen2FromHf,         &Qwen2FromGguf};

}  // namespace loom
