#include "model/arch/arch.h"

#include <algorithm>
#include <cmath>

#include "model/gguf_config.h"

namespace loom {

using nlohmann::json;

const std::vector<const ArchSpec*>& AllArchs() {
  static const std::vector<const ArchSpec*> kAll = {
      &kLlamaArch, &kMistralArch,  &kQwen2Arch,    &kQwen3Arch,   &kGemma2Arch, &kGemma3Arch,
      &kPhi3Arch,  &kQwen2MoeArch, &kQwen3MoeArch, &kMixtralArch, &kGptOssArch};
  return kAll;
}

std::string SupportedArchList() {
  std::string out;
  for (const ArchSpec* a : AllArchs()) {
    for (const auto& n : a->hf_architectures) out += (out.empty() ? "" : ", ") + n;
  }
  return out;
}

StatusOr<const ArchSpec*> FindArchForHfConfig(const json& config) {
  std::string first;
  if (auto it = config.find("architectures");
      it != config.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    first = (*it)[0].get<std::string>();
    for (const ArchSpec* a : AllArchs()) {
      for (const auto& n : a->hf_architectures) {
        if (n == first) return a;
      }
    }
  }
  std::string model_type;
  if (auto it = config.find("model_type"); it != config.end() && it->is_string()) {
    model_type = it->get<std::string>();
    for (const ArchSpec* a : AllArchs()) {
      for (const auto& n : a->hf_model_types) {
        if (n == model_type) return a;
      }
    }
  }
  return UnimplementedError("unsupported architecture '" + (first.empty() ? model_type : first) +
                            "' (model_type '" + model_type +
                            "'); supported: " + SupportedArchList());
}

StatusOr<const ArchSpec*> FindArchForGguf(const std::string& general_architecture) {
  std::string supported;
  for (const ArchSpec* a : AllArchs()) {
    if (a->gguf_arch.empty() || a->from_gguf == nullptr) continue;
    if (a->gguf_arch == general_architecture) return a;
    supported += (supported.empty() ? "" : ", ") + a->gguf_arch;
  }
  return UnimplementedError("unsupported GGUF architecture '" + general_architecture +
                            "'; supported: " + supported);
}

namespace arch_util {
namespace {

StatusOr<int> GetInt(const json& c, const char* key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null())
    return InvalidArgumentError(std::string("config.json: missing '") + key + "'");
  if (!it->is_number_integer())
    return InvalidArgumentError(std::string("config.json: '") + key + "' must be an integer");
  return it->get<int>();
}

float GetFloatOr(const json& c, const char* key, float def) {
  auto it = c.find(key);
  if (it == c.end() || !it->is_number()) return def;
  return it->get<float>();
}

Status ParseRopeDict(const json& d, RopeConfig* rope) {
  std::string type = "default";
  if (auto it = d.find("rope_type"); it != d.end() && it->is_string())
    type = it->get<std::string>();
  else if (auto it2 = d.find("type"); it2 != d.end() && it2->is_string())
    type = it2->get<std::string>();
  rope->theta = GetFloatOr(d, "rope_theta", rope->theta);
  rope->factor = GetFloatOr(d, "factor", 1.f);
  if (type == "default") {
    rope->type = RopeType::kDefault;
  } else if (type == "linear") {
    rope->type = RopeType::kLinear;
  } else if (type == "llama3") {
    rope->type = RopeType::kLlama3;
    rope->low_freq_factor = GetFloatOr(d, "low_freq_factor", 1.f);
    rope->high_freq_factor = GetFloatOr(d, "high_freq_factor", 4.f);
    rope->original_max_position_embeddings =
        static_cast<int>(GetFloatOr(d, "original_max_position_embeddings", 0));
  } else if (type == "yarn") {
    rope->type = RopeType::kYarn;
    rope->original_max_position_embeddings =
        static_cast<int>(GetFloatOr(d, "original_max_position_embeddings", 0));
    rope->beta_fast = GetFloatOr(d, "beta_fast", 32.f);
    rope->beta_slow = GetFloatOr(d, "beta_slow", 1.f);
    rope->attention_factor = GetFloatOr(d, "attention_factor", 0.f);
    if (auto it = d.find("truncate"); it != d.end() && it->is_boolean())
      rope->truncate = it->get<bool>();
    if (d.contains("mscale") || d.contains("mscale_all_dim")) {
      return UnimplementedError(
          "config.json: yarn 'mscale'/'mscale_all_dim' (DeepSeek-style) is not supported");
    }
  } else {
    return UnimplementedError("config.json: rope scaling type '" + type +
                              "' is not supported (supported: default, linear, llama3, yarn)");
  }
  return OkStatus();
}

}  // namespace

Status ParseRope(const json& c, const char* layer_type, float default_theta, RopeConfig* rope) {
  *rope = RopeConfig{};
  rope->theta = GetFloatOr(c, "rope_theta", default_theta);
  if (auto it = c.find("rope_parameters"); it != c.end() && it->is_object()) {
    const json* d = &*it;
    if (auto sub = it->find(layer_type); sub != it->end() && sub->is_object())
      d = &*sub;
    else if (it->contains("full_attention") && it->at("full_attention").is_object())
      d = &it->at("full_attention");
    return ParseRopeDict(*d, rope);
  }
  if (auto it = c.find("rope_scaling"); it != c.end() && it->is_object()) {
    return ParseRopeDict(*it, rope);
  }
  return OkStatus();
}

StatusOr<Activation> ParseActivation(const json& c) {
  std::string act = "silu";
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    if (auto it = c.find(key); it != c.end() && it->is_string()) {
      act = it->get<std::string>();
      break;
    }
  }
  if (act == "silu" || act == "swish") return Activation::kSilu;
  if (act == "gelu_pytorch_tanh" || act == "gelu_new" || act == "gelu_tanh")
    return Activation::kGeluTanh;
  return UnimplementedError("config.json: activation '" + act +
                            "' is not supported (silu, gelu_pytorch_tanh)");
}

