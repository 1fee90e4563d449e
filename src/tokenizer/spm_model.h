// SpmModel: SentencePiece-BPE by piece scores, as llama.cpp tokenizes GGUF "llama" vocabularies:
// adjacent symbols whose concatenation is a piece merge highest score first (leftmost on ties);
// symbols that are not pieces are re-split along their merge history and finally emitted as
// <0xNN> byte tokens. Input words are already normalized ("\u2581" for spaces, prefix added).
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "tokenizer/model.h"
#include "tokenizer/word_cache.h"

namespace loom {

class SpmModel final : public TokenizerModel {
 public:
  // tokens[i], scores[i] describe id i. Errors: size mismatch, missing byte tokens.
  static StatusOr<std::unique_ptr<SpmModel>> Create(std::vector<std::string> tokens,
                                                    std::vector<float> scores);

  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const override;
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  const std::string* IdToToken(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(tokens_.size()); }
  // The longest piece, when all 256 byte tokens exist (else a character no piece covers is lost).
  std::optional<size_t> MaxBytesPerToken() const override;

 private:
  SpmModel() = default;
  void TokenizeWord(std::string_view word, std::vector<int32_t>* ids) const;
  int32_t ByteToken(uint8_t b) const { return byte_ids_[b]; }

  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  StringMap<int32_t> vocab_;
  std::array<int32_t, 256> byte_ids_{};
  std::unordered_set<char32_t> sticky_before_marker_;  // see BpeModel
  WordCache cache_;
};

}  // namespace loom
