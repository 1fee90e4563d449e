// Qwen3: Llama with per-head RMSNorm on q and k (before RoPE), explicit head_dim, no biases.
#include "model/arch/arch.h"
#include "model/gguf_config.h"

namespace loom {
namespace {

Status Qwen3FromHf(const nlohmann::json& c, ModelConfig* cfg) {
  cfg->arch = "qwen3";
  RETURN_IF_ERROR(arch_util::ParseCommon(c, cfg, /*default_tie=*/false));
  cfg->qk_norm = true;
  bool use_sw = c.value("use_sliding_window", false);
  int window = use_sw ? arch_util::SlidingWindowOrZero(c) : 0;
  int max_window_layers = c.value("max_window_layers", cfg->num_layers);
  arch_util::SetLayerWindows(c, window, cfg,
                             [&](int i) { return window > 0 && i >= max_window_layers; });
  return OkStatus();
}

// GGUF: blk.N.attn_q_norm / attn_k_norm, half rotation (llama.cpp's NEOX rope).
Status Qwen3FromGguf(const GgufArchKeys&, ModelConfig* cfg) {
  cfg->qk_norm = true;
  return OkStatus();
}

}  // namespace

const ArchSpec kQwen3Arch = {"qwen3", {"Qwen3ForCausalLM"}, {"qwen3"},
                             "qwen3", &Qwen3FromHf,         &Qwen3FromGguf};

}  // namespace loom
