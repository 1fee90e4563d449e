// Grammar: the IR every front end (GBNF, regex, choice, JSON Schema) lowers to and the matcher
// runs. A context-free grammar over bytes:
//
//   rule        := alternative | alternative | ...
//   alternative := element element ...        (an empty alternative matches "")
//   element     := a byte set (256 bits: one byte out of the set) | a reference to a rule
//
// Everything richer is lowered here, once, into helper rules:
//   X*        -> star  ::= X star | ""                 (right recursion: the matcher tail-calls it)
//   X{m,n}    -> X ... X (m times) opt_{n-m}, opt_k ::= X opt_{k-1} | ""
//                (m >= kMinCountChain: req_m, req_k ::= X req_{k-1}, req_1 ::= X opt_{n-m})
//   [a-zé]    -> alternatives of UTF-8 byte sequences, e.g. [a-z] | \xC3 [\xA9]
// so the matcher only ever sees bytes. Code points are encoded as UTF-8; surrogates
// (U+D800-U+DFFF) are never produced.
//
// Left recursion (A ::= A x, also through rules that can match "") is rejected by Validate():
// the pushdown matcher would loop on it. A rule that reaches itself only in tail position through
// nullable prefixes (star ::= X? star) is fine and allowed.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"

namespace loom {

// A set of byte values, 256 bits.
class ByteSet {
 public:
  static ByteSet Single(uint8_t b);
  static ByteSet Range(uint8_t lo, uint8_t hi);  // [lo, hi], inclusive
  static ByteSet All() { return Range(0, 255); }