int SlidingWindowOrZero(const json& c) {
  auto it = c.find("sliding_window");
  if (it == c.end() || !it->is_number_integer()) return 0;
  return it->get<int>();
}

Status ParseMoe(const json& c, const char* experts_key, const char* width_key, bool default_norm,
                ModelConfig* cfg) {
  ASSIGN_OR_RETURN(cfg->num_experts, GetInt(c, experts_key));
  ASSIGN_OR_RETURN(cfg->num_experts_per_tok, GetInt(c, "num_experts_per_tok"));
  ASSIGN_OR_RETURN(cfg->moe_intermediate_size, GetInt(c, width_key));
  cfg->moe_norm_topk_prob = default_norm;
  if (auto it = c.find("norm_topk_prob"); it != c.end() && it->is_boolean()) {
    cfg->moe_norm_topk_prob = it->get<bool>();
  }
  int step = 1;
  if (auto it = c.find("decoder_sparse_step"); it != c.end() && !it->is_null()) {
    ASSIGN_OR_RETURN(step, GetInt(c, "decoder_sparse_step"));
  }
  if (step < 1) return InvalidArgumentError("config.json: 'decoder_sparse_step' must be >= 1");
  std::vector<int> dense_layers;
  if (auto it = c.find("mlp_only_layers"); it != c.end() && !it->is_null()) {
    if (!it->is_array()) {
      return InvalidArgumentError("config.json: 'mlp_only_layers' must be a list of layers");
    }
    for (const json& v : *it) {
      if (!v.is_number_integer()) {
        return InvalidArgumentError("config.json: 'mlp_only_layers' must hold layer indices");
      }
      dense_layers.push_back(v.get<int>());
    }
  }
  cfg->layer_moe.assign(static_cast<size_t>(cfg->num_layers), false);
  for (int i = 0; i < cfg->num_layers; ++i) {
    const bool dense = std::find(dense_layers.begin(), dense_layers.end(), i) != dense_layers.end();
    cfg->layer_moe[static_cast<size_t>(i)] = !dense && (i + 1) % step == 0;
  }
  return OkStatus();
}

