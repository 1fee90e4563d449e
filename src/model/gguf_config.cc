#include "model/gguf_config.h"

#include "model/arch/arch.h"

namespace loom {

StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& file) {
  const std::string arch = file.architecture();
  ASSIGN_OR_RETURN(const ArchSpec* spec, FindArchForGguf(arch));
  auto ctx = [&](const Status& s) { return s.WithContext(file.path()); };
  auto req_int = [&](const std::string& key) -> StatusOr<int> {
    auto v = file.GetInt(arch + "." + key);
    if (!v.ok()) return ctx(v.status());
    return static_cast<int>(*v);
  };
  auto opt_int = [&](const std::string& key, int def) {
    auto v = file.GetInt(arch + "." + key);
    return v.ok() ? static_cast<int>(*v) : def;
  };
  auto opt_float = [&](const std::string& key, float def) {
    auto v = file.GetFloat(arch + "." + key);
    return v.ok() ? static_cast<float>(*v) : def;
  };

  ModelConfig cfg;
  cfg.arch = spec->name;
  ASSIGN_OR_RETURN(cfg.num_layers, req_int("block_count"));
  ASSIGN_OR_RETURN(cfg.hidden_size, req_int("embedding_length"));
  ASSIGN_OR_RETURN(cfg.intermediate_size, req_int("feed_forward_length"));
  ASSIGN_OR_RETURN(cfg.num_heads, req_int("attention.head_count"));
  cfg.num_kv_heads = opt_int("attention.head_count_kv", cfg.num_heads);
  if (cfg.num_heads <= 0) return InvalidArgumentError(file.path() + ": attention.head_count must be > 0");
  cfg.head_dim = opt_int("attention.key_length", cfg.hidden_size / cfg.num_heads);
  cfg.rotary_dim = opt_int("rope.dimension_count", cfg.head_dim);
  cfg.max_position_embeddings = opt_int("context_length", 2048);
  cfg.rms_norm_eps = opt_float("attention.layer_norm_rms_epsilon", 1e-5f);
  cfg.rope.theta = opt_float("rope.freq_base", 10000.f);

  auto scaling = file.GetString(arch + ".rope.scaling.type");
  if (scaling.ok() && *scaling != "none") {
    if (*scaling == "linear") {
      cfg.rope.type = RopeType::kLinear;
      cfg.rope.factor = opt_float("rope.scaling.factor", 1.f);
    } else if (*scaling == "yarn") {
      cfg.rope.type = RopeType::kYarn;
      cfg.rope.factor = opt_float("rope.scaling.factor", 1.f);
      cfg.rope.original_max_position_embeddings = opt_int("rope.scaling.original_context_length", 0);
    } else {
      return UnimplementedError(file.path() + ": rope scaling type '" + *scaling + "' is not supported");
    }
  }
  if (file.FindTensor("rope_freqs.weight") != nullptr) {
    return UnimplementedError(file.path() +
                              ": per-dimension rope frequency factors (rope_freqs.weight, Llama 3.1 "
                              "style scaling in GGUF) are not supported yet");
  }
  cfg.rope_local = cfg.rope;
  cfg.layer_window.assign(static_cast<size_t>(std::max(cfg.num_layers, 0)), 0);

  // llama.cpp permutes Llama's q/k weights for pairwise rotation; Qwen keeps HF's half rotation.
  cfg.rope_interleaved = spec->name == "llama";
  cfg.attention_bias = spec->name == "qwen2";
  cfg.qk_norm = spec->name == "qwen3";
  cfg.tie_word_embeddings = file.FindTensor("output.weight") == nullptr;

  const GgufTensorInfo* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) return NotFoundError(file.path() + ": missing tensor 'token_embd.weight'");
  auto embd_tensor = file.GetTensor("token_embd.weight");
  if (!embd_tensor.ok()) return embd_tensor.status();
  cfg.vocab_size = static_cast<int>(embd_tensor->dim(0));

  if (auto eos = file.GetInt("tokenizer.ggml.eos_token_id"); eos.ok()) {
    cfg.eos_token_ids.push_back(static_cast<int>(*eos));
  }
  if (auto eot = file.GetInt("tokenizer.ggml.eot_token_id"); eot.ok() &&
      (cfg.eos_token_ids.empty() || cfg.eos_token_ids[0] != *eot)) {
    cfg.eos_token_ids.push_back(static_cast<int>(*eot));
  }
  if (auto bos = file.GetInt("tokenizer.ggml.bos_token_id"); bos.ok()) {
    cfg.bos_token_id = static_cast<int>(*bos);
  }
  return cfg;
}

}  // namespace loom