  void Add(uint8_t b) { words_[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi);
  void AddSet(const ByteSet& other) {  // inline: the matcher's step summary runs it per stack
    for (int i = 0; i < 4; ++i) words_[i] |= other.words_[i];
  }
  bool Contains(uint8_t b) const { return (words_[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (words_[0] | words_[1] | words_[2] | words_[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
  // Bits 64*i .. 64*i+63 (hashing).
  uint64_t word(int i) const { return words_[i]; }
  // "[a-z\x80]" style, for Grammar::ToString and error messages.
  std::string ToString() const;

 private:
  std::array<uint64_t, 4> words_{};
};

struct GrammarElement {
  enum class Kind : uint8_t { kBytes, kRule };
  Kind kind = Kind::kBytes;
  ByteSet bytes;          // kBytes: the bytes this element accepts
  int32_t rule_idx = -1;  // kRule: index into Grammar::rules()

  static GrammarElement Bytes(const ByteSet& set) { return {Kind::kBytes, set, -1}; }
  static GrammarElement Rule(int32_t idx) { return {Kind::kRule, ByteSet(), idx}; }
};

using GrammarSequence = std::vector<GrammarElement>;

struct GrammarRule {
  std::string name;
  std::vector<GrammarSequence> alternatives;  // none = the rule matches nothing
  bool defined = false;  // false while a front end has only seen a reference to it
};

// An inclusive range of code points.
using CodePointRange = std::pair<char32_t, char32_t>;

// Builds and holds the rules. Front ends create rules, fill their alternatives, set the root and
// call Validate(). Not thread-safe while being built; immutable afterwards by convention.
class Grammar {
 public:
  // Adds a rule named `name`, made unique with a "-N" suffix when taken; returns its index.
  int32_t AddRule(std::string_view name);
  // Index of the rule named exactly `name`, -1 if none.
  int32_t FindRule(std::string_view name) const;
  // Appends an alternative to rule `rule_idx` and marks it defined.
  void AddAlternative(int32_t rule_idx, GrammarSequence seq);
  void MarkDefined(int32_t rule_idx) { rules_[rule_idx].defined = true; }
  // Copies every rule of `other` (its count chains too) into this grammar, named
  // `prefix` + "." + their name (no GBNF name contains a dot, so they never clash with one);
  // returns the index of the copy of other's root. `other` must have its root set.
  int32_t Embed(const Grammar& other, std::string_view prefix);

  const std::vector<GrammarRule>& rules() const { return rules_; }
  const GrammarRule& rule(int32_t idx) const { return rules_[idx]; }
  int32_t root_idx() const { return root_idx_; }
  void set_root(int32_t idx) { root_idx_ = idx; }

  // --- Lowering helpers: each returns elements to append to a sequence. ---

  // Appends one byte element per byte of `bytes` (a literal; no escapes are interpreted).
  static void AppendLiteral(std::string_view bytes, GrammarSequence* seq);
  // One code point out of `ranges` (or out of its complement within U+0000-U+10FFFF when
  // `negate`), as UTF-8. ASCII-only sets become a single byte element; others a helper rule
  // (shared between identical classes). An empty class yields a rule with no alternatives.
  GrammarElement CodePointClass(std::vector<CodePointRange> ranges, bool negate);
  // A rule with the given alternatives (a single one-element alternative is returned as is).
  GrammarElement Group(std::vector<GrammarSequence> alternatives, std::string_view name_hint);
  // `body` repeated between `min_count` and `max_count` times (max_count < 0: unbounded).
  // Precondition: 0 <= min_count, and max_count < 0 or min_count <= max_count.
  GrammarSequence Repeat(GrammarSequence body, int64_t min_count, int64_t max_count,
                         std::string_view name_hint);

  // The rule chains Repeat built, each {r_1, r_2, ...} where r_k matches k more repetitions at
  // most (opt) or exactly (req) and r_k (k >= 2) differs from r_2 only by referring to r_{k-1}:
  // CompiledGrammar lets mask walks treat long counts as short ones (compiled_grammar.h).
  static constexpr size_t kMinCountChain = 32;
  const std::vector<std::vector<int32_t>>& count_chains() const { return count_chains_; }

  // Checks that the root is set, every referenced rule is defined and no rule is left-recursive.
  // InvalidArgument naming the rule otherwise.
  Status Validate() const;
  // [rules]: 1 where the rule matches the empty string. Linear in the grammar's size.
  std::vector<uint8_t> NullableRules() const;
  // GBNF-like dump, one rule per line (for tests and debugging).
  std::string ToString() const;

 private:
  // A rule of a count chain, named base@k, not registered in by_name_.
  int32_t AddChainRule(const std::string& base, int64_t k);
  // Room for `more` rules (geometric growth: a chain of 10000 rules moves the others once).
  void ReserveRules(int64_t more);

  std::vector<GrammarRule> rules_;
  std::vector<std::vector<int32_t>> count_chains_;
  int32_t root_idx_ = -1;
  std::unordered_map<std::string, int32_t> by_name_;      // rule name -> index
  std::unordered_map<std::string, int32_t> next_suffix_;  // name hint -> next "-N" to try
  std::unordered_map<std::string, int32_t> class_rules_;  // class key -> rule (sharing)
};

// Bounds on building one grammar (a request's schema or GBNF): the front ends and
// CompiledGrammar::Compile check it as they go and refuse a grammar that would take longer or grow
// larger, naming the limit, instead of compiling it for seconds into gigabytes.
struct GrammarBudget {
  // The most rules a grammar may have: a string of maxLength 100000 is 100k rules (~30 MB
  // compiled); the largest of the 297 real-world schemas in tests/grammar-corpus has 10k.
  static constexpr size_t kDefaultMaxRules = 400000;
  size_t max_rules = kDefaultMaxRules;
  int64_t timeout_ms = 0;  // 0: no deadline
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  static GrammarBudget WithTimeout(int64_t timeout_ms) {
    GrammarBudget b;
    b.timeout_ms = timeout_ms;
    return b;
  }
  // InvalidArgument naming the limit when `rules` passes max_rules or the deadline has passed.
  Status Check(size_t rules) const;
};

// A grammar matching exactly one of `choices` (byte strings; duplicates are fine). InvalidArgument
// when `choices` is empty.
StatusOr<Grammar> CompileChoice(const std::vector<std::string>& choices);

// The UTF-8 byte-sequence alternatives of a set of code points (each sequence: 1-4 byte sets, each
// a contiguous byte range). Surrogates are excluded. Exposed for tests.
std::vector<std::vector<ByteSet>> Utf8Sequences(const std::vector<CodePointRange>& ranges);

// Sorted, merged, surrogate-free ranges; `negate` complements them within U+0000-U+10FFFF.
std::vector<CodePointRange> NormalizeRanges(std::vector<CodePointRange> ranges, bool negate);

}  // namespace loom
