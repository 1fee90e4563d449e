#include "grammar/compiled_grammar.h"

#include <set>
#include <unordered_set>
#include <utility>

namespace loom {

StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Compile(const Grammar& grammar) {
  RETURN_IF_ERROR(grammar.Validate());
  auto out = std::make_shared<CompiledGrammar>();
  for (const GrammarRule& rule : grammar.rules()) {
    out->rule_alt_begin_.push_back(static_cast<int32_t>(out->alt_starts_.size()));
    for (const GrammarSequence& alt : rule.alternatives) {
      out->alt_starts_.push_back(static_cast<int32_t>(out->elements_.size()));
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
  RETURN_IF_ERROR(out->ComputeClosures());
  out->ComputeByteClasses();
  return std::shared_ptr<const CompiledGrammar>(std::move(out));
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

Status CompiledGrammar::ComputeClosures() {
  const int32_t n = static_cast<int32_t>(elements_.size());
  std::vector<int32_t> chain;
  std::set<std::pair<int32_t, std::vector<int32_t>>> visited;  // (alternative start, chain)
  std::set<std::pair<int32_t, std::vector<int32_t>>> emitted;  // (byte position, chain)
  bool pop = false;
  // Depth-first over the positions reachable from `pos` with `chain` pushed so far.
  auto walk = [&](auto& self, int32_t pos) -> void {
    for (;;) {
      const Element& e = elements_[pos];
      if (e.kind == Kind::kBytes) {
        if (emitted.insert({pos, chain}).second) {
          closure_entries_.push_back(
              {pos, static_cast<uint32_t>(chains_.size()), static_cast<uint32_t>(chain.size())});
          chains_.insert(chains_.end(), chain.begin(), chain.end());
        }
        return;
      }
      if (e.kind == Kind::kEnd) {
        if (chain.empty()) {
          pop = true;
          return;
        }
        pos = chain.back();
        chain.pop_back();
        self(self, pos);
        chain.push_back(pos);
        return;
      }
      // A tail reference pushes nothing; the visited set ends tail cycles through nullable rules
      // (Validate() has excluded cycles that push).
      const bool tail = elements_[pos + 1].kind == Kind::kEnd;
      if (!tail) chain.push_back(pos + 1);
      for (const int32_t* a = alt_begin(e.arg); a != alt_end(e.arg); ++a) {
        if (visited.insert({*a, chain}).second) self(self, *a);
      }
      if (!tail) chain.pop_back();
      return;
    }
  };
  closure_offsets_.reserve(n + 1);
  for (int32_t p = 0; p < n; ++p) {
    closure_offsets_.push_back(static_cast<uint32_t>(closure_entries_.size()));
    chain.clear();
    visited.clear();
    emitted.clear();
    pop = false;
    walk(walk, p);
    ByteSet first;
    for (uint32_t i = closure_offsets_.back(); i < closure_entries_.size(); ++i) {
      first.AddSet(byte_sets_[elements_[closure_entries_[i].pos].arg]);
    }
    closure_first_bytes_.push_back(first);
    closure_has_pop_.push_back(pop);
    if (pop) closure_entries_.push_back({kPop, 0, 0});
    if (closure_entries_.size() > kMaxClosureEntries) {
      return InvalidArgumentError(
          "grammar: too many ways to match the empty string (closures past 16M entries); "
          "simplify nested optional repetitions");
    }
  }
  closure_offsets_.push_back(static_cast<uint32_t>(closure_entries_.size()));
  return OkStatus();
}

}  // namespace loom
