#include "hf_to_gguf.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <numbers>

#include "io/json_file.h"
#include "io/safetensors_model.h"
#include "model/hf_quantization.h"
#include "model/weights.h"

namespace loom {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const json* FindNonNull(const json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

float FloatOr(const json& o, const char* key, float def) {
  const json* v = FindNonNull(o, key);
  return v != nullptr && v->is_number() ? v->get<float>() : def;
}

int IntOr(const json& o, const char* key, int def) {
  const json* v = FindNonNull(o, key);
  return v != nullptr && v->is_number_integer() ? v->get<int>() : def;
}

std::string StringOr(const json& o, const char* key, const std::string& def) {
  const json* v = FindNonNull(o, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : def;
}

// The converter's `rope_parameters` (transformers 5, or rebuilt from transformers-4 rope_theta +
// rope_scaling): the global layers' dict, and the sliding layers' (or null).
json GlobalRope(const json& c) {
  if (const json* rp = FindNonNull(c, "rope_parameters"); rp != nullptr && rp->is_object()) {
    if (const json* full = FindNonNull(*rp, "full_attention")) return *full;
    return *rp;
  }
  json out = json::object();
  if (const json* rs = FindNonNull(c, "rope_scaling"); rs != nullptr && rs->is_object()) out = *rs;
  if (const json* theta = FindNonNull(c, "rope_theta")) out["rope_theta"] = *theta;
  if (!out.contains("rope_type") && out.contains("type")) out["rope_type"] = out["type"];
  return out;
}

json SlidingRope(const json& c) {
  if (const json* rp = FindNonNull(c, "rope_parameters"); rp != nullptr && rp->is_object()) {
    if (const json* s = FindNonNull(*rp, "sliding_attention")) return *s;
  }
  if (const json* local = FindNonNull(c, "rope_local_base_freq")) {
    return json{{"rope_theta", *local}, {"rope_type", "default"}};
  }
  return nullptr;
}

// gguf.MODEL_ARCH name of an HF model_type.
StatusOr<std::string> GgufArchOf(const std::string& model_type) {
  if (model_type == "llama" || model_type == "mistral" || model_type == "mixtral") {
    return std::string("llama");
  }
  if (model_type == "qwen3_moe") return std::string("qwen3moe");
  if (model_type == "gpt_oss") return std::string("gpt-oss");
  if (model_type == "qwen2_moe") return std::string("qwen2moe");
  if (model_type == "qwen2" || model_type == "qwen3" || model_type == "gemma2" ||
      model_type == "phi3") {
    return model_type;
  }
  if (model_type == "gemma3_text" || model_type == "gemma3") return std::string("gemma3");
  return UnimplementedError("hf_to_gguf: model_type '" + model_type + "' is not covered");
}

// A host f32 copy of a 1-D f32/f16/bf16 tensor.
Tensor ToF32(const Tensor& t) {
  Tensor out = HostTensor(DType::kF32, Shape{t.numel()});
  float* dst = out.data_as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype() == DType::kF32) {
      dst[i] = t.data_as<const float>()[i];
    } else {
      uint16_t h = t.data_as<const uint16_t>()[i];
      dst[i] = t.dtype() == DType::kF16 ? F16ToF32(h) : Bf16ToF32(h);
    }
  }
  return out;
}

// LlamaModel.permute: rows [n_head, 2, hd/2] -> [n_head, hd/2, 2], i.e. within each head the two
// rotary halves are interleaved so that rope can rotate adjacent pairs.
//   old row h*hd + s*(hd/2) + j  ->  new row h*hd + 2*j + s
Tensor PermuteRows(const Tensor& t, int n_head) {
  Tensor out = HostTensor(t.dtype(), t.shape());
  const int64_t rows = t.dim(0);
  const int64_t hd = rows / n_head, half = hd / 2;
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(rows);
  const auto* src = static_cast<const char*>(t.data());
  auto* dst = static_cast<char*>(out.data());
  for (int64_t h = 0; h < n_head; ++h) {
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t j = 0; j < half; ++j) {
        const int64_t from = h * hd + s * half + j, to = h * hd + 2 * j + s;
        std::memcpy(dst + static_cast<size_t>(to) * row_bytes,
                    src + static_cast<size_t>(from) * row_bytes, row_bytes);
      }
    }
  }
  return out;
}

