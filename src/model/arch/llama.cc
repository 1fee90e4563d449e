// Llama 2 / 3 / 3.1 / 3.2: the baseline decoder (RMSNorm, SwiGLU, GQA, RoPE incl. llama3 scaling).
#include "model/arch/arch.h"

namespace loom {
namespace {

Status LlamaFromHf(const nlohmann::json& c, ModelConfig* cfg) {
  cfg->arch = "llama";
  RETURN_IF_ERROR(arch_util::ParseCommon(c, cfg, /*default_tie=*/false));
  cfg->layer_window.assign(static_cast<size_t>(cfg->num_layers), 0);
  return OkStatus();
}

}  // namespace

const ArchSpec kLlamaArch = {"llama", {"LlamaForCausalLM"}, {"llama"}, "llama", &LlamaFromHf};

}  // namespace loom
