// TokenVocabulary: the byte strings of a model's tokens, compiled once into a byte trie, and the
// token mask of a grammar state: bit i of word i/32 is set when token i may be sampled next.
//
//   trie node: [first_edge, first_edge + num_edges) into edges_ (sorted by byte), and the token
//              ids whose bytes end exactly here: [first_token, first_token + num_tokens) of ids_.
//
// FillMask walks the trie depth-first with GrammarMatcher::Checkpoint / Rollback, so a byte the
// grammar rejects prunes every token below it; the cost is the number of trie nodes whose prefix
// the grammar still allows (all tokens sharing a prefix share its matching work): ~0.2 us a
// node, ~50 ms for a state that allows most of a 150k vocabulary (inside a free JSON string).
//
// Partial masks make that case cheap: a walk from a truncated matcher (its deep parent frames cut
// off) splits the trie into tokens accepted whatever the cut-off context is, and nodes below
// which the result depends on it (a token leaving the string: `",` `"]` ...). Every later state
// with the same truncated signature costs only a walk of those nodes (docs/benchmarks.md).
//
// Special tokens (and empty tokens) are never allowed, except the EOS ids, which are allowed
// exactly when the matcher IsAccepting(). Immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
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
  // `extra_eos_ids` (e.g. a chat model's end-of-turn token). Unimplemented when the tokenizer's
  // decoder has no per-token stream plan.
  static StatusOr<TokenVocabulary> FromTokenizer(const Tokenizer& tokenizer,
                                                 const std::vector<TokenId>& extra_eos_ids = {});

  int32_t size() const { return static_cast<int32_t>(token_bytes_.size()); }
  // Words of the bitmask FillMask writes: ceil(size() / 32).
  size_t mask_words() const { return (token_bytes_.size() + 31) / 32; }
  const std::string& token_bytes(TokenId id) const { return token_bytes_[id]; }
  bool IsEos(TokenId id) const { return id >= 0 && id < size() && kind_[id] == kEos; }
  // Never allowed whatever the grammar says: special and empty tokens.
  bool IsNeverAllowed(TokenId id) const { return kind_[id] == kNever; }
  const std::vector<TokenId>& eos_ids() const { return eos_ids_; }

  // Writes the mask of the tokens `matcher` accepts next into bitmask[0, mask_words()). The
  // matcher is not modified (the walk runs on a Fork()).
  void FillMask(const GrammarMatcher& matcher, uint32_t* bitmask) const;

  // The part of a mask that does not depend on the frames a truncated matcher cut off
  // (GrammarMatcher::ForkTruncated): the tokens accepted whatever they are, and the trie nodes
  // below which the full state must still be walked. Reusable for every state with the same
  // truncated signature, e.g. the inside of any JSON string wherever it sits in the document.
  struct PartialMask {
    std::vector<uint32_t> accepted;   // [mask_words()]
    std::vector<uint8_t> node_flags;  // [trie nodes]: kOnPath | kDependent
  };
  PartialMask BuildPartialMask(const GrammarMatcher& truncated) const;
  // FillMask for `matcher`, whose truncation `partial` was built from: partial.accepted plus a
  // walk of `matcher` restricted to the flagged trie nodes. Same result as FillMask.
  void FillMaskWithPartial(const GrammarMatcher& matcher, const PartialMask& partial,
                           uint32_t* bitmask) const;

 private:
  enum Kind : uint8_t { kNormal, kNever, kEos };
  struct Node {
    uint32_t first_edge = 0, num_edges = 0;
    uint32_t first_token = 0, num_tokens = 0;
  };
  struct Edge {
    uint8_t byte;
    uint32_t child;
  };
  static constexpr uint8_t kOnPath = 1;     // a node on the way to kDependent nodes
  static constexpr uint8_t kDependent = 2;  // walk everything below in the full state
  void Walk(uint32_t node, GrammarMatcher* m, uint32_t* bitmask) const;
  bool PartialWalk(uint32_t node, GrammarMatcher* m, PartialMask* out) const;
  void RestrictedWalk(uint32_t node, GrammarMatcher* m, const PartialMask& partial,
                      uint32_t* bitmask) const;
  void SetTokens(uint32_t node, uint32_t* bitmask) const {
    const Node& n = nodes_[node];
    for (uint32_t t = n.first_token; t < n.first_token + n.num_tokens; ++t) {
      bitmask[ids_[t] >> 5] |= uint32_t{1} << (ids_[t] & 31);
    }
  }

  std::vector<std::string> token_bytes_;  // [size()]
  std::vector<Kind> kind_;                // [size()]
  std::vector<TokenId> eos_ids_;
  std::vector<Node> nodes_;   // nodes_[0] = root (the empty prefix)
  std::vector<Edge> edges_;   // children of each node, contiguous, sorted by byte
  std::vector<TokenId> ids_;  // tokens ending at each node, contiguous
};

}  // namespace loom
