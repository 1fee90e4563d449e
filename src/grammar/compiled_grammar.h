// CompiledGrammar: a validated Grammar flattened for the matcher. Every alternative is laid out in
// one element array and closed by an kEnd element, so a matcher position is one int32:
//
//   elems:  [ a  b  R7 End | c  End | End | ... ]      alt_starts[rule_alt_begin[r] ...] -> index
//             ^ alternative 0 of rule 0     ^ alt 1 (empty)
//
// For every position the matcher can continue at, Compile also precomputes its *closure*: the
// byte elements reachable without consuming input, each with the chain of continuation frames
// entering them pushes (relative to whatever parent the position has), plus whether the end of the
// enclosing alternative is reachable (the matcher then pops the parent and continues there). A
// matcher step is then a table lookup per advanced stack instead of a walk through rule
// references. Closures are composed from each rule's closure, computed once (compiled_grammar.cc),
// and share storage: a tail reference's closure is its rule's.
//
// Immutable and thread-safe after Compile; shared by every matcher (std::shared_ptr).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"

namespace loom {

class CompiledGrammar {
 public:
  enum class Kind : uint8_t { kBytes, kRule, kEnd };
  struct Element {
    Kind kind;
    int32_t arg;  // kBytes: index into byte_sets(); kRule: rule index; kEnd: unused
  };

  // Validates `grammar` (Grammar::Validate), flattens it and computes the closures, within
  // `budget` (checked before and every few thousand positions).
  static StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(const Grammar& grammar,
                                                                  const GrammarBudget& budget = {});

  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<ByteSet>& byte_sets() const { return byte_sets_; }
  // Element indices where rule `rule_idx`'s alternatives start.
  const int32_t* alt_begin(int32_t rule_idx) const {
    return alt_starts_.data() + rule_alt_begin_[rule_idx];
  }
  const int32_t* alt_end(int32_t rule_idx) const {
    return alt_starts_.data() + rule_alt_begin_[rule_idx + 1];
  }
  int32_t root_idx() const { return root_idx_; }

  // One entry of a closure: a byte element reached from the position, with the frames to push
  // (continuation positions, outermost first), or kPop: the alternative's end is reachable.
  static constexpr int32_t kPop = -1;
  struct ClosureEntry {
    int32_t pos;                       // a kBytes element index, or kPop
    uint32_t chain_begin, chain_size;  // into chain_positions()
  };
  const ClosureEntry* closure_begin(int32_t pos) const {
    return closure_entries_.data() + closure_ranges_[pos].first;
  }
  const ClosureEntry* closure_end(int32_t pos) const {
    return closure_entries_.data() + closure_ranges_[pos].second;
  }
  const int32_t* chain_positions() const { return chains_.data(); }
  // The union of the byte sets of pos's closure entries, and whether it holds kPop.
  const ByteSet& closure_first_bytes(int32_t pos) const { return closure_first_bytes_[pos]; }
  bool closure_has_pop(int32_t pos) const { return closure_has_pop_[pos]; }
  // Positions of one class have the same closure entries, so a matcher stack (or frame) behaves
  // the same at any of them: the end of every alternative is one class, a tail reference is its
  // rule's. GrammarMatcher::AppendStateSignature writes classes, not positions.
  int32_t closure_class(int32_t pos) const { return closure_class_[pos]; }
  int32_t num_rules() const { return static_cast<int32_t>(rule_alt_begin_.size()) - 1; }
  // pos's closure as sorted (byte position or kPop, chain) pairs, and the same computed by a
  // plain depth-first walk of the grammar from pos (the reference Compile is tested against).
  std::vector<std::pair<int32_t, std::vector<int32_t>>> Closure(int32_t pos) const;
  std::vector<std::pair<int32_t, std::vector<int32_t>>> ReferenceClosure(int32_t pos) const;