Status ParseCommon(const json& c, ModelConfig* cfg, bool default_tie) {
  ASSIGN_OR_RETURN(cfg->vocab_size, GetInt(c, "vocab_size"));
  ASSIGN_OR_RETURN(cfg->hidden_size, GetInt(c, "hidden_size"));
  ASSIGN_OR_RETURN(cfg->intermediate_size, GetInt(c, "intermediate_size"));
  ASSIGN_OR_RETURN(cfg->num_layers, GetInt(c, "num_hidden_layers"));
  ASSIGN_OR_RETURN(cfg->num_heads, GetInt(c, "num_attention_heads"));
  cfg->num_kv_heads = cfg->num_heads;
  if (c.contains("num_key_value_heads") && c["num_key_value_heads"].is_number_integer()) {
    cfg->num_kv_heads = c["num_key_value_heads"].get<int>();
  }
  if (cfg->num_heads <= 0)
    return InvalidArgumentError("config.json: num_attention_heads must be > 0");
  cfg->head_dim = cfg->hidden_size / cfg->num_heads;
  if (c.contains("head_dim") && c["head_dim"].is_number_integer())
    cfg->head_dim = c["head_dim"].get<int>();
  float partial = GetFloatOr(c, "partial_rotary_factor", 1.f);
  if (auto it = c.find("rope_parameters"); it != c.end() && it->is_object()) {
    partial = GetFloatOr(*it, "partial_rotary_factor", partial);
  }
  cfg->rotary_dim = static_cast<int>(static_cast<float>(cfg->head_dim) * partial);
  cfg->max_position_embeddings = 4096;
  if (c.contains("max_position_embeddings") && c["max_position_embeddings"].is_number_integer()) {
    cfg->max_position_embeddings = c["max_position_embeddings"].get<int>();
  }
  cfg->rms_norm_eps = GetFloatOr(c, "rms_norm_eps", 1e-6f);
  cfg->tie_word_embeddings = default_tie;
  if (auto it = c.find("tie_word_embeddings"); it != c.end() && it->is_boolean()) {
    cfg->tie_word_embeddings = it->get<bool>();
  }
  cfg->attention_bias = c.value("attention_bias", false);
  cfg->mlp_bias = c.value("mlp_bias", false);
  if (cfg->mlp_bias) {
    // The decoder's MLP has no bias terms; running without them would silently give wrong logits.
    return UnimplementedError(
        "config.json sets mlp_bias: true (biases on the MLP projections), "
        "which loom does not support yet");
  }
  cfg->eos_token_ids.clear();
  if (auto it = c.find("eos_token_id"); it != c.end()) {
    if (it->is_number_integer()) cfg->eos_token_ids.push_back(it->get<int>());
    if (it->is_array()) {
      for (const auto& v : *it) {
        if (v.is_number_integer()) cfg->eos_token_ids.push_back(v.get<int>());
      }
    }
  }
  if (auto it = c.find("bos_token_id"); it != c.end() && it->is_number_integer()) {
    cfg->bos_token_id = it->get<int>();
  }
  ASSIGN_OR_RETURN(cfg->activation, ParseActivation(c));
  RETURN_IF_ERROR(ParseRope(c, "full_attention", 10000.f, &cfg->rope));
  cfg->rope_local = cfg->rope;
  return OkStatus();
}

Status GemmaFromGguf(const GgufArchKeys& keys, int layers_27b, ModelConfig* cfg) {
  // llama.cpp's converter stores Gemma's RMSNorm weights as 1 + w, so the norms are plain ones.
  cfg->norm_plus_one = false;
  cfg->sandwich_norm = true;
  cfg->activation = Activation::kGeluTanh;
  // llama.cpp scales by sqrtf(n_embd) in f32 (HF rounds it to the checkpoint's dtype).
  cfg->embed_scale = std::sqrt(static_cast<float>(cfg->hidden_size));
  const float scalar = cfg->num_layers == layers_27b
                           ? static_cast<float>(cfg->hidden_size / cfg->num_heads)
                           : static_cast<float>(cfg->head_dim);
  cfg->query_scale = 1.0f / std::sqrt(scalar);
  ASSIGN_OR_RETURN(cfg->final_logit_softcap, keys.Float("final_logit_softcapping", 0.f));
  return OkStatus();
}

}  // namespace arch_util
}  // namespace loom
