#include "grammar/compiled_grammar.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "grammar/scc.h"

namespace loom {

StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Compile(
    const Grammar& grammar, const GrammarBudget& budget) {
  RETURN_IF_ERROR(budget.Check(grammar.rules().size()));
  RETURN_IF_ERROR(grammar.Validate());
  auto out = std::make_shared<CompiledGrammar>();
  for (size_t r = 0; r < grammar.rules().size(); ++r) {
    const GrammarRule& rule = grammar.rules()[r];
    out->rule_alt_begin_.push_back(static_cast<int32_t>(out->alt_starts_.size()));
    for (const GrammarSequence& alt : rule.alternatives) {
      out->alt_starts_.push_back(static_cast<int32_t>(out->elements_.size()));
      out->element_rule_.resize(out->element_rule_.size() + alt.size() + 1,
                                static_cast<int32_t>(r));
      for (const GrammarElement& e : alt) {
        if (e.kind == GrammarElement::Kind::kRule) {
          out->elements_.push_back({Kind::kRule, e.rule_idx});
        } else {
          out->elements_.push_back({Kind::kBytes, static_cast<int32_t>(out->byte_sets_.size())});
          out->byte_sets_.push_back(e.bytes);
        }
      }
      out->elements_.push_back({Kind::kEnd, 0});
    }
  }
  out->rule_alt_begin_.push_back(static_cast<int32_t>(out->alt_starts_.size()));
  out->root_idx_ = grammar.root_idx();
  std::vector<uint8_t> nullable = grammar.NullableRules();
  out->AdoptCountChains(grammar.count_chains(), &nullable);
  RETURN_IF_ERROR(out->ComputeClosures(budget, nullable));
  out->ComputeByteClasses();
  return std::shared_ptr<const CompiledGrammar>(std::move(out));
}

void CompiledGrammar::AdoptCountChains(const std::vector<std::vector<int32_t>>& chains,
                                       std::vector<uint8_t>* nullable) {
  rule_chain_.assign(num_rules(), {-1, 0});
  for (const std::vector<int32_t>& chain : chains) {
    // Rules 2.. must share one shape whose first element is a body that consumes input (the
    // argument in CanonicalPosition counts one byte at least per repetition).
    if (chain.size() < 3) continue;
    const int32_t shape = chain[1];
    const int32_t num_alts = static_cast<int32_t>(alt_end(shape) - alt_begin(shape));
    const Element body = elements_[alt_begin(shape)[0]];
    if (body.kind == Kind::kEnd || (body.kind == Kind::kRule && (*nullable)[body.arg])) continue;
    bool same = true;
    for (size_t k = 1; k < chain.size() && same; ++k) {
      const int32_t r = chain[k];
      same = alt_end(r) - alt_begin(r) == num_alts;
      for (int32_t a = 0; a < num_alts && same; ++a) {
        const int32_t s0 = alt_begin(shape)[a], s1 = alt_begin(r)[a];
        for (int32_t i = 0; same; ++i) {
          same = elements_[s0 + i].kind == elements_[s1 + i].kind;
          if (elements_[s0 + i].kind == Kind::kEnd) break;
        }
      }
    }
    if (!same) continue;
    const auto id = static_cast<int32_t>(chains_of_rules_.size());
    chains_of_rules_.push_back(chain);
    for (size_t k = 1; k < chain.size(); ++k)
      rule_chain_[chain[k]] = {id, static_cast<int32_t>(k + 1)};
    // The chain's loop: the shape with its reference to the link before (chain[0]) turned into
    // one to itself, appended as a rule of its own.
    const auto loop = static_cast<int32_t>(num_rules());
    const std::vector<int32_t> starts(alt_begin(shape), alt_end(shape));
    for (int32_t start : starts) {
      alt_starts_.push_back(static_cast<int32_t>(elements_.size()));
      for (int32_t q = start;; ++q) {
        Element e = elements_[q];
        if (e.kind == Kind::kRule && e.arg == chain[0]) e.arg = loop;
        elements_.push_back(e);
        element_rule_.push_back(loop);
        if (e.kind == Kind::kEnd) break;
      }
    }
    rule_alt_begin_.push_back(static_cast<int32_t>(alt_starts_.size()));
    rule_chain_.push_back({-1, 0});
    nullable->push_back((*nullable)[shape]);
    chain_loops_.push_back(loop);
  }
}

int32_t CompiledGrammar::CanonicalPosition(int32_t pos, int32_t max_bytes) const {
  if (chains_of_rules_.empty()) return pos;
  const int32_t r = element_rule_[pos];
  const auto [chain, k] = rule_chain_[r];
  const int32_t target = max_bytes + 2;
  if (chain < 0 || k <= target) return pos;
  const int32_t t = chain_loops_[chain];
  // The alternative holding pos: the last one starting at or before it (they are laid out in
  // order); the same alternative of the loop holds the canonical position at the same offset.
  int32_t a = 0;
  while (alt_begin(r) + a + 1 != alt_end(r) && alt_begin(r)[a + 1] <= pos) ++a;
  return alt_begin(t)[a] + (pos - alt_begin(r)[a]);
}

std::array<uint8_t, 256> RefineByteClasses(const std::array<uint8_t, 256>& classes,
                                           const ByteSet& set, int32_t* num_classes) {
  std::array<int16_t, 512> renumber;
  renumber.fill(-1);
  std::array<uint8_t, 256> out{};
  int32_t n = 0;
  for (int b = 0; b < 256; ++b) {
    int16_t& id = renumber[classes[b] * 2 + set.Contains(static_cast<uint8_t>(b))];
    if (id < 0) id = static_cast<int16_t>(n++);
    out[b] = static_cast<uint8_t>(id);
  }
  *num_classes = n;
  return out;
}

void CompiledGrammar::ComputeByteClasses() {
  struct SetHash {
    size_t operator()(const ByteSet& s) const {
      size_t h = 0;
      for (int i = 0; i < 4; ++i) h = (h ^ s.word(i)) * 0x9E3779B97F4A7C15ull;
      return h;
    }
  };
  std::unordered_set<ByteSet, SetHash> distinct(byte_sets_.begin(), byte_sets_.end());
  byte_class_.fill(0);
  num_byte_classes_ = 1;
  for (const ByteSet& s : distinct) {
    if (num_byte_classes_ == 256) break;
    byte_class_ = RefineByteClasses(byte_class_, s, &num_byte_classes_);
  }
}

namespace {

// The entries of one closure being built, deduplicated by (pos, chain contents): by a linear scan
// while small (most closures hold a handful of entries), by hash once larger.
class ClosureBuilder {
 public:
  using Entry = CompiledGrammar::ClosureEntry;
  explicit ClosureBuilder(const std::vector<int32_t>* chains) : chains_(chains) {}
  void Clear() {
    entries_.clear();
    if (!seen_.empty()) seen_ = {};
  }
  // Adds `e` unless an equal entry is there already.
  void Add(const Entry& e) {
    if (entries_.size() < kLinear) {
      for (const Entry& x : entries_) {
        if (Equal(x, e)) return;
      }
    } else {
      if (seen_.empty()) {
        for (uint32_t i = 0; i < entries_.size(); ++i) seen_.emplace(Hash(entries_[i]), i);
      }
      const uint64_t h = Hash(e);
      auto [lo, hi] = seen_.equal_range(h);
      for (auto it = lo; it != hi; ++it) {
        if (Equal(entries_[it->second], e)) return;
      }
      seen_.emplace(h, static_cast<uint32_t>(entries_.size()));
    }
    entries_.push_back(e);
  }
  // Adds `e`, known to differ from every entry added so far.
  void AddNew(const Entry& e) {
    if (!seen_.empty()) seen_.emplace(Hash(e), static_cast<uint32_t>(entries_.size()));
    entries_.push_back(e);
  }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  static constexpr size_t kLinear = 32;
  uint64_t Hash(const Entry& e) const {
    uint64_t h = static_cast<uint32_t>(e.pos) * 0x9E3779B97F4A7C15ull;
    for (uint32_t i = 0; i < e.chain_size; ++i) {
      h = (h ^ static_cast<uint32_t>((*chains_)[e.chain_begin + i])) * 0x100000001B3ull;
    }
    return h;
  }
  bool Equal(const Entry& a, const Entry& b) const {
    if (a.pos != b.pos || a.chain_size != b.chain_size) return false;
    return std::equal(chains_->begin() + a.chain_begin,
                      chains_->begin() + a.chain_begin + a.chain_size,
                      chains_->begin() + b.chain_begin);
  }
  const std::vector<int32_t>* chains_;
  std::vector<Entry> entries_;
  std::unordered_multimap<uint64_t, uint32_t> seen_;  // filled once entries_ passes kLinear
};

}  // namespace

// The closure of a position is composed from the closures of the rules it enters, so each rule's
// closure is computed once, not once per reference (a string of maxLength 10000 is 10000 rules,
// each referenced once, and 10000 nested walks were the whole compile time):
//
//   bytes element p:        {p}
//   end of alternative:     {pop}
//   tail reference to R:    C(R)
//   other reference to R:   C(R) with p+1 pushed first, plus closure(p+1) when C(R) holds pop
//
// where C(R), the closure of entering R, is the union of the closures of R's alternative starts.
// C(R) depends on the rules at the left edges of R's alternatives (a reference, then the next
// element while the rules before it are nullable); Validate() has excluded cycles among them that
// push a frame, so those rules are done in dependency order (Tarjan's components come out
// dependencies first) and a cycle through tail references only (star ::= x? star) is walked
// directly (ReferenceClosure's depth-first walk).
Status CompiledGrammar::ComputeClosures(const GrammarBudget& budget,
                                        const std::vector<uint8_t>& nullable) {
  const int32_t n = static_cast<int32_t>(elements_.size());
  const int32_t num_rules = this->num_rules();
  // C(r) and every position's closure are ranges of closure_entries_; a tail reference's closure
  // is its rule's range and every alternative end shares one pop entry.
  using Range = std::pair<uint32_t, uint32_t>;
  std::vector<Range> rule_range(num_rules);
  // Per rule, the summary of C(r) (its entries' byte sets, whether it holds the pop), composed
  // like the entries; phase 2 composes the positions' summaries from them.
  std::vector<ByteSet> rule_first(num_rules);
  std::vector<uint8_t> rule_pops(num_rules, 0);
  closure_ranges_.assign(n, Range{0, 0});
  closure_entries_.clear();
  // Room for a few entries a position up front: growing copies what is there, and a long count
  // makes megabytes (reserved pages that stay untouched cost no memory).
  closure_entries_.reserve(std::min<size_t>(4 * static_cast<size_t>(n), kMaxClosureEntries));
  chains_.reserve(std::min<size_t>(4 * static_cast<size_t>(n), kMaxClosureEntries));
  closure_entries_.push_back({kPop, 0, 0});
  const Range pop_range{0, 1};
  ClosureBuilder builder(&chains_);
  auto too_big = [&] {
    return InvalidArgumentError(
        "grammar: too many ways to match the empty string (closures past 16M entries); "
        "simplify nested optional repetitions");
  };
  auto commit = [&]() -> StatusOr<Range> {
    const auto begin = static_cast<uint32_t>(closure_entries_.size());
    closure_entries_.insert(closure_entries_.end(), builder.entries().begin(),
                            builder.entries().end());
    if (closure_entries_.size() > kMaxClosureEntries) return too_big();
    return Range{begin, static_cast<uint32_t>(closure_entries_.size())};
  };
  // Adds the closure of reference position p, but for closure(p+1) when the rule can end: the
  // caller's `then(p + 1)` adds that. `fresh`: the builder is empty, so C(r)'s entries (distinct)
  // and their prefixed copies (distinct too) need no check.
  auto add_reference = [&](int32_t p, bool fresh) {
    const int32_t r = elements_[p].arg;
    const bool tail = elements_[p + 1].kind == Kind::kEnd;
    uint32_t single = UINT32_MAX;  // the one-frame chain {p + 1} in chains_, once pushed
    for (uint32_t k = rule_range[r].first; k < rule_range[r].second; ++k) {
      const ClosureEntry e = closure_entries_[k];
      if (tail) {
        fresh ? builder.AddNew(e) : builder.Add(e);
        continue;
      }
      if (e.pos == kPop) continue;
      uint32_t begin = single;
      if (e.chain_size > 0 || single == UINT32_MAX) {
        begin = static_cast<uint32_t>(chains_.size());
        chains_.push_back(p + 1);
        for (uint32_t i = 0; i < e.chain_size; ++i) chains_.push_back(chains_[e.chain_begin + i]);
        if (e.chain_size == 0) single = begin;
      }
      const ClosureEntry prefixed{e.pos, begin, e.chain_size + 1};
      fresh ? builder.AddNew(prefixed) : builder.Add(prefixed);
    }
  };

  // Phase 1: C(R) for every rule, dependencies first.
  CHECK_EQ(nullable.size(), static_cast<size_t>(num_rules));
  // The rules at R's left edges: left[left_begin[R], left_begin[R + 1]).
  std::vector<int32_t> left;
  std::vector<uint32_t> left_begin(num_rules + 1, 0);
  for (int32_t r = 0; r < num_rules; ++r) {
    for (const int32_t* a = alt_begin(r); a != alt_end(r); ++a) {
      for (int32_t q = *a; elements_[q].kind == Kind::kRule; ++q) {
        left.push_back(elements_[q].arg);
        if (!nullable[elements_[q].arg]) break;
      }
    }
    left_begin[r + 1] = static_cast<uint32_t>(left.size());
  }
  // A rule `r ::= R x... | "" | ...` (R not nullable, not last; every other alternative empty:
  // an optional, a link of a count chain) has C(r) = closure(R's position) + {pop}, committed in
  // that order, so phase 2 gives that position the front of C(r) instead of a copy:
  // shared_start[r] = the position.
  std::vector<int32_t> shared_start(num_rules, -1);
  auto shares_start = [&](int32_t r) {
    if (alt_end(r) - alt_begin(r) < 2) return false;
    const int32_t a0 = alt_begin(r)[0];
    if (elements_[a0].kind != Kind::kRule || elements_[a0 + 1].kind == Kind::kEnd ||
        nullable[elements_[a0].arg]) {
      return false;
    }
    for (const int32_t* a = alt_begin(r) + 1; a != alt_end(r); ++a) {
      if (elements_[*a].kind != Kind::kEnd) return false;
    }
    return true;
  };
  // Computes C(r) for the rules of the strongly connected component `comp` just closed.
  auto close_component = [&](const std::vector<int32_t>& comp) -> Status {
    bool cyclic = comp.size() > 1;
    for (uint32_t k = left_begin[comp[0]]; k < left_begin[comp[0] + 1]; ++k) {
      cyclic = cyclic || left[k] == comp[0];
    }
    for (int32_t r : comp) {
      if ((r & 4095) == 0) RETURN_IF_ERROR(budget.Check(0));
      builder.Clear();
      ByteSet& first = rule_first[r];
      if (cyclic) {
        std::vector<ClosureEntry> entries;
        WalkClosure(-1, r, &chains_, &entries);
        for (const ClosureEntry& e : entries) {
          builder.Add(e);
          if (e.pos == kPop) {
            rule_pops[r] = 1;
          } else {
            first.AddSet(byte_sets_[elements_[e.pos].arg]);
          }
        }
      } else {
        for (const int32_t* a = alt_begin(r); a != alt_end(r); ++a) {
          // closure(q) along the alternative's nullable prefix, composed as above; the rules
          // referenced there are dependencies, so their C is done.
          for (int32_t q = *a;; ++q) {
            const Element& e = elements_[q];
            if (e.kind == Kind::kBytes) {
              builder.Add({q, 0, 0});
              first.AddSet(byte_sets_[e.arg]);
              break;
            }
            if (e.kind == Kind::kEnd) {
              builder.Add({kPop, 0, 0});
              rule_pops[r] = 1;
              break;
            }
            add_reference(q, builder.entries().empty());
            first.AddSet(rule_first[e.arg]);
            if (elements_[q + 1].kind == Kind::kEnd) {
              rule_pops[r] = rule_pops[r] | rule_pops[e.arg];
              break;
            }
            if (!nullable[e.arg]) break;
          }
        }
        if (shares_start(r)) shared_start[r] = alt_begin(r)[0];
      }
      ASSIGN_OR_RETURN(rule_range[r], commit());
    }
    return OkStatus();
  };
  // Components of `left` close after every component they reach.
  RETURN_IF_ERROR(ForEachStronglyConnectedComponent(
      num_rules, left_begin, [&](uint32_t k) { return left[k]; }, close_component));

  // Phase 2: every position's closure, last to first (closure(p) may need closure(p+1)), and its
  // summary (closure_first_bytes_, closure_has_pop_) composed the same way.
  closure_first_bytes_.assign(n, ByteSet());
  closure_has_pop_.assign(n, false);
  for (int32_t p = n - 1; p >= 0; --p) {
    if ((p & 4095) == 0) RETURN_IF_ERROR(budget.Check(0));
    const Element& e = elements_[p];
    if (e.kind == Kind::kEnd) {
      closure_ranges_[p] = pop_range;
      closure_has_pop_[p] = true;
      continue;
    }
    if (e.kind == Kind::kBytes) {
      closure_first_bytes_[p] = byte_sets_[e.arg];
    } else {
      const bool tail = elements_[p + 1].kind == Kind::kEnd;
      ByteSet first = rule_first[e.arg];
      if (!tail && rule_pops[e.arg]) first.AddSet(closure_first_bytes_[p + 1]);
      closure_first_bytes_[p] = first;
      closure_has_pop_[p] = rule_pops[e.arg] && (tail || closure_has_pop_[p + 1]);
    }
    if (e.kind == Kind::kRule && elements_[p + 1].kind == Kind::kEnd) {
      closure_ranges_[p] = rule_range[e.arg];
      continue;
    }
    if (shared_start[element_rule_[p]] == p) {
      const Range whole = rule_range[element_rule_[p]];  // closure(p), then the pop
      CHECK(closure_entries_[whole.second - 1].pos == kPop);
      closure_ranges_[p] = {whole.first, whole.second - 1};
      continue;
    }
    builder.Clear();
    if (e.kind == Kind::kBytes) {
      builder.AddNew({p, 0, 0});
    } else {
      add_reference(p, true);
      if (rule_pops[e.arg]) {
        // closure(p+1)'s entries can only equal a prefixed one when their chain starts with p+1.
        const Range next = closure_ranges_[p + 1];
        for (uint32_t k = next.first; k < next.second; ++k) {
          const ClosureEntry c = closure_entries_[k];
          const bool may_clash = c.chain_size > 0 && chains_[c.chain_begin] == p + 1;
          may_clash ? builder.Add(c) : builder.AddNew(c);
        }
      }
    }
    ASSIGN_OR_RETURN(closure_ranges_[p], commit());
  }
  // A position's class is the first position met with its range (done[begin]: the last position
  // met whose range starts there; a range and its front, shared_start's, start alike), or n for
  // every empty range.
  closure_class_.resize(n);
  std::vector<int32_t> done(closure_entries_.size(), -1);
  for (int32_t p = 0; p < n; ++p) {
    const Range r = closure_ranges_[p];
    if (r.first == r.second) {
      closure_class_[p] = n;
      continue;
    }
    int32_t& q = done[r.first];
    if (q < 0 || closure_ranges_[q] != r) {
      q = p;
      closure_class_[p] = p;
    } else {
      closure_class_[p] = closure_class_[q];
    }
  }
  return OkStatus();
}

void CompiledGrammar::WalkClosure(int32_t pos, int32_t rule_idx, std::vector<int32_t>* pool,
                                  std::vector<ClosureEntry>* out) const {
  std::vector<int32_t> chain;
  std::set<std::pair<int32_t, std::vector<int32_t>>> visited;  // (alternative start, chain)
  std::set<std::pair<int32_t, std::vector<int32_t>>> emitted;  // (byte position, chain)
  bool pop = false;
  auto walk = [&](auto& self, int32_t p) -> void {
    const Element& e = elements_[p];
    if (e.kind == Kind::kBytes) {
      if (emitted.insert({p, chain}).second) {
        out->push_back(
            {p, static_cast<uint32_t>(pool->size()), static_cast<uint32_t>(chain.size())});
        pool->insert(pool->end(), chain.begin(), chain.end());
      }
      return;
    }
    if (e.kind == Kind::kEnd) {
      if (chain.empty()) {
        pop = true;
        return;
      }
      const int32_t next = chain.back();
      chain.pop_back();
      self(self, next);
      chain.push_back(next);
      return;
    }
    // A tail reference pushes nothing; the visited set ends tail cycles through nullable rules
    // (Validate() has excluded cycles that push).
    const bool tail = elements_[p + 1].kind == Kind::kEnd;
    if (!tail) chain.push_back(p + 1);
    for (const int32_t* a = alt_begin(e.arg); a != alt_end(e.arg); ++a) {
      if (visited.insert({*a, chain}).second) self(self, *a);
    }
    if (!tail) chain.pop_back();
  };
  if (pos >= 0) {
    walk(walk, pos);
  } else {
    for (const int32_t* a = alt_begin(rule_idx); a != alt_end(rule_idx); ++a) {
      if (visited.insert({*a, chain}).second) walk(walk, *a);
    }
  }
  if (pop) out->push_back({kPop, 0, 0});
}

std::vector<std::pair<int32_t, std::vector<int32_t>>> CompiledGrammar::ReferenceClosure(
    int32_t pos) const {
  std::vector<int32_t> pool;
  std::vector<ClosureEntry> entries;
  WalkClosure(pos, -1, &pool, &entries);
  std::vector<std::pair<int32_t, std::vector<int32_t>>> out;
  for (const ClosureEntry& e : entries) {
    out.push_back({e.pos, std::vector<int32_t>(pool.begin() + e.chain_begin,
                                               pool.begin() + e.chain_begin + e.chain_size)});
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<int32_t, std::vector<int32_t>>> CompiledGrammar::Closure(int32_t pos) const {
  std::vector<std::pair<int32_t, std::vector<int32_t>>> out;
  for (const ClosureEntry* e = closure_begin(pos); e != closure_end(pos); ++e) {
    out.push_back({e->pos, std::vector<int32_t>(chains_.begin() + e->chain_begin,
                                                chains_.begin() + e->chain_begin + e->chain_size)});
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace loom