  // Count chains (Grammar::count_chains): a mask walk of at most `max_bytes` bytes cannot tell a
  // position in the rule of k > max_bytes + 2 repetitions left from the same place in the chain's
  // loop, a rule Compile adds per chain that repeats the body without end (every repetition
  // consumes a byte, so the walk ends before the count would); this returns that place, or pos
  // outside long chains. GrammarMatcher::ForkCanonical maps a whole state, so that masks and the
  // mask DFA see one state where a string of maxLength 10000 would have 10000, and inside it the
  // states of an unbounded string (a character leads back to the same state, so the plain-text
  // proof holds for every length).
  int32_t CanonicalPosition(int32_t pos, int32_t max_bytes) const;
  bool has_count_chains() const { return !chains_of_rules_.empty(); }

  // Bytes that every byte set holds or lacks together step every matcher state the same way:
  // their class, 0 .. num_byte_classes() - 1 (the mask DFA memoizes transitions per class).
  uint8_t byte_class(uint8_t b) const { return byte_class_[b]; }
  const std::array<uint8_t, 256>& byte_classes() const { return byte_class_; }
  int32_t num_byte_classes() const { return num_byte_classes_; }

 private:
  std::vector<Element> elements_;
  std::vector<ByteSet> byte_sets_;
  std::vector<int32_t> alt_starts_;      // [total alternatives]
  std::vector<int32_t> rule_alt_begin_;  // [num_rules + 1], offsets into alt_starts_
  int32_t root_idx_ = -1;
  // [elements]: each position's [begin, end) in closure_entries_ (ranges are shared: a tail
  // reference's is its rule's closure, every alternative end's the one pop entry).
  std::vector<std::pair<uint32_t, uint32_t>> closure_ranges_;
  std::vector<ClosureEntry> closure_entries_;
  std::vector<int32_t> chains_;
  std::vector<ByteSet> closure_first_bytes_;  // [elements]
  std::vector<bool> closure_has_pop_;         // [elements]
  // [elements]: the first position with the same closure range, or elements().size() for every
  // empty range (all of them behave alike: nothing matches).
  std::vector<int32_t> closure_class_;
  std::array<uint8_t, 256> byte_class_{};
  int32_t num_byte_classes_ = 1;
  std::vector<int32_t> element_rule_;                    // [elements]: the rule holding it
  std::vector<std::vector<int32_t>> chains_of_rules_;    // the adopted count chains
  std::vector<std::pair<int32_t, int32_t>> rule_chain_;  // [rules]: (chain, k) or (-1, 0)
  std::vector<int32_t> chain_loops_;                     // [adopted chains]: the loop rule

  // Keeps the chains whose rules 2.. share a shape and whose body consumes input, and appends
  // each one's loop rule (its nullability to *nullable: Grammar::NullableRules, then the loops').
  void AdoptCountChains(const std::vector<std::vector<int32_t>>& chains,
                        std::vector<uint8_t>* nullable);

  void ComputeByteClasses();

  // InvalidArgument when the closures pass kMaxClosureEntries (a pathologically nullable grammar).
  // `nullable`: Grammar::NullableRules.
  Status ComputeClosures(const GrammarBudget& budget, const std::vector<uint8_t>& nullable);
  // The depth-first closure walk from `pos`, or, when pos < 0, from every alternative start of
  // rule `rule_idx`: appends the entries (deduplicated; kPop last) to *out, chains to *pool.
  void WalkClosure(int32_t pos, int32_t rule_idx, std::vector<int32_t>* pool,
                   std::vector<ClosureEntry>* out) const;
  static constexpr size_t kMaxClosureEntries = size_t{1} << 24;
};

// Splits each class of the partition `classes` (byte -> class id) into the bytes in `set` and
// the rest; returns the new partition, numbered densely in byte order, and its size.
std::array<uint8_t, 256> RefineByteClasses(const std::array<uint8_t, 256>& classes,
                                           const ByteSet& set, int32_t* num_classes);

}  // namespace loom
