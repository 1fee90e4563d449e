#include "model/gguf_config.h"

#include <algorithm>

#include "model/arch/arch.h"

namespace loom {
namespace {

// A per-dimension f32/f16/bf16 vector tensor, as floats.
StatusOr<std::vector<float>> ReadVectorTensor(const GgufFile& file, const std::string& name) {
  ASSIGN_OR_RETURN(Tensor t, file.GetTensor(name));
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case DType::kF32:
        out[static_cast<size_t>(i)] = t.data_as<const float>()[i];
        break;
      case DType::kF16:
        out[static_cast<size_t>(i)] = F16ToF32(t.data_as<const uint16_t>()[i]);
        break;
      case DType::kBF16:
        out[static_cast<size_t>(i)] = Bf16ToF32(t.data_as<const uint16_t>()[i]);
        break;
      default:
        return InvalidArgumentError(file.path() + ": tensor '" + name +
                                    "' must be f32/f16/bf16, got " +
                                    std::string(DTypeName(t.dtype())));
    }
  }
  return out;
}

// "<arch>.rope.scaling.*" (and the older "<arch>.rope.scale_linear") onto `rope`. Like llama.cpp, a
// factor without a type is linear scaling.
Status ReadRopeScaling(const GgufArchKeys& keys, RopeConfig* rope) {
  const GgufFile& file = keys.file();
  std::string type = "linear";
  if (keys.Has("rope.scaling.type")) {
    ASSIGN_OR_RETURN(type, file.GetString(keys.arch() + ".rope.scaling.type"));
  }
  float factor = 0.f;
  if (keys.Has("rope.scaling.factor")) {
    ASSIGN_OR_RETURN(factor, keys.Float("rope.scaling.factor", 0.f));
  } else {
    ASSIGN_OR_RETURN(factor, keys.Float("rope.scale_linear", 0.f));
  }
  if (type == "none" || (type == "linear" && (factor == 0.f || factor == 1.f))) return OkStatus();
  if (type == "linear") {
    rope->type = RopeType::kLinear;
    rope->factor = factor;
  } else if (type == "yarn") {
    rope->type = RopeType::kYarn;
    rope->factor = factor == 0.f ? 1.f : factor;
    ASSIGN_OR_RETURN(rope->original_max_position_embeddings,
                     keys.Int("rope.scaling.original_context_length", 0));
    ASSIGN_OR_RETURN(rope->beta_fast, keys.Float("rope.scaling.yarn_beta_fast", rope->beta_fast));
    ASSIGN_OR_RETURN(rope->beta_slow, keys.Float("rope.scaling.yarn_beta_slow", rope->beta_slow));
  } else {
    return UnimplementedError(file.path() + ": rope scaling type '" + type +
                              "' is not supported (supported: none, linear, yarn, and Llama 3.1 "
                              "frequency factors in rope_freqs.weight)");
  }
  return OkStatus();
}

}  // namespace

StatusOr<int> GgufArchKeys::RequiredInt(const std::string& key) const {
  ASSIGN_OR_RETURN(int64_t v, file_.GetInt(arch_ + "." + key));
  return static_cast<int>(v);
}

StatusOr<int> GgufArchKeys::Int(const std::string& key, int def) const {
  if (!Has(key)) return def;
  return RequiredInt(key);
}

StatusOr<float> GgufArchKeys::Float(const std::string& key, float def) const {
  if (!Has(key)) return def;
  ASSIGN_OR_RETURN(double v, file_.GetFloat(arch_ + "." + key));
  return static_cast<float>(v);
}

StatusOr<std::vector<bool>> GgufSlidingLayers(const GgufArchKeys& keys, int num_layers,
                                              int default_period) {
  const std::string key = keys.arch() + ".attention.sliding_window_pattern";
  std::vector<bool> sliding(static_cast<size_t>(std::max(num_layers, 0)));
  const GgufValue* v = keys.file().Find(key);
  if (v != nullptr && v->type() == GgufType::kArray) {
    if (static_cast<int>(v->elements().size()) != num_layers) {
      return InvalidArgumentError(keys.file().path() + ": metadata '" + key + "' has " +
                                  std::to_string(v->elements().size()) + " entries for " +
                                  std::to_string(num_layers) + " layers");
    }
    for (size_t i = 0; i < sliding.size(); ++i) {
      const GgufValue& e = v->elements()[i];
      if (e.type() == GgufType::kBool) {
        sliding[i] = e.raw_bool();
        continue;
      }
      StatusOr<int64_t> flag = e.AsInt();
      if (!flag.ok())
        return flag.status().WithContext(keys.file().path() + ": metadata '" + key + "'");
      sliding[i] = *flag != 0;
    }
    return sliding;
  }
  ASSIGN_OR_RETURN(int period, keys.Int("attention.sliding_window_pattern", default_period));
  if (period < 0)
    return InvalidArgumentError(keys.file().path() + ": metadata '" + key + "' must be >= 0");
  for (int i = 0; i < num_layers; ++i) {
    sliding[static_cast<size_t>(i)] = period == 0 || i % period < period - 1;
  }
  return sliding;
}

StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file) {
  const std::string arch = file.architecture();
  auto found = FindArchForGguf(arch);
  if (!found.ok()) return found.status().WithContext(file.path());
  const ArchSpec* spec = *found;
  const GgufArchKeys keys(file, arch);

  ModelConfig cfg;
  cfg.arch = spec->name;
  ASSIGN_OR_RETURN(cfg.num_layers, keys.RequiredInt("block_count"));
  ASSIGN_OR_RETURN(cfg.hidden_size, keys.RequiredInt("embedding_length"));
  ASSIGN_OR_RETURN(cfg.intermediate_size, keys.RequiredInt("feed_forward_length"));
  ASSIGN_OR_RETURN(cfg.num_heads, keys.RequiredInt("attention.head_count"));
  ASSIGN_OR_RETURN(cfg.num_kv_heads, keys.Int("attention.head_count_kv", cfg.num_heads));
  if (cfg.num_heads <= 0)
    return InvalidArgumentError(file.path() + ": attention.head_count must be > 0");
  ASSIGN_OR_RETURN(cfg.head_dim, keys.Int("attention.key_length", cfg.hidden_size / cfg.num_heads));
  ASSIGN_OR_RETURN(cfg.rotary_dim, keys.Int("rope.dimension_count", cfg.head_dim));
  ASSIGN_OR_RETURN(cfg.max_position_embeddings, keys.Int("context_length", 2048));
  ASSIGN_OR_RETURN(cfg.rms_norm_eps, keys.Float("attention.layer_norm_rms_epsilon", 1e-5f));
  ASSIGN_OR_RETURN(cfg.rope.theta, keys.Float("rope.freq_base", 10000.f));
  RETURN_IF_ERROR(ReadRopeScaling(keys, &cfg.rope));
  if (cfg.rope.type == RopeType::kYarn && cfg.rope.original_max_position_embeddings <= 0) {
    // llama.cpp's n_ctx_orig_yarn falls back to the training context too.
    cfg.rope.original_max_position_embeddings = cfg.max_position_embeddings;
  }

  // Llama 3.1 / 3.2: llama.cpp's converter turns rope_scaling {rope_type: llama3} into one factor
  // per rotary dimension pair (1 for high frequencies, `factor` for low ones, smooth in between),
  // applied on top of the unscaled frequencies of every layer.
  if (file.FindTensor("rope_freqs.weight") != nullptr) {
    ASSIGN_OR_RETURN(cfg.rope.freq_factors, ReadVectorTensor(file, "rope_freqs.weight"));
  }
  // Phi-3's LongRoPE ships two factor tables; HF's Phi-3 path refuses it too.
  for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
    if (file.FindTensor(name) != nullptr) {
      return UnimplementedError(file.path() + ": LongRoPE scaling (tensor '" + std::string(name) +
                                "') is not supported yet");
    }
  }
  cfg.rope_local = cfg.rope;
  cfg.layer_window.assign(static_cast<size_t>(std::max(cfg.num_layers, 0)), 0);
  // Mixture of experts (llama.cpp: every layer sparse; the expert width defaults to the FFN's, as
  // Mixtral's "llama" files leave it; whether top-k weights are renormalized is the arch's).
  ASSIGN_OR_RETURN(cfg.num_experts, keys.Int("expert_count", 0));
  if (cfg.num_experts > 0) {
    ASSIGN_OR_RETURN(cfg.num_experts_per_tok, keys.RequiredInt("expert_used_count"));
    ASSIGN_OR_RETURN(cfg.moe_intermediate_size,
                     keys.Int("expert_feed_forward_length", cfg.intermediate_size));
    ASSIGN_OR_RETURN(cfg.shared_expert_intermediate_size,
                     keys.Int("expert_shared_feed_forward_length", 0));
    cfg.layer_moe.assign(static_cast<size_t>(std::max(cfg.num_layers, 0)), true);
  }
  cfg.tie_word_embeddings = file.FindTensor("output.weight") == nullptr;

  const GgufTensorInfo* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) return NotFoundError(file.path() + ": missing tensor 'token_embd.weight'");
  if (embd->shape.ndim() != 2) {
    return InvalidArgumentError(file.path() + ": tensor 'token_embd.weight' must be 2-D, got " +
                                embd->shape.ToString());
  }
  cfg.vocab_size = static_cast<int>(embd->shape[0]);

  if (auto eos = file.GetInt("tokenizer.ggml.eos_token_id"); eos.ok()) {
    cfg.eos_token_ids.push_back(static_cast<int>(*eos));
  }
  if (auto eot = file.GetInt("tokenizer.ggml.eot_token_id");
      eot.ok() && (cfg.eos_token_ids.empty() || cfg.eos_token_ids[0] != *eot)) {
    cfg.eos_token_ids.push_back(static_cast<int>(*eot));
  }
  if (auto bos = file.GetInt("tokenizer.ggml.bos_token_id"); bos.ok()) {
    cfg.bos_token_id = static_cast<int>(*bos);
  }
  RETURN_IF_ERROR(spec->from_gguf(keys, &cfg));
  return cfg;
}

}  // namespace loom
