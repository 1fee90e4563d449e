#include "grammar/mask_dfa.h"

#include <algorithm>
#include <optional>

namespace loom {
namespace {

// Plain-text states after the boundary: how many continuation bytes are left, and the narrower
// second-byte ranges of E0 (no overlongs), ED (no surrogates), F0 (no overlongs), F4 (<= U+10FFFF).
constexpr int kNeed1 = 1, kNeed2 = 2, kNeed3 = 3, kAfterE0 = 4, kAfterED = 5, kAfterF0 = 6,
              kAfterF4 = 7;

uint64_t HashSignature(const std::vector<int32_t>& sig) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t v : sig) h = (h ^ static_cast<uint32_t>(v)) * 0x100000001b3ull;
  return h;
}

}  // namespace

int PlainTextNext(int state, uint8_t b) {
  const bool cont = b >= 0x80 && b <= 0xBF;
  switch (state) {
    case kPlainBoundary:
      if (b < 0x80) return b >= 0x20 && b != '"' && b != '\\' ? kPlainBoundary : -1;
      if (b >= 0xC2 && b <= 0xDF) return kNeed1;
      if (b == 0xE0) return kAfterE0;
      if (b == 0xED) return kAfterED;
      if (b >= 0xE1 && b <= 0xEF) return kNeed2;
      if (b == 0xF0) return kAfterF0;
      if (b >= 0xF1 && b <= 0xF3) return kNeed3;
      if (b == 0xF4) return kAfterF4;
      return -1;
    case kNeed1:
      return cont ? kPlainBoundary : -1;
    case kNeed2:
      return cont ? kNeed1 : -1;
    case kNeed3:
      return cont ? kNeed2 : -1;
    case kAfterE0:
      return b >= 0xA0 && b <= 0xBF ? kNeed1 : -1;
    case kAfterED:
      return b >= 0x80 && b <= 0x9F ? kNeed1 : -1;
    case kAfterF0:
      return b >= 0x90 && b <= 0xBF ? kNeed2 : -1;
    case kAfterF4:
      return b >= 0x80 && b <= 0x8F ? kNeed2 : -1;
    default:
      return -1;
  }
}

MaskDfa::MaskDfa(std::shared_ptr<const CompiledGrammar> grammar, size_t max_states)
    : grammar_(std::move(grammar)), max_states_(std::max<size_t>(max_states, 1)) {
  // Refine the grammar's classes so that each class also steps the plain-text automaton the
  // same way in every plain state.
  class_ = grammar_->byte_classes();
  num_classes_ = grammar_->num_byte_classes();
  for (int d = 0; d < kNumPlainStates; ++d) {
    for (int next = -1; next < kNumPlainStates; ++next) {
      ByteSet set;
      for (int b = 0; b < 256; ++b) {
        if (PlainTextNext(d, static_cast<uint8_t>(b)) == next) set.Add(static_cast<uint8_t>(b));
      }
      class_ = RefineByteClasses(class_, set, &num_classes_);
    }
  }
  std::vector<bool> seen(num_classes_);
  for (int b = 0; b < 256; ++b) {
    if (seen[class_[b]]) continue;
    seen[class_[b]] = true;
    for (int d = 0; d < kNumPlainStates; ++d) {
      const int next = PlainTextNext(d, static_cast<uint8_t>(b));
      if (next >= 0) plain_moves_[d].push_back({static_cast<uint8_t>(b), next});
    }
  }
}

void MaskDfa::Clear() {
  trans_.clear();
  matchers_.clear();
  plain_chars_.clear();
  plain_successor_.clear();
  sig_pool_.clear();
  sig_begin_.clear();
  by_hash_.clear();
}

int32_t MaskDfa::Find(const std::vector<int32_t>& signature, uint64_t hash) const {
  auto [it, end] = by_hash_.equal_range(hash);
  for (; it != end; ++it) {
    const int32_t s = it->second;
    const auto begin = sig_pool_.begin() + sig_begin_[s];
    const auto stop = sig_pool_.begin() + sig_begin_[s + 1];
    if (std::equal(begin, stop, signature.begin(), signature.end())) return s;
  }
  return -1;
}

