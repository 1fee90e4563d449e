// AddedVocabulary: the tokenizer.json "added_tokens" (special tokens such as <|eot_id|> and
// user-added tokens). They are matched in the input before the model runs: leftmost-longest,
// non-normalized tokens on the raw text, normalized tokens on each normalized piece, with the
// lstrip/rstrip/single_word options of HF tokenizers. Immutable after Build(); thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/model.h"

namespace loom {

class Normalizer;

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;  // only match when not inside a word
  bool lstrip = false;       // also swallow whitespace on the left
  bool rstrip = false;       // also swallow whitespace on the right
  bool normalized = false;   // match against normalized text (content normalized too)
  bool special = false;      // skipped by Decode(skip_special_tokens=true)
};

class AddedVocabulary {
 public:
  // A piece of input: either text for the model (id == -1) or one added token.
  struct Piece {
    size_t begin, end;  // byte range in the searched string
    int32_t id;
  };

  // Registers a token (later duplicates of a content are ignored). Call Build() afterwards.
  void Add(AddedToken token);
  // Builds the two matchers; `normalizer` (may be null) normalizes the contents of tokens
  // marked normalized.
  void Build(const Normalizer* normalizer);

  // Splits `text` into pieces using the raw-text tokens (normalized_set=false) or the
  // normalized-text tokens (true). Pieces cover `text` in order; empty pieces are omitted.
  void Split(std::string_view text, bool normalized_set, std::vector<Piece>* pieces) const;
  bool has_normalized_tokens() const { return !normalized_trie_.empty(); }
  bool empty() const { return tokens_.empty(); }

  const AddedToken* FindById(int32_t id) const;
  std::optional<int32_t> FindByContent(std::string_view content) const;
  bool IsSpecial(int32_t id) const {
    const AddedToken* t = FindById(id);
    return t != nullptr && t->special;
  }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // Byte trie; node 0 is the root. `token` = index into tokens_ of a token ending here.
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;
  };
  struct Trie {
    std::vector<Node> nodes;
    bool empty() const { return nodes.size() <= 1; }
    void Insert(std::string_view key, int32_t token);
    // Longest token starting at text[pos]: (token index, length) or (-1, 0).
    std::pair<int32_t, size_t> LongestAt(std::string_view text, size_t pos) const;
    std::array<bool, 256> first_byte{};
  };
  void FindMatches(std::string_view text, const Trie& trie, std::vector<Piece>* pieces) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  StringMap<size_t> by_content_;
  Trie raw_trie_, normalized_trie_;
};

}  // namespace loom
