// GrammarMatcher: runs a CompiledGrammar over bytes, one at a time, with cheap checkpoints.
//
// Representation: a set of pushdown stacks, in the spirit of llama.cpp's grammar engine. A stack
// is a position in some alternative plus a link to its parent frame (the position to return to
// when that alternative ends). Frames are persistent nodes in an append-only arena, so stacks
// share their common part and a step never copies one. Stacks are kept *unexpanded*: the position
// right after the last byte matched, whatever element is there. Matching a byte looks the position
// up in its precomputed closure (compiled_grammar.h: the byte elements reachable from it and the
// frames entering them pushes) and only materializes the entries whose byte set holds the byte;
// the end of an alternative continues in the parent frame. So the state inside a JSON string is
// one stack, not one per UTF-8 lead-byte class, and a byte costs a few bit tests.
//
// Chosen over Earley because the grammars we run (JSON Schema, regex, GBNF for JSON-like output)
// are nearly deterministic: the set holds a handful of stacks, and a checkpoint is one integer (a
// step index into the history of stack sets; the frame arena is truncated with it), which is what
// a token-trie walk needs. Tail calls (a reference as the last element of an alternative) push no
// frame, so right-recursive repetition (`star ::= x star | ""`) runs in constant depth.
//
//   history:  step 0 (initial stacks) | step 1 | step 2 ...    Rollback(k) truncates to step k
//   stack:    {pos -> elements()[pos], parent -> nodes_[parent] or -1 (the bottom)}
//
// A rejected byte leaves the state unchanged. Not thread-safe; one matcher per request. Copyable.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"

namespace loom {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances by `b` and returns true, or returns false and changes nothing when the grammar does
  // not allow `b` here.
  bool AcceptByte(uint8_t b);
  // All of `bytes` or nothing: on a reject the state is as before the call.
  bool AcceptBytes(std::string_view bytes);

  // The input so far is a complete document of the grammar.
  bool IsAccepting() const { return steps_.back().accepting; }
  // No byte can follow and the input is not complete (only an empty-language grammar gets here,
  // since a rejected byte is not applied).
  bool IsDead() const { return !IsAccepting() && !CanAcceptMoreBytes(); }
  // Some byte can follow (false: the document is finished, only end-of-sequence is left).
  bool CanAcceptMoreBytes() const { return !steps_.back().next_bytes.empty(); }
  // The union of the bytes that can follow now.
  const ByteSet& NextBytes() const { return steps_.back().next_bytes; }

  // A handle on the current state; Rollback(handle) returns to it. Handles taken later than the
  // one rolled back to become invalid.
  size_t Checkpoint() const { return steps_.size(); }
  // Precondition: 1 <= checkpoint <= Checkpoint().
  void Rollback(size_t checkpoint);
  // Back to the start of the grammar (drops all history).
  void Reset();
  // A matcher in the current state without the history (its arena holds only the frames the
  // current stacks reach): what a token-mask walk starts from. Cost: O(stacks x depth).
  GrammarMatcher Fork() const;
  // Fork with every position replaced by CompiledGrammar::CanonicalPosition(pos, max_bytes):
  // a state that accepts the same byte strings of at most max_bytes bytes (and is accepting
  // exactly when this one is), which is all a token mask asks when no token is longer.
  GrammarMatcher ForkCanonical(int32_t max_bytes) const;

  // Appends a description of the current state that determines its future: per stack, the
  // closure class (CompiledGrammar::closure_class) of its position and of its parents' positions
  // (top first), then -1. Equal signatures accept the same continuations, so a token mask can be
  // cached by it; states that differ only by equivalent positions (the ends of the alternatives
  // of a character class) get one signature.
  void AppendStateSignature(std::vector<int32_t>* out) const;

  // Number of stacks in the current set (diagnostics, tests).
  size_t num_stacks() const { return steps_.back().stacks_end - steps_.back().stacks_begin; }
  const std::shared_ptr<const CompiledGrammar>& grammar() const { return grammar_; }

 private:
  struct ForkTag {};
  // Fork and ForkCanonical (max_bytes < 0: positions kept).
  GrammarMatcher ForkMapped(int32_t max_bytes) const;
  // An empty matcher (no steps) for Fork to fill.
  GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, ForkTag)
      : grammar_(std::move(grammar)) {}

  struct Frame {
    int32_t pos;     // an element index: where matching continues
    int32_t parent;  // index into nodes_, -1 = bottom
    bool operator==(const Frame&) const = default;
  };
  struct Step {
    uint32_t stacks_begin;  // this step's stacks are stacks_[stacks_begin, stacks_end)
    uint32_t stacks_end;
    uint32_t nodes_end;  // nodes_.size() after this step
    ByteSet next_bytes;  // the bytes some stack can match next
    bool accepting;      // some stack can reach the end of the root rule
  };

  // Matches `b` from stack (pos, parent): appends the advanced stacks of every closure entry whose
  // byte set holds `b`, continuing into the parent frame where the alternative can end.
  void Advance(int32_t pos, int32_t parent, uint8_t b);
  // Adds to `step` the bytes and acceptance reachable from stack (pos, parent).
  void Summarize(int32_t pos, int32_t parent, Step* step);
  int32_t PushFrame(int32_t pos, int32_t parent);
  // The frame chains from nodes `a` and `b` (or -1, the bottom) behave alike: their positions are
  // of the same closure classes, level by level.
  bool SameFrames(int32_t a, int32_t b) const;
  void AddStack(Frame f);
  // Starts building a step: clears the per-step scratch.
  void BeginStep();
  // Closes the step being built (stacks_[step_begin_, end)) and appends it to the history.
  void EndStep();

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::vector<Frame> nodes_;   // parent frames: {pos to resume at, its parent}
  std::vector<Frame> stacks_;  // the stack sets of every step, concatenated
  std::vector<Step> steps_;    // never empty; back() is the current state
  // Scratch for one step.
  uint32_t step_begin_ = 0;  // where the step being built starts in stacks_
  uint32_t step_nodes_begin_ = 0;
  std::vector<Frame> visited_;  // parent frames popped into during this step
};

}  // namespace loom