int32_t MaskDfa::Add(const std::vector<int32_t>& signature, uint64_t hash, GrammarMatcher matcher) {
  const int32_t s = static_cast<int32_t>(matchers_.size());
  if (sig_begin_.empty()) sig_begin_.push_back(0);
  sig_pool_.insert(sig_pool_.end(), signature.begin(), signature.end());
  sig_begin_.push_back(static_cast<uint32_t>(sig_pool_.size()));
  by_hash_.emplace(hash, s);
  matchers_.push_back(std::move(matcher));
  plain_chars_.push_back(-1);
  plain_successor_.push_back(kReject);
  trans_.resize(trans_.size() + num_classes_, kUnknown);
  return s;
}

void MaskDfa::SetMaxWalkBytes(int32_t max_bytes) {
  if (max_bytes == max_walk_bytes_) return;
  Clear();
  max_walk_bytes_ = max_bytes;
}

int32_t MaskDfa::Enter(const GrammarMatcher& matcher, const std::vector<int32_t>& signature) {
  if (matchers_.size() >= max_states_) Clear();
  const uint64_t hash = HashSignature(signature);
  const int32_t s = Find(signature, hash);
  return s >= 0 ? s : Add(signature, hash, matcher.Fork());
}

int32_t MaskDfa::Compute(int32_t s, uint8_t b, size_t index) {
  GrammarMatcher& m = matchers_[s];
  const size_t cp = m.Checkpoint();
  if (!m.AcceptByte(b)) return trans_[index] = kReject;
  // Under count chains the state kept is canonical for the rest of the walk (at most
  // max_walk_bytes_ - 1 more bytes).
  const bool canonical = max_walk_bytes_ >= 0 && grammar_->has_count_chains();
  std::optional<GrammarMatcher> next;
  if (canonical) next.emplace(m.ForkCanonical(max_walk_bytes_));
  scratch_.clear();
  (canonical ? *next : m).AppendStateSignature(&scratch_);
  const uint64_t hash = HashSignature(scratch_);
  int32_t t = Find(scratch_, hash);
  if (t < 0 && !canonical) next.emplace(m.Fork());
  m.Rollback(cp);  // before Add: it may move matchers_
  if (t < 0) t = Add(scratch_, hash, std::move(*next));
  trans_[index] = t;
  return t;
}

bool MaskDfa::ExpandChar(int32_t s, int d, std::vector<int32_t>* out) {
  for (const auto& [byte, next] : plain_moves_[d]) {
    const int32_t t = Next(s, byte);
    if (t == kReject) return false;
    if (next != kPlainBoundary) {
      if (!ExpandChar(t, next, out)) return false;
    } else if (std::find(out->begin(), out->end(), t) == out->end()) {
      out->push_back(t);
    }
  }
  return true;
}

int MaskDfa::PlainCharsAccepted(int32_t s) {
  if (plain_chars_[s] >= 0) return plain_chars_[s];
  // Breadth-first by characters: `frontier` holds the states first reached after `level` plain
  // characters. A state reached again later is dominated (its continuations were already
  // explored from the earlier sighting), so when no new state appears every length is covered.
  // Every state reached after a character is in some `next`: when all of them are one state, it
  // is the successor.
  std::vector<int32_t> seen = {s}, frontier = {s}, next;
  int result = kMaxPlainChars;
  int32_t successor = kUnknown;
  for (int level = 0; level < kMaxPlainChars; ++level) {
    next.clear();
    for (int32_t f : frontier) {
      if (!ExpandChar(f, kPlainBoundary, &next)) {
        plain_chars_[s] = static_cast<int16_t>(level);
        return level;
      }
    }
    frontier.clear();
    for (int32_t t : next) {
      if (successor == kUnknown) successor = t;
      if (successor != t) successor = kReject;
      if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
      seen.push_back(t);
      frontier.push_back(t);
    }
    if (frontier.empty()) {
      result = kUnbounded;
      break;
    }
  }
  plain_chars_[s] = static_cast<int16_t>(result);
  if (result == kUnbounded && successor >= 0) plain_successor_[s] = successor;
  return result;
}

}  // namespace loom
