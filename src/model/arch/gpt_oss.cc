// gpt-oss (OpenAI's open-weight MoE models, 20b and 120b): Llama-style pre-norm blocks with q/k/v/o
// biases, a learned attention sink per head, sliding (`sliding_window`, 128) and full attention
// layers in turn (`layer_types`), yarn rope, and a sparse MLP in every layer: a router with a
// bias whose top-k logits are softmaxed (the top-k of the full softmax renormalized: the same
// weights), experts with biases and the clamped SwiGLU (`swiglu_limit`, 7). The experts of the
// published checkpoints are MXFP4 (model/weights.cc reads them).
#include "model/arch/arch.h"

namespace loom {
namespace {

Status GptOssFromHf(const nlohmann::json& c, ModelConfig* cfg) {
  cfg->arch = "gpt_oss";
  RETURN_IF_ERROR(arch_util::ParseCommon(c, cfg, /*default_tie=*/false));
  cfg->attention_bias = c.value("attention_bias", true);
  cfg->attention_out_bias = cfg->attention_bias;
  cfg->attention_sinks = true;
  int window = arch_util::SlidingWindowOrZero(c);
  arch_util::SetLayerWindows(c, window, cfg, [&](int i) { return window > 0 && i % 2 == 0; });
  RETURN_IF_ERROR(arch_util::ParseMoe(c, "num_local_experts", "intermediate_size",
                                      /*default_norm=*/true, cfg));
  cfg->moe_norm_topk_prob = true;  // softmax over the top-k logits
  cfg->moe_swiglu_limit = 7.f;
  if (auto it = c.find("swiglu_limit"); it != c.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<float>() > 0.f)) {
      return InvalidArgumentError("config.json: 'swiglu_limit' must be a number > 0");
    }
    cfg->moe_swiglu_limit = it->get<float>();
  }
  return OkStatus();
}

}  // namespace

const ArchSpec kGptOssArch = {"gpt_oss", {"GptOssForCausalLM"}, {"gpt_oss"}, "", &GptOssFromHf};

}  // namespace loom
