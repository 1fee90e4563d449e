// The architecture registry. Each supported architecture is one small file in this folder that
// maps its config.json (and, where supported, its GGUF metadata) onto ModelConfig flags; the
// decoder itself is shared. Tensor names follow HF's `model.layers.N....` scheme (or GGUF's
// `blk.N....`), resolved by weights.cc.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace loom {

class GgufArchKeys;

struct ArchSpec {
  std::string name;                           // our key, e.g. "qwen3"
  std::vector<std::string> hf_architectures;  // config.json "architectures" entries
  std::vector<std::string> hf_model_types;    // config.json "model_type" values
  std::string gguf_arch;                      // general.architecture, "" if GGUF is unsupported
  // Fills `cfg` from config.json (already JSON-parsed). Errors name the field.
  Status (*from_hf)(const nlohmann::json& config, ModelConfig* cfg);
  // Sets what is particular to the architecture in a GGUF file (model/gguf_config.cc has already
  // read the sizes, rope, vocabulary and special tokens into `cfg`). Null when gguf_arch is "".
  Status (*from_gguf)(const GgufArchKeys& keys, ModelConfig* cfg) = nullptr;
};

const std::vector<const ArchSpec*>& AllArchs();
// Looks up by config.json "architectures"[0] (then "model_type"). The error lists what we support.
StatusOr<const ArchSpec*> FindArchForHfConfig(const nlohmann::json& config);
StatusOr<const ArchSpec*> FindArchForGguf(const std::string& general_architecture);
std::string SupportedArchList();

// Shared helpers for the arch files.
namespace arch_util {
// Reads the fields every decoder-only config has (sizes, eps, rope, tie, eos/bos, head_dim).
Status ParseCommon(const nlohmann::json& c, ModelConfig* cfg, bool default_tie);
// Parses rope settings for one attention kind ("full_attention" / "sliding_attention") from
// either transformers-5 `rope_parameters` or transformers-4 `rope_theta` + `rope_scaling`.
Status ParseRope(const nlohmann::json& c, const char* layer_type, float default_theta,
                 RopeConfig* rope);
// Layer windows from `layer_types` when present; otherwise from `sliding(i)`.
template <typename F>
void SetLayerWindows(const nlohmann::json& c, int window, ModelConfig* cfg, F sliding);
StatusOr<Activation> ParseActivation(const nlohmann::json& c);
int SlidingWindowOrZero(const nlohmann::json& c);
// The mixture-of-experts fields: the expert count under `experts_key` ("num_experts" for Qwen,
// "num_local_experts" for Mixtral), num_experts_per_tok, the expert width under `width_key`,
// norm_topk_prob (default `default_norm`), and which layers are sparse: every
// decoder_sparse_step-th (default 1) layer not listed in mlp_only_layers (Qwen's keys; absent
// elsewhere, so every layer).
Status ParseMoe(const nlohmann::json& c, const char* experts_key, const char* width_key,
                bool default_norm, ModelConfig* cfg);
// Gemma 2 / 3 as llama.cpp reads them from GGUF: norms, GeGLU, embedding scale and the softmax
// scale, which GGUF does not store: 1/sqrt(head_dim), or 1/sqrt(hidden/heads) for the 27B
// models, recognized by their layer count `layers_27b` (llama.cpp's rule).
Status GemmaFromGguf(const GgufArchKeys& keys, int layers_27b, ModelConfig* cfg);
}  // namespace arch_util

extern const ArchSpec kLlamaArch;
extern const ArchSpec kMistralArch;
extern const ArchSpec kQwen2Arch;
extern const ArchSpec kQwen3Arch;
extern const ArchSpec kGemma2Arch;
extern const ArchSpec kGemma3Arch;
extern const ArchSpec kPhi3Arch;
extern const ArchSpec kQwen2MoeArch;
extern const ArchSpec kQwen3MoeArch;
extern const ArchSpec kMixtralArch;
extern const ArchSpec kGptOssArch;

template <typename F>
void arch_util::SetLayerWindows(const nlohmann::json& c, int window, ModelConfig* cfg, F sliding) {
  cfg->layer_window.assign(static_cast<size_t>(cfg->num_layers), 0);
  auto it = c.find("layer_types");
  bool have_types =
      it != c.end() && it->is_array() && static_cast<int>(it->size()) == cfg->num_layers;
  for (int i = 0; i < cfg->num_layers; ++i) {
    bool is_sliding =
        have_types ? (*it)[static_cast<size_t>(i)] == "sliding_attention" : sliding(i);
    cfg->layer_window[static_cast<size_t>(i)] = is_sliding ? window : 0;
  }
}

}  // namespace loom
