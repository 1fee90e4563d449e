// MaskDfa: the grammar states a token-trie walk meets, memoized as a lazily built DFA over byte
// classes, for one request's grammar.
//
// A token mask walks the vocabulary's byte trie and steps the grammar once per trie edge. The
// states it passes through repeat: inside a JSON string every plain character leads back to the
// same state, so the ~330k edges of a 150k-token trie meet a few dozen distinct states. MaskDfa
// gives each distinct state an id (keyed by GrammarMatcher::AppendStateSignature, which determines
// the state's future exactly, so merging is exact) and memoizes its transitions per byte class
// (CompiledGrammar::byte_class refined by the plain-text classes below): a known edge costs one
// table load instead of a matcher step (~3 ns against ~150 ns). Each state keeps a forked matcher
// to compute its unknown transitions from.
//
//   trans_[s * num_classes + class] = the next state's id | kReject | kUnknown
//
// Plain text: valid UTF-8 (RFC 3629: no overlongs, no surrogates) without `"`, `\` or a C0
// control: the characters a JSON string takes unescaped, ~96% of a byte-level BPE vocabulary.
// PlainCharsAccepted(s) proves, over the product of the plain-text automaton and this DFA, up to
// how many plain characters every plain-text string is accepted from s; the vocabulary then sets
// those tokens wholesale and walks only the others (token_mask.h).
//
// The memo persists across a request's masks (the next mask usually starts in a state met
// before) and is cleared when it passes max_states. Not thread-safe: one per GrammarState.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"

namespace loom {

// The plain-text automaton (see above): states between and inside UTF-8 characters.
inline constexpr int kPlainBoundary = 0;  // between characters: the accepting state
inline constexpr int kNumPlainStates = 8;
// The next plain-text state after byte `b` in `state`, or -1 when `b` cannot continue plain text.
int PlainTextNext(int state, uint8_t b);

class MaskDfa {
 public:
  static constexpr int32_t kReject = -1;
  static constexpr int kMaxPlainChars = 16;  // PlainCharsAccepted proves at most this many...
  static constexpr int kUnbounded = 255;     // ...or all plain text

  explicit MaskDfa(std::shared_ptr<const CompiledGrammar> grammar, size_t max_states = 4096);

  // Mask walks through this DFA are at most `max_bytes` long (the vocabulary's longest token).
  // Under count chains every state a transition reaches is then kept canonical for that bound
  // (GrammarMatcher::ForkCanonical: a long count's loop), so that a long count met inside a walk
  // costs no more states than one met at its start. Clears the memo when the bound changes.
  void SetMaxWalkBytes(int32_t max_bytes);
  // The id of `matcher`'s current state; `signature` is its AppendStateSignature. Clears the memo
  // first when it holds max_states or more (ids handed out before are then invalid).
  int32_t Enter(const GrammarMatcher& matcher, const std::vector<int32_t>& signature);
  // The state after byte `b` from state `s`, or kReject.
  int32_t Next(int32_t s, uint8_t b) {
    const size_t i = static_cast<size_t>(s) * num_classes_ + class_[b];
    const int32_t t = trans_[i];
    return t != kUnknown ? t : Compute(s, b, i);
  }
  // The largest k <= kMaxPlainChars such that every plain-text string of at most k characters is
  // accepted from `s`, or kUnbounded when every plain-text string is. Memoized per state.
  int PlainCharsAccepted(int32_t s);
  // When PlainCharsAccepted(s) is kUnbounded and every plain-text string of one character or more
  // leads from `s` to one and the same state (inside a JSON string: the state after a character),
  // that state; else kReject. Memoized with PlainCharsAccepted.
  int32_t PlainSuccessor(int32_t s) {
    PlainCharsAccepted(s);
    return plain_successor_[s];
  }

  size_t num_states() const { return matchers_.size(); }
  int32_t num_classes() const { return num_classes_; }

 private:
  static constexpr int32_t kUnknown = -2;
  int32_t Compute(int32_t s, uint8_t b, size_t index);
  // The id of the state with `signature`, or -1.
  int32_t Find(const std::vector<int32_t>& signature, uint64_t hash) const;
  int32_t Add(const std::vector<int32_t>& signature, uint64_t hash, GrammarMatcher matcher);
  void Clear();
  // Steps one plain character's remaining bytes from `s` in plain state `d`; appends the states
  // after the character to `out`. False when some plain continuation is rejected.
  bool ExpandChar(int32_t s, int d, std::vector<int32_t>* out);

  std::shared_ptr<const CompiledGrammar> grammar_;
  size_t max_states_;
  int32_t max_walk_bytes_ = -1;       // SetMaxWalkBytes; -1: states are kept exact
  std::array<uint8_t, 256> class_{};  // byte -> class
  int32_t num_classes_ = 0;
  // Per plain state: (a representative byte, the next plain state) for each class that continues.
  std::array<std::vector<std::pair<uint8_t, int>>, kNumPlainStates> plain_moves_;

  std::vector<int32_t> trans_;            // [states * num_classes_]
  std::vector<GrammarMatcher> matchers_;  // [states]: a matcher in that state
  std::vector<int16_t> plain_chars_;      // [states]: PlainCharsAccepted, -1 = not yet
  std::vector<int32_t> plain_successor_;  // [states]: PlainSuccessor, once plain_chars_ is known
  std::vector<int32_t> sig_pool_;         // the states' signatures, concatenated
  std::vector<uint32_t> sig_begin_;       // [states + 1] into sig_pool_
  std::unordered_multimap<uint64_t, int32_t> by_hash_;
  std::vector<int32_t> scratch_;  // a signature being looked up
};

}  // namespace loom
