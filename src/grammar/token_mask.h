// TokenVocabulary: the byte strings of a model's tokens, compiled once into a byte trie, and the
// token mask of a grammar state: bit i of word i/32 is set when token i may be sampled next.
//
//   trie node: [first_edge, first_edge + num_edges) into edges (sorted by byte), and the token
//              ids whose bytes end exactly here: [first_token, first_token + num_tokens) of ids.
//
// A mask walks the trie depth-first, stepping the grammar once per edge, so a byte the grammar
// rejects prunes every token below it. Two things make it fast where nearly every token is
// allowed (inside a free-form string, where a plain walk costs ~40-50 ms for 150k tokens):
//  - the grammar steps go through a MaskDfa (mask_dfa.h): a known (state, byte class) edge is one
//    table load;
//  - plain text (mask_dfa.h: valid UTF-8 without `"`, `\`, C0 controls) is ~96% of a byte-level
//    vocabulary. When MaskDfa::PlainCharsAccepted proves that every plain string (of at most k
//    characters) is accepted, the plain tokens (of at most k characters) are copied in from a
//    precomputed mask, and the walk skips every subtree holding only those. The trie is laid out
//    so that the nodes such a walk visits come first: with no bound, the ~12k nodes above the
//    ~4% other tokens (`",` `\n` `"}` partial UTF-8 ...), which fit in L2.
//  - inside a free string the walk need not visit those ~12k nodes either: when every plain string
//    of one character or more leads to one and the same DFA state s1 (MaskDfa::PlainSuccessor), a
//    token made of plain characters P and a rest S (starting with a byte that does not continue
//    plain text) is allowed exactly when S is allowed from s1. So the other tokens are kept twice
//    more, split after their longest prefix of whole plain characters: those with an empty prefix
//    in head_trie_ (by all their bytes, walked from the state itself), the others in tail_trie_
//    (by S alone, walked from s1): ~2k nodes, most of them pruned at their first byte (`\n`).
//  - where the proof fails at once (after `\` in a string only an escape letter may follow), each
//    allowed first byte that is a plain ASCII character is tried as a new start: when every plain
//    string is accepted after it, the tokens it begins that continue with plain text only come
//    from a precomputed list (first_byte_plain_ids_) and the walk below it skips them.
// FillMask(matcher, bitmask) without a MaskDfa is the plain walk, kept as the reference.
//
// Special tokens (and empty tokens) are never allowed, except the EOS ids, which are allowed
// exactly when the matcher IsAccepting(). Immutable after construction; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "grammar/mask_dfa.h"
#include "grammar/matcher.h"

namespace loom {

class Tokenizer;

class TokenVocabulary {
 public:
  // token_bytes[id] = the bytes token id contributes mid-sequence. `never_allowed` ids (special
  // tokens) are masked out always; `eos_ids` are allowed exactly when the document is complete.
  TokenVocabulary(std::vector<std::string> token_bytes, const std::vector<TokenId>& never_allowed,
                  std::vector<TokenId> eos_ids);

  // From a tokenizer's stream plan (pieces[id], or the raw byte of a byte-fallback token);
  // special tokens are never allowed, and the EOS ids are the tokenizer's eos_id() plus
  // `extra_eos_ids` (e.g. a chat model's end-of-turn token). The special tokens spelled as one of
  // `special_as_text` are the exception: they stand for their text (a tool-call format's markers,
  // Mistral's [TOOL_CALLS], which a grammar of that format writes as a literal). Unimplemented
  // when the tokenizer's decoder has no per-token stream plan.
  static StatusOr<TokenVocabulary> FromTokenizer(
      const Tokenizer& tokenizer, const std::vector<TokenId>& extra_eos_ids = {},
      const std::vector<std::string>& special_as_text = {});

  int32_t size() const { return static_cast<int32_t>(token_bytes_.size()); }
  // Words of the bitmask FillMask writes: ceil(size() / 32).
  size_t mask_words() const { return (token_bytes_.size() + 31) / 32; }
  const std::string& token_bytes(TokenId id) const { return token_bytes_[id]; }
  bool IsEos(TokenId id) const { return id >= 0 && id < size() && kind_[id] == kEos; }
  // Never allowed whatever the grammar says: special and empty tokens.
  bool IsNeverAllowed(TokenId id) const { return kind_[id] == kNever; }
  const std::vector<TokenId>& eos_ids() const { return eos_ids_; }
  // The longest token a mask walk can meet (allowed tokens only), in bytes.
  int32_t max_token_bytes() const { return max_token_bytes_; }