// The GGUF name of an HF tensor, or "" to drop it.
StatusOr<std::string> GgufTensorName(const std::string& arch, const std::string& hf) {
  const bool gemma = arch == "gemma2" || arch == "gemma3";
  if (hf == "model.embed_tokens.weight") return std::string("token_embd.weight");
  if (hf == "model.norm.weight") return std::string("output_norm.weight");
  if (hf == "lm_head.weight") return gemma ? std::string() : std::string("output.weight");
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) == 0) {
    const size_t dot = hf.find('.', prefix.size());
    const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
    const std::string rest = hf.substr(dot + 1);
    if (rest == "self_attn.sinks") return "blk." + layer + ".attn_sinks.weight";  // gpt-oss
    static const std::vector<std::pair<std::string, std::string>> kCommon = {
        {"input_layernorm", "attn_norm"},
        {"self_attn.q_proj", "attn_q"},
        {"self_attn.k_proj", "attn_k"},
        {"self_attn.v_proj", "attn_v"},
        {"self_attn.o_proj", "attn_output"},
        {"self_attn.qkv_proj", "attn_qkv"},
        {"self_attn.q_norm", "attn_q_norm"},
        {"self_attn.k_norm", "attn_k_norm"},
        {"pre_feedforward_layernorm", "ffn_norm"},
        {"post_feedforward_layernorm", "post_ffw_norm"},
        {"mlp.gate_proj", "ffn_gate"},
        {"mlp.up_proj", "ffn_up"},
        {"mlp.down_proj", "ffn_down"},
        {"mlp.gate_up_proj", "ffn_up"},  // Phi-3: gate rows then up rows, split by llama.cpp
        {"mlp.gate", "ffn_gate_inp"},    // MoE routers (Qwen; Mixtral below)
        {"block_sparse_moe.gate", "ffn_gate_inp"},
        {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"},  // Qwen2-MoE's shared expert
        {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
        {"mlp.shared_expert.down_proj", "ffn_down_shexp"},
        {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
        {"mlp.router", "ffn_gate_inp"},  // gpt-oss
    };
    std::vector<std::pair<std::string, std::string>> table = kCommon;
    // Gemma's sandwich norm after attention; everyone else's norm before the MLP.
    // (and gpt-oss's, which llama.cpp names the same).
    table.emplace_back("post_attention_layernorm",
                       gemma || arch == "gpt-oss" ? "post_attention_norm" : "ffn_norm");
    for (const auto& [from, to] : table) {
      if (rest.rfind(from + ".", 0) == 0) {
        return "blk." + layer + "." + to + rest.substr(from.size());
      }
    }
  }
  return UnimplementedError("hf_to_gguf: no GGUF name for tensor '" + hf + "' (" + arch + ")");
}

// For gemma3: the period p with layer i sliding iff i % p < p - 1 that reproduces `sliding`
// (0 when none does).
int SlidingPeriod(const std::vector<bool>& sliding) {
  for (int p = 1; p <= static_cast<int>(sliding.size()) + 1; ++p) {
    bool ok = true;
    for (int i = 0; i < static_cast<int>(sliding.size()) && ok; ++i) {
      ok = sliding[static_cast<size_t>(i)] == (i % p < p - 1);
    }
    if (ok) return p;
  }
  return 0;
}

// One of gpt-oss's expert tensors (`model.layers.N.mlp.experts.<part>`) as llama.cpp's converter
// writes it (GptOssModel, gate and up not fused): gate_up_proj [E, hidden, 2f] (x @ W, gate and
// up columns interleaved) -> ffn_gate_exps / ffn_up_exps [E, f, hidden]; down_proj [E, f, hidden]
// -> ffn_down_exps [E, hidden, f]; their biases [E, out] likewise; MXFP4 `_blocks` repacked into
// GGUF's blocks as GptOssModel.repack_mxfp4 does (Mxfp4FromHfBlocks; the `_scales` go with them).
Status AddGptOssExperts(const SafetensorsModel& st, const std::string& hf, GgufWriter* w) {
  const size_t at = hf.find(".mlp.experts.");
  const size_t start = std::strlen("model.layers.");
  const std::string layer = hf.substr(start, hf.find('.', start) - start);
  const std::string part = hf.substr(at + std::strlen(".mlp.experts."));
  const std::string blk = "blk." + layer + ".";
  if (part.ends_with("_scales")) return OkStatus();
  ASSIGN_OR_RETURN(Tensor t, st.GetTensor(hf));
  if (part == "gate_up_proj_blocks" || part == "down_proj_blocks") {
    ASSIGN_OR_RETURN(Tensor scales,
                     st.GetTensor(hf.substr(0, hf.size() - std::strlen("_blocks")) + "_scales"));
    if (part == "down_proj_blocks") {
      ASSIGN_OR_RETURN(Tensor packed, Mxfp4FromHfBlocks(t, scales, hf));
      w->AddTensor(blk + "ffn_down_exps.weight", packed);
      return OkStatus();
    }
    for (int half = 0; half < 2; ++half) {
      ASSIGN_OR_RETURN(Tensor packed,
                       Mxfp4FromHfBlocks(EveryOtherRow(t, half), EveryOtherRow(scales, half), hf));
      w->AddTensor(blk + (half == 0 ? "ffn_gate_exps.weight" : "ffn_up_exps.weight"), packed);
    }
    return OkStatus();
  }
  if (part == "gate_up_proj" || part == "gate_up_proj_bias") {
    if (part == "gate_up_proj")
      t = TransposeExperts(t);  // [E, 2f, hidden]
    else
      t = ToF32(t).Reshape(t.shape());
    const std::string suffix = part == "gate_up_proj" ? ".weight" : ".bias";
    w->AddTensor(blk + "ffn_gate_exps" + suffix, EveryOtherRow(t, 0));
    w->AddTensor(blk + "ffn_up_exps" + suffix, EveryOtherRow(t, 1));
    return OkStatus();
  }
  if (part == "down_proj") {
    w->AddTensor(blk + "ffn_down_exps.weight", TransposeExperts(t));
    return OkStatus();
  }
  if (part == "down_proj_bias") {
    w->AddTensor(blk + "ffn_down_exps.bias", ToF32(t).Reshape(t.shape()));
    return OkStatus();
  }
  return UnimplementedError("hf_to_gguf: gpt-oss expert tensor '" + hf + "' is not covered");
}

}  // namespace

std::vector<float> Llama3RopeFreqFactors(float theta, int head_dim, float factor,
                                         float low_freq_factor, float high_freq_factor,
                                         int original_max_position_embeddings) {
  const float old_len = static_cast<float>(original_max_position_embeddings);
  const float low_freq_wavelen = old_len / low_freq_factor;
  const float high_freq_wavelen = old_len / high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < head_dim; i += 2) {
    // freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)), in f32.
    const float freq = 1.0f / std::pow(theta, static_cast<float>(i) / static_cast<float>(head_dim));
    const float wavelen = static_cast<float>(2 * std::numbers::pi) / freq;
    if (wavelen < high_freq_wavelen) {
      out.push_back(1.f);
    } else if (wavelen > low_freq_wavelen) {
      out.push_back(factor);
    } else {
      const float smooth =
          (old_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      out.push_back(1.f / ((1.f - smooth) / factor + smooth));
    }
  }
  return out;
}

StatusOr<GgufWriter> ConvertHfToGguf(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  ASSIGN_OR_RETURN(json c, LoadJsonFile(config_path));
  ASSIGN_OR_RETURN(std::string arch, GgufArchOf(StringOr(c, "model_type", "")));
  ASSIGN_OR_RETURN(SafetensorsModel st, SafetensorsModel::Open(dir));

  const int n_layer = IntOr(c, "num_hidden_layers", 0);
  const int n_embd = IntOr(c, "hidden_size", 0);
  const int n_head = IntOr(c, "num_attention_heads", 0);
  const int n_head_kv = IntOr(c, "num_key_value_heads", n_head);
  const int head_dim = IntOr(c, "head_dim", n_head > 0 ? n_embd / n_head : 0);
  if (n_layer <= 0 || n_embd <= 0 || n_head <= 0) {
    return InvalidArgumentError(config_path +
                                ": needs num_hidden_layers, hidden_size, num_attention_heads");
  }
  const json rope = GlobalRope(c);
  const json rope_swa = SlidingRope(c);
  const std::string rope_type = StringOr(rope, "rope_type", "default");
  const float rope_theta = FloatOr(rope, "rope_theta", 10000.f);
  const std::string a = arch + ".";

  GgufWriter w;
  w.SetString("general.architecture", arch);
  w.SetString("general.name", fs::path(dir).filename().string());
  w.SetU32("general.file_type", 0);  // LLAMA_FTYPE_ALL_F32 (the tiny goldens are f32)
  w.SetU32(a + "block_count", static_cast<uint32_t>(n_layer));
  w.SetU32(a + "context_length", static_cast<uint32_t>(IntOr(c, "max_position_embeddings", 0)));
  w.SetU32(a + "embedding_length", static_cast<uint32_t>(n_embd));
  w.SetU32(a + "feed_forward_length", static_cast<uint32_t>(IntOr(c, "intermediate_size", 0)));
  w.SetU32(a + "attention.head_count", static_cast<uint32_t>(n_head));
  w.SetU32(a + "attention.head_count_kv", static_cast<uint32_t>(n_head_kv));
  w.SetF32(a + "attention.layer_norm_rms_epsilon", FloatOr(c, "rms_norm_eps", 1e-6f));
  if (FindNonNull(c, "head_dim") != nullptr && arch != "phi3") {
    w.SetU32(a + "attention.key_length", static_cast<uint32_t>(head_dim));
    w.SetU32(a + "attention.value_length", static_cast<uint32_t>(head_dim));
  }
  // TextModel.set_gguf_parameters: rope base and linear / yarn scaling (Gemma2Model writes
  // neither: llama.cpp's default base 10000 is Gemma 2's).
  if (arch != "gemma2") {
    w.SetF32(a + "rope.freq_base", rope_theta);
    if (rope_type == "linear" && FindNonNull(rope, "factor") != nullptr) {
      w.SetString(a + "rope.scaling.type", "linear");
      w.SetF32(a + "rope.scaling.factor", FloatOr(rope, "factor", 1.f));
    } else if (rope_type == "yarn" && FindNonNull(rope, "factor") != nullptr) {
      w.SetString(a + "rope.scaling.type", "yarn");
      w.SetF32(a + "rope.scaling.factor", FloatOr(rope, "factor", 1.f));
      w.SetU32(a + "rope.scaling.original_context_length",
               static_cast<uint32_t>(IntOr(rope, "original_max_position_embeddings", 0)));
      if (FindNonNull(rope, "beta_fast"))
        w.SetF32(a + "rope.scaling.yarn_beta_fast", FloatOr(rope, "beta_fast", 32.f));
      if (FindNonNull(rope, "beta_slow"))
        w.SetF32(a + "rope.scaling.yarn_beta_slow", FloatOr(rope, "beta_slow", 1.f));
      if (FindNonNull(rope, "attention_factor")) {
        return UnimplementedError(config_path + ": yarn attention_factor is not covered");
      }
    } else if (rope_type != "default" && !(rope_type == "llama3" && arch == "llama")) {
      return UnimplementedError(config_path + ": rope_type '" + rope_type + "' is not covered");
    }
  }
  if (const json* bos = FindNonNull(c, "bos_token_id");
      bos != nullptr && bos->is_number_integer()) {
    w.SetU32("tokenizer.ggml.bos_token_id", bos->get<uint32_t>());
  }
  if (const json* eos = FindNonNull(c, "eos_token_id");
      eos != nullptr && eos->is_number_integer()) {
    w.SetU32("tokenizer.ggml.eos_token_id", eos->get<uint32_t>());
  }

  if (arch == "llama") {
    if (FindNonNull(c, "sliding_window") != nullptr) {
      return UnimplementedError(config_path + ": a sliding window has no key in llama GGUFs");
    }
    w.SetU32(a + "vocab_size", static_cast<uint32_t>(IntOr(c, "vocab_size", 0)));
    w.SetU32(a + "rope.dimension_count", static_cast<uint32_t>(head_dim));
    if (rope_type == "llama3") {
      std::vector<float> f = Llama3RopeFreqFactors(
          rope_theta, head_dim, FloatOr(rope, "factor", 8.f), FloatOr(rope, "low_freq_factor", 1.f),
          FloatOr(rope, "high_freq_factor", 4.f),
          IntOr(rope, "original_max_position_embeddings", 8192));
      w.AddTensor(
          "rope_freqs.weight", DType::kF32, Shape{static_cast<int64_t>(f.size())},
          std::string_view(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float)));
    }
  } else if (arch == "qwen2" || arch == "qwen3" || arch == "qwen2moe" || arch == "qwen3moe") {
    if (c.value("use_sliding_window", false)) {
      return UnimplementedError(config_path + ": qwen sliding windows have no GGUF key");
    }
  } else if (arch == "gemma2") {
    const float qpas = FloatOr(c, "query_pre_attn_scalar", static_cast<float>(head_dim));
    const float expected =
        n_layer == 46 ? static_cast<float>(n_embd / n_head) : static_cast<float>(head_dim);
    if (qpas != expected) {
      return UnimplementedError(config_path + ": query_pre_attn_scalar " + std::to_string(qpas) +
                                " has no GGUF key (llama.cpp assumes " + std::to_string(expected) +
                                ")");
    }
    w.SetF32(a + "attn_logit_softcapping", FloatOr(c, "attn_logit_softcapping", 0.f));
    w.SetF32(a + "final_logit_softcapping", FloatOr(c, "final_logit_softcapping", 0.f));
    w.SetU32(a + "attention.sliding_window", static_cast<uint32_t>(IntOr(c, "sliding_window", 0)));
  } else if (arch == "gemma3") {
    const float qpas = FloatOr(c, "query_pre_attn_scalar", static_cast<float>(head_dim));
    const float expected =
        n_layer == 62 ? static_cast<float>(n_embd / n_head) : static_cast<float>(head_dim);
    if (qpas != expected) {
      return UnimplementedError(config_path + ": query_pre_attn_scalar has no GGUF key");
    }
    if (!rope_swa.is_null())
      w.SetF32(a + "rope.freq_base_swa", FloatOr(rope_swa, "rope_theta", 10000.f));
    if (float cap = FloatOr(c, "final_logit_softcapping", 0.f); cap != 0.f) {
      w.SetF32(a + "final_logit_softcapping", cap);
    }
    const int window = IntOr(c, "sliding_window", 0);
    if (IntOr(c, "sliding_window_pattern", 6) != 1 && window > 0) {
      w.SetU32(a + "attention.sliding_window", static_cast<uint32_t>(window));
      std::vector<bool> sliding(static_cast<size_t>(n_layer));
      const json* types = FindNonNull(c, "layer_types");
      for (int i = 0; i < n_layer; ++i) {
        sliding[static_cast<size_t>(i)] =
            types != nullptr ? (*types)[static_cast<size_t>(i)] == "sliding_attention"
                             : (i + 1) % 6 != 0;
      }
      // The converter writes no pattern: llama.cpp assumes Gemma 3's 6 and reads an override.
      const int period = SlidingPeriod(sliding);
      if (period == 0) return UnimplementedError(config_path + ": layer_types is not periodic");
      if (period != 6)
        w.SetU32(a + "attention.sliding_window_pattern", static_cast<uint32_t>(period));
    }
  } else if (arch == "gpt-oss") {
    // GptOssModel.set_gguf_parameters; llama.cpp hardcodes every other layer sliding (from 0).
    w.SetU32(a + "attention.sliding_window", static_cast<uint32_t>(IntOr(c, "sliding_window", 0)));
    w.SetU32(a + "expert_feed_forward_length",
             static_cast<uint32_t>(IntOr(c, "intermediate_size", 0)));
    if (const float limit = FloatOr(c, "swiglu_limit", 7.f); limit != 7.f) {
      return UnimplementedError(config_path + ": swiglu_limit " + std::to_string(limit) +
                                " has no GGUF key (llama.cpp clamps gpt-oss at 7)");
    }
    if (const json* types = FindNonNull(c, "layer_types")) {
      for (int i = 0; i < n_layer; ++i) {
        if (((*types)[static_cast<size_t>(i)] == "sliding_attention") != (i % 2 == 0)) {
          return UnimplementedError(config_path +
                                    ": gpt-oss layer_types other than sliding / "
                                    "full in turn have no GGUF key");
        }
      }
    }
  } else if (arch == "phi3") {
    // Phi3MiniModel: rope dims from partial_rotary_factor, sliding window 0 when absent.
    float partial =
        FloatOr(c, "partial_rotary_factor", FloatOr(rope, "partial_rotary_factor", 1.f));
    w.SetU32(
        a + "rope.dimension_count",
        static_cast<uint32_t>(static_cast<int>(partial * static_cast<float>(n_embd)) / n_head));
    w.SetU32(a + "rope.scaling.original_context_length",
             static_cast<uint32_t>(IntOr(c, "original_max_position_embeddings",
                                         IntOr(c, "max_position_embeddings", 0))));
    w.SetU32(a + "attention.sliding_window", static_cast<uint32_t>(IntOr(c, "sliding_window", 0)));
  }

  // Mixtures of experts (TextModel / Qwen2MoeModel.set_gguf_parameters); llama.cpp makes every
  // layer sparse, and renormalizes the top-k weights of qwen3moe and of Mixtral.
  const int n_expert = IntOr(c, "num_local_experts", IntOr(c, "num_experts", 0));
  if (n_expert > 0) {
    w.SetU32(a + "expert_count", static_cast<uint32_t>(n_expert));
    w.SetU32(a + "expert_used_count", static_cast<uint32_t>(IntOr(c, "num_experts_per_tok", 0)));
    if (arch == "qwen2moe" || arch == "qwen3moe") {
      w.SetU32(a + "expert_feed_forward_length",
               static_cast<uint32_t>(IntOr(c, "moe_intermediate_size", 0)));
      const json* dense = FindNonNull(c, "mlp_only_layers");
      if ((dense != nullptr && !dense->empty()) || IntOr(c, "decoder_sparse_step", 1) != 1) {
        return UnimplementedError(config_path +
                                  ": dense layers between sparse ones have no GGUF key");
      }
      if (arch == "qwen3moe" && !c.value("norm_topk_prob", false)) {
        return UnimplementedError(config_path + ": llama.cpp's qwen3moe always renormalizes");
      }
      if (arch == "qwen2moe" && c.value("norm_topk_prob", false)) {
        return UnimplementedError(config_path + ": llama.cpp's qwen2moe never renormalizes");
      }
    }
    if (const int shared = IntOr(c, "shared_expert_intermediate_size", 0); shared > 0) {
      w.SetU32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(shared));
    }
  }
  // Experts by layer and projection ("gate" / "up" / "down"), stacked once all are read: the HF
  // checkpoints' per-expert tensors, or transformers 5's stacked gate_up_proj / down_proj.
  std::map<std::pair<int, std::string>, std::vector<Tensor>> experts;
  auto expert_part = [&](const std::string& hf, int* layer, std::string* kind, int* index) -> bool {
    const std::string prefix = "model.layers.";
    if (hf.rfind(prefix, 0) != 0) return false;
    const size_t dot = hf.find('.', prefix.size());
    *layer = std::stoi(hf.substr(prefix.size(), dot - prefix.size()));
    std::string rest = hf.substr(dot + 1);
    for (const char* p : {"mlp.experts.", "block_sparse_moe.experts."}) {
      if (rest.rfind(p, 0) != 0) continue;
      rest = rest.substr(std::strlen(p));
      if (rest == "gate_up_proj" || rest == "down_proj") {
        *index = -1;
        *kind = rest;
        return true;
      }
      const size_t d2 = rest.find('.');
      *index = std::stoi(rest.substr(0, d2));
      const std::string part = rest.substr(d2 + 1);
      if (part == "gate_proj.weight" || part == "w1.weight") *kind = "gate";
      if (part == "up_proj.weight" || part == "w3.weight") *kind = "up";
      if (part == "down_proj.weight" || part == "w2.weight") *kind = "down";
      return !kind->empty();
    }
    return false;
  };

  for (const std::string& hf : st.names()) {
    int layer = 0, index = 0;
    std::string kind;
    if (arch == "gpt-oss" && hf.find(".mlp.experts.") != std::string::npos) {
      RETURN_IF_ERROR(AddGptOssExperts(st, hf, &w));
      continue;
    }
    if (expert_part(hf, &layer, &kind, &index)) {
      ASSIGN_OR_RETURN(Tensor t, st.GetTensor(hf));
      if (index < 0 && kind == "down_proj") {
        experts[{layer, "down"}] = {t};
      } else if (index < 0) {  // [E, 2F, H]: gate rows then up rows of each expert
        const int64_t e = t.dim(0), f = t.dim(1) / 2, h = t.dim(2);
        const size_t bytes = static_cast<size_t>(f) * t.row_bytes();
        for (int half = 0; half < 2; ++half) {
          Tensor part = HostTensor(t.dtype(), Shape{e, f, h});
          for (int64_t x = 0; x < e; ++x) {
            std::memcpy(static_cast<char*>(part.data()) + static_cast<size_t>(x) * bytes,
                        static_cast<const char*>(t.data()) +
                            (2 * static_cast<size_t>(x) + static_cast<size_t>(half)) * bytes,
                        bytes);
          }
          experts[{layer, half == 0 ? "gate" : "up"}] = {part};
        }
      } else {
        std::vector<Tensor>& v = experts[{layer, kind}];
        if (v.size() <= static_cast<size_t>(index)) v.resize(static_cast<size_t>(index) + 1);
        v[static_cast<size_t>(index)] = t;
      }
      continue;
    }
    ASSIGN_OR_RETURN(std::string name, GgufTensorName(arch, hf));
    if (name.empty()) continue;
    ASSIGN_OR_RETURN(Tensor t, st.GetTensor(hf));
    if (arch == "llama" &&
        (hf.ends_with("self_attn.q_proj.weight") || hf.ends_with("self_attn.q_proj.bias"))) {
      t = PermuteRows(t, n_head);
    } else if (arch == "llama" &&
               (hf.ends_with("self_attn.k_proj.weight") || hf.ends_with("self_attn.k_proj.bias"))) {
      t = PermuteRows(t, n_head_kv);
    }
    if (t.ndim() == 1) {
      t = ToF32(t);
      // Gemma*Model.modify_tensors: every *norm.weight gets + 1 (HF's RMSNorm multiplies by 1 + w).
      // For a bf16 checkpoint the converter adds in bf16; the tiny goldens are f32.
      if ((arch == "gemma2" || arch == "gemma3") && hf.ends_with("norm.weight")) {
        float* p = t.data_as<float>();
        for (int64_t i = 0; i < t.numel(); ++i) p[i] += 1.f;
      }
    }
    w.AddTensor(name, t);
  }
  for (const auto& [key, parts] : experts) {
    const std::string name =
        "blk." + std::to_string(key.first) + ".ffn_" + key.second + "_exps.weight";
    if (parts.size() == 1 && parts[0].ndim() == 3) {
      w.AddTensor(name, parts[0]);
      continue;
    }
    std::string bytes;
    for (size_t x = 0; x < parts.size(); ++x) {
      if (!parts[x].defined() || parts[x].shape() != parts[0].shape() ||
          parts[x].dtype() != parts[0].dtype()) {
        return InvalidArgumentError(dir + ": expert " + std::to_string(x) + " of " + name +
                                    " is missing or differs from expert 0");
      }
      bytes.append(static_cast<const char*>(parts[x].data()), parts[x].nbytes());
    }
    w.AddTensor(name, parts[0].dtype(),
                Shape{static_cast<int64_t>(parts.size()), parts[0].dim(0), parts[0].dim(1)}, bytes);
  }
  return w;
}

}  // namespace loom
