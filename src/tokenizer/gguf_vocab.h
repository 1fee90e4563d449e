// GgufVocab: the tokenizer part of a GGUF file's metadata, as a plain struct. The io/ room
// fills it from the tokenizer.ggml.* keys; Tokenizer::FromGgufVocab builds a tokenizer from it
// (the tokenizer room does not depend on io/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom {

struct GgufVocab {
  // GGUF tokenizer.ggml.token_type values.
  enum TokenType : int32_t {
    kNormal = 1,
    kUnknown = 2,
    kControl = 3,
    kUserDefined = 4,
    kUnused = 5,
    kByte = 6
  };

  std::string model;                 // tokenizer.ggml.model: "llama" (SPM) or "gpt2" (BPE)
  std::string pre;                   // tokenizer.ggml.pre ("" = "default")
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens, index = id
  std::vector<float> scores;         // tokenizer.ggml.scores (required for "llama")
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (empty = all normal)
  std::vector<std::string> merges;   // tokenizer.ggml.merges, "left right" (required for "gpt2")
  std::optional<int32_t> bos_id;     // tokenizer.ggml.bos_token_id
  std::optional<int32_t> eos_id;     // tokenizer.ggml.eos_token_id
  std::optional<int32_t> unk_id;     // tokenizer.ggml.unknown_token_id
  std::optional<int32_t> pad_id;     // tokenizer.ggml.padding_token_id
  // Absent keys take llama.cpp's defaults: add_bos true for "llama" and the llama-bpe preset,
  // add_eos false, add_space_prefix true for "llama" and false for "gpt2".
  std::optional<bool> add_bos;           // tokenizer.ggml.add_bos_token
  std::optional<bool> add_eos;           // tokenizer.ggml.add_eos_token
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix
};

}  // namespace loom