  // The longest allowed token whose bytes are a prefix of `bytes`, and its length in bytes; {-1, 0}
  // when none is. Among tokens of equal bytes the highest id wins: vocabularies put their
  // byte-fallback tokens first (SentencePiece's <0x..> at ids 3-258), so the last one is the
  // model's own spelling. Jump-forward (GrammarState::JumpForward) tokenizes forced text with it.
  std::pair<TokenId, size_t> LongestTokenPrefix(std::string_view bytes) const;

  // Writes the mask of the tokens `matcher` accepts next into bitmask[0, mask_words()), by the
  // plain trie walk (the reference). The matcher is not modified (the walk runs on a Fork()).
  void FillMask(const GrammarMatcher& matcher, uint32_t* bitmask) const;
  // The same mask through `dfa` (built on matcher's grammar), `signature` being the matcher's
  // AppendStateSignature.
  void FillMask(const GrammarMatcher& matcher, const std::vector<int32_t>& signature, MaskDfa* dfa,
                uint32_t* bitmask) const;

 private:
  enum Kind : uint8_t { kNormal, kNever, kEos };
  struct Node {
    uint32_t first_edge = 0, num_edges = 0;
    uint32_t first_token = 0, num_tokens = 0;
  };
  struct Edge {
    uint8_t byte;
    // The most characters of a token below child, when all of them are plain text, else
    // kNotPlain (clamped to 254). Kept in the edge, which the walk reads anyway: a separate array
    // indexed by child costs a cache miss per edge.
    uint8_t plain_max;
    uint32_t child;
  };
  struct Trie {
    std::vector<Node> nodes;   // nodes[0] = root (the empty prefix)
    std::vector<Edge> edges;   // children of each node, contiguous, sorted by byte
    std::vector<TokenId> ids;  // tokens ending at each node, contiguous
  };
  // The trie of `keys` (a token's bytes or a part of them, and its id).
  static Trie BuildTrie(std::vector<std::pair<std::string_view, TokenId>> keys);
  // The plain walk (the reference).
  void Walk(uint32_t node, GrammarMatcher* m, uint32_t* bitmask) const;
  // The walk through the DFA from state `s`; skips the subtrees whose tokens are all plain text
  // of at most `skip_chars` characters (already set; 0 skips nothing).
  void DfaWalk(const Trie& trie, uint32_t node, int32_t s, MaskDfa* dfa, int skip_chars,
               uint32_t* bitmask) const;
  static void SetTokens(const Trie& trie, uint32_t node, uint32_t* bitmask) {
    const Node& n = trie.nodes[node];
    for (uint32_t t = n.first_token; t < n.first_token + n.num_tokens; ++t) {
      bitmask[trie.ids[t] >> 5] |= uint32_t{1} << (trie.ids[t] & 31);
    }
  }
  // The walk from the root when the plain-text proof fails there (see above).
  void DfaWalkFirstBytes(int32_t s, MaskDfa* dfa, uint32_t* bitmask) const;
  // Precomputes plain_chars_, the edges' plain_max and plain_masks_, and lays trie_ out again;
  // then head_trie_, tail_trie_ and first_byte_plain_ids_.
  void IndexPlainText();

  // Character counts with a precomputed mask of the plain tokens up to that many characters.
  static constexpr std::array<int, 8> kPlainLevels = {1, 2, 3, 4, 6, 8, 12, 16};
  static constexpr uint8_t kNotPlain = 255;

  std::vector<std::string> token_bytes_;  // [size()]
  std::vector<Kind> kind_;                // [size()]
  std::vector<TokenId> eos_ids_;
  int32_t max_token_bytes_ = 0;
  Trie trie_;                         // every allowed token
  std::vector<uint8_t> plain_chars_;  // [size()]: characters of a plain-text token, else 0
  // Per kPlainLevels entry, then one for any length: the plain tokens of at most that many
  // characters.
  std::vector<std::vector<uint32_t>> plain_masks_;
  // The tokens that are not plain text, split after their longest prefix of whole plain
  // characters: an empty prefix (by all their bytes) / a non-empty one (by the bytes after it).
  Trie head_trie_, tail_trie_;
  // [257] offsets into first_byte_plain_ids_: per plain ASCII byte b, the tokens of two bytes or
  // more that begin with b and whose other bytes are plain text.
  std::vector<uint32_t> first_byte_begin_;
  std::vector<TokenId> first_byte_plain_ids_;
};

}  // namespace loom
