// gpt-oss (OpenAI's open-weight MoE models, 20b and 120b): Llama-style pre-norm blocks with q/k/v/o
// biases, a learned attention sink per head, sliding (`sliding_window`, 128) and full attention
// layers in turn (`layer_types`), yarn rope, and a sparse MLP in every layer: a router with a
// bias whose top-k logits are softmaxed (the top-k of the full softmax renormalized: the same
// weights), experts with biases and the clamped SwiGLU (`swiglu_limit`, 7). The experts of the
// published checkpoints and of llama.cpp's GGUF conversions are MXFP4 (model/weights.cc reads
// both packings).
#include "model/arch/arch.h"
#include "model/gguf_config.h"

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

// GGUF "gpt-oss" (llama.cpp's converter): the sizes, experts and yarn rope come through
// ModelConfigFromGguf; the file has no keys for what llama.cpp hardcodes for this arch: biases
// everywhere, sinks, every other layer sliding (from layer 0), the top-k softmax, the clamp at 7.
// The published configs turn yarn's truncation off, so this does too (as transformers runs it).
Status GptOssFromGguf(const GgufArchKeys& keys, ModelConfig* cfg) {
  if (cfg->num_experts <= 0) {
    return InvalidArgumentError(keys.file().path() + ": a gpt-oss file without " + keys.arch() +
                                ".expert_count");
  }
  cfg->attention_bias = true;
  cfg->attention_out_bias = true;
  cfg->attention_sinks = true;
  cfg->moe_norm_topk_prob = true;
  cfg->moe_swiglu_limit = 7.f;
  cfg->rope.truncate = false;
  cfg->rope_local = cfg->rope;
  ASSIGN_OR_RETURN(int window, keys.Int("attention.sliding_window", 0));
  if (window <= 0) return OkStatus();
  ASSIGN_OR_RETURN(std::vector<bool> sliding, GgufSlidingLayers(keys, cfg->num_layers, 2));
  for (int i = 0; i < cfg->num_layers; ++i) {
    cfg->layer_window[static_cast<size_t>(i)] = sliding[static_cast<size_t>(i)] ? window : 0;
  }
  return OkStatus();
}

}  // namespace

const ArchSpec kGptOssArch = {"gpt_oss", {"GptOssForCausalLM"}, {"gpt_oss"},
                              "gpt-oss", &GptOssFromHf,         &GptOssFromGguf};

}  // namespace loom
