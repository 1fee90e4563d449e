// SentencePiece-style vocabularies mark a word start with U+2581 (▁). A word that holds several
// markers is tokenized in pieces cut before each marker, except where the character before it can
// precede a marker inside one token of the vocabulary (then a token may span the cut). Shared by
// the BPE and the SentencePiece models, which need the same cut points.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>

#include "tokenizer/unicode.h"

namespace loom {

inline constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581
inline constexpr char32_t kMetaspaceCodepoint = 0x2581;

// The code point that ends at byte `end` (exclusive) of `s` (a UTF-8 string, end > 0).
inline char32_t CodepointBefore(std::string_view s, size_t end) {
  size_t k = end - 1;
  while (k > 0 && (static_cast<uint8_t>(s[k]) & 0xC0) == 0x80) --k;
  size_t len;
  return unicode::DecodeAt(s, k, &len);
}

// Adds to `sticky` every character that precedes a ▁ inside `token` (other than ▁ itself).
inline void CollectStickyBeforeMetaspace(std::string_view token,
                                         std::unordered_set<char32_t>* sticky) {
  for (size_t pos = token.find(kMetaspace, 1); pos != std::string_view::npos;
       pos = token.find(kMetaspace, pos + kMetaspace.size())) {
    const char32_t prev = CodepointBefore(token, pos);
    if (prev != kMetaspaceCodepoint) sticky->insert(prev);
  }
}

// Calls piece(p) for the pieces of `word` in order: cut before every ▁ (not at byte 0) whose
// previous character is neither ▁ nor in `sticky`.
template <typename Piece>
void SplitAtMetaspace(std::string_view word, const std::unordered_set<char32_t>& sticky,
                      Piece&& piece) {
  size_t start = 0;
  for (size_t pos = word.find(kMetaspace, 1); pos != std::string_view::npos;
       pos = word.find(kMetaspace, pos + kMetaspace.size())) {
    const char32_t prev = CodepointBefore(word, pos);
    if (prev != kMetaspaceCodepoint && !sticky.count(prev)) {
      piece(word.substr(start, pos - start));
      start = pos;
    }
  }
  piece(word.substr(start));
}

}  // namespace loom
