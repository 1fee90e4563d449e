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
// references.
//
// Immutable and thread-safe after Compile; shared by every matcher (std::shared_ptr).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
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

  // Validates `grammar` (Grammar::Validate), flattens it and computes the closures.
  static StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(const Grammar& grammar);

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
    return closure_entries_.data() + closure_offsets_[pos];
  }
  const ClosureEntry* closure_end(int32_t pos) const {
    return closure_entries_.data() + closure_offsets_[pos + 1];
  }
  const int32_t* chain_positions() const { return chains_.data(); }
  // The union of the byte sets of pos's closure entries, and whether it holds kPop.
  const ByteSet& closure_first_bytes(int32_t pos) const { return closure_first_bytes_[pos]; }
  bool closure_has_pop(int32_t pos) const { return closure_has_pop_[pos]; }
  int32_t num_rules() const { return static_cast<int32_t>(rule_alt_begin_.size()) - 1; }

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
  std::vector<uint32_t> closure_offsets_;  // [elements + 1] into closure_entries_
  std::vector<ClosureEntry> closure_entries_;
  std::vector<int32_t> chains_;
  std::vector<ByteSet> closure_first_bytes_;  // [elements]
  std::vector<bool> closure_has_pop_;         // [elements]
  std::array<uint8_t, 256> byte_class_{};
  int32_t num_byte_classes_ = 1;

  void ComputeByteClasses();

  // InvalidArgument when the closures pass kMaxClosureEntries (a pathologically nullable grammar).
  Status ComputeClosures();
  static constexpr size_t kMaxClosureEntries = size_t{1} << 24;
};

// Splits each class of the partition `classes` (byte -> class id) into the bytes in `set` and
// the rest; returns the new partition, numbered densely in byte order, and its size.
std::array<uint8_t, 256> RefineByteClasses(const std::array<uint8_t, 256>& classes,
                                           const ByteSet& set, int32_t* num_classes);

}  // namespace loom
