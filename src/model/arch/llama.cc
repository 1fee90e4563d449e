// Llama 2 / 3 / 3.1 / 3.2: the baseline decoder (RMSNorm, SwiGLU, GQA, RoPE incl. llama3 scaling).
#include "model/arch/arch.h"
#include "model/gguf_config.h"

namespace loom {
namespace {

Status LlamaFromHf(const nlohmann::json& c, ModelConfig* cfg) {
  cfg->arch = "llama";
  RETURN_IF_ERROR(arch_util::ParseCommon(c, cfg, /*default_tie=*/false));
  cfg->layer_window.assign(static_cast<size_t>(cfg->num_layers), 0);
  return OkStatus();
}

// Mixtral GGUFs are "llama" files with expert_count (model/gguf_config.cc reads it).
// llama.cpp's converter permutes q/k rows so that rope rotates adjacent pairs; Llama 3.1's scaling
// arrives as rope_freqs.weight (read by gguf_config.cc). Mistral GGUFs are "llama" too, and like
// llama.cpp we apply no sliding window to them.
Status LlamaFromGguf(const GgufArchKeys&, ModelConfig* cfg) {
  cfg->rope_interleaved = true;
  // Mixtral is a "llama" file with experts; llama.cpp renormalizes its top-k weights.
  cfg->moe_norm_topk_prob = true;
  return OkStatus();
}

}  // namespace

const ArchSpec kLlamaArch = {"llama", {"LlamaForCausalLM"}, {"llama"},
                             "llama", &LlamaFromHf,         &LlamaFromGguf};

}  // namespace loom
