// TokenizerModel: the tokenizer.json "model" stage, which turns one pre-tokenized word into ids
// (BpeModel, UnigramModel, WordPieceModel, SpmModel for GGUF "llama" vocabularies).
// Immutable after loading; Tokenize is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace loom {

// unordered_map<std::string, V> that can be queried with a string_view without allocating.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

class TokenizerModel {
 public:
  virtual ~TokenizerModel() = default;
  // Appends the ids of `word` (one pre-tokenized, normalized word; raw bytes for byte-level
  // models) to *ids.
  virtual void Tokenize(std::string_view word, std::vector<int32_t>* ids) const = 0;
  // Vocabulary lookups by the token's string as written in the vocabulary file.
  virtual std::optional<int32_t> TokenToId(std::string_view token) const = 0;
  // nullptr when the model has no token with this id.
  virtual const std::string* IdToToken(int32_t id) const = 0;
  // One past the largest id of the model's vocabulary.
  virtual int32_t vocab_size() const = 0;
  // The most bytes of a word that one token of Tokenize's output can stand for, when every byte
  // of every word is covered by tokens (no byte dropped, no unknown token swallowing a run of
  // characters): then a word of n bytes gives at least ceil(n / bound) ids. nullopt when the
  // model gives no such bound (an unknown token, a missing byte token).
  virtual std::optional<size_t> MaxBytesPerToken() const { return std::nullopt; }
};

}  // namespace loom
