// Tokenizer::FromGgufVocab: GGUF vocabularies, tokenized the way llama.cpp does.
//   "llama": SentencePiece by scores (SpmModel), " " -> U+2581, a U+2581 prefix on each text
//            piece when add_space_prefix, <0xNN> byte fallback.
//   "gpt2":  byte-level BPE with llama.cpp's tokenizer.ggml.pre regex presets.
// CONTROL and UNKNOWN tokens become special added tokens, USER_DEFINED ones plain added tokens.
#include <map>

#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/spm_model.h"
#include "tokenizer/tokenizer.h"

namespace loom {
namespace {

constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kLlama3Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// llama.cpp's llm_tokenizer_bpe regex lists (src/llama-vocab.cpp), by tokenizer.ggml.pre.
std::optional<std::vector<std::string>> PresetRegexes(const std::string& pre) {
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "dbrx" ||
      pre == "smaug-bpe") {
    return std::vector<std::string>{kLlama3Regex};
  }
  if (pre == "qwen2" || pre == "stablelm2" || pre == "hunyuan") {
    return std::vector<std::string>{kQwen2Regex};
  }
  if (pre == "gpt-2" || pre == "gpt2" || pre == "mpt" || pre == "olmo" || pre == "jais") {
    return std::vector<std::string>{kGpt2Regex};
  }
  if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" ||
      pre == "codeshell" || pre == "exaone" || pre == "minerva") {
    return std::vector<std::string>{R"(\p{N})", kGpt2Regex};
  }
  if (pre == "falcon") {
    return std::vector<std::string>{R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Regex, "[0-9][0-9][0-9]"};
  }
  if (pre.empty() || pre == "default") {
    return std::vector<std::string>{R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Regex, R"(\p{N}+)",
                                    "[0-9][0-9][0-9]"};
  }
  return std::nullopt;
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGgufVocab(const GgufVocab& v) {
  const size_t n = v.tokens.size();
  if (n == 0) return InvalidArgumentError("GGUF tokenizer.ggml.tokens is empty");
  if (!v.token_types.empty() && v.token_types.size() != n) {
    return InvalidArgumentError("GGUF tokenizer.ggml.token_type has " +
                                std::to_string(v.token_types.size()) + " entries for " +
                                std::to_string(n) + " tokens");
  }
  auto check_id = [&](const std::optional<int32_t>& id, const char* key) -> Status {
    if (id && (*id < 0 || static_cast<size_t>(*id) >= n)) {
      return InvalidArgumentError(std::string("GGUF ") + key + " " + std::to_string(*id) +
                                  " is outside the vocabulary");
    }
    return OkStatus();
  };
  RETURN_IF_ERROR(check_id(v.bos_id, "tokenizer.ggml.bos_token_id"));
  RETURN_IF_ERROR(check_id(v.eos_id, "tokenizer.ggml.eos_token_id"));

  std::unique_ptr<Tokenizer> t(new Tokenizer());
  bool add_bos_default = false;
  if (v.model == "llama") {
    if (v.scores.size() != n) {
      return InvalidArgumentError("GGUF tokenizer.ggml.scores has " +
                                  std::to_string(v.scores.size()) + " entries for " +
                                  std::to_string(n) + " tokens");
    }
    ASSIGN_OR_RETURN(t->model_, SpmModel::Create(v.tokens, v.scores));
    const bool space_prefix = v.add_space_prefix.value_or(true);
    std::vector<std::unique_ptr<Normalizer>> steps;
    if (space_prefix) steps.push_back(Normalizer::MakePrepend("\xE2\x96\x81"));
    steps.push_back(Normalizer::MakeReplace(" ", "\xE2\x96\x81"));
    t->normalizer_ = Normalizer::MakeSequence(std::move(steps));
    t->decoder_ = Decoder::MakeSentencePiece(space_prefix);
    add_bos_default = true;
  } else if (v.model == "gpt2") {
    auto regexes = PresetRegexes(v.pre);
    if (!regexes) {
      return UnimplementedError("GGUF tokenizer.ggml.pre '" + v.pre +
                                "' is not a supported pre-tokenizer preset");
    }
    StringMap<int32_t> vocab;
    vocab.reserve(n);
    for (size_t i = 0; i < n; ++i) vocab.emplace(v.tokens[i], static_cast<int32_t>(i));
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(v.merges.size());
    for (const auto& m : v.merges) {
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos) {
        return InvalidArgumentError("GGUF tokenizer.ggml.merges entry '" + m +
                                    "' is not 'left right'");
      }
      merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
    }
    BpeOptions opt;
    opt.byte_level = true;
    const bool llama3 = v.pre == "llama-bpe" || v.pre == "llama3" || v.pre == "llama-v3";
    opt.ignore_merges = llama3;
    add_bos_default = llama3;
    auto model = BpeModel::Create(std::move(vocab), merges, opt);
    if (!model.ok()) return model.status().WithContext("GGUF vocabulary");
    t->model_ = std::move(model).value();
    ASSIGN_OR_RETURN(t->pre_tokenizer_, PreTokenizer::MakeRegexSequenceByteLevel(*regexes));
    t->decoder_ = Decoder::MakeByteLevel();
  } else {
    return UnimplementedError("GGUF tokenizer.ggml.model '" + v.model +
                              "' is not supported (supported: llama, gpt2)");
  }
  for (size_t i = 0; i < v.token_types.size(); ++i) {
    const int32_t type = v.token_types[i];
    if (type != GgufVocab::kControl && type != GgufVocab::kUserDefined &&
        type != GgufVocab::kUnknown) {
      continue;
    }
    if (v.tokens[i].empty()) continue;
    AddedToken tok;
    tok.id = static_cast<int32_t>(i);
    tok.content = v.tokens[i];
    tok.special = type != GgufVocab::kUserDefined;
    t->added_.Add(std::move(tok));
  }
  if (v.add_bos.value_or(add_bos_default) && v.bos_id) t->prefix_ids_.push_back(*v.bos_id);
  if (v.add_eos.value_or(false) && v.eos_id) t->suffix_ids_.push_back(*v.eos_id);
  t->bos_id_ = v.bos_id;
  t->eos_id_ = v.eos_id;
  if (v.bos_id) t->bos_token_ = v.tokens[*v.bos_id];
  if (v.eos_id) t->eos_token_ = v.tokens[*v.eos_id];
  t->Finalize();
  return t;
}

}  // namespace loom
