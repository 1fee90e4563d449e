#include "grammar/matcher.h"

#include <algorithm>

namespace loom {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)) {
  CHECK(grammar_ != nullptr);
  Reset();
}

void GrammarMatcher::Reset() {
  nodes_.clear();
  stacks_.clear();
  steps_.clear();
  BeginStep();
  const int32_t root = grammar_->root_idx();
  for (const int32_t* a = grammar_->alt_begin(root); a != grammar_->alt_end(root); ++a) {
    AddStack({*a, -1});
  }
  EndStep();
}

void GrammarMatcher::BeginStep() {
  step_begin_ = static_cast<uint32_t>(stacks_.size());
  step_nodes_begin_ = static_cast<uint32_t>(nodes_.size());
  visited_.clear();
}

void GrammarMatcher::Summarize(int32_t pos, int32_t parent, Step* step) {
  for (;;) {
    step->next_bytes.AddSet(grammar_->closure_first_bytes(pos));
    if (!grammar_->closure_has_pop(pos)) return;
    if (parent < 0) {
      step->accepting = true;
      return;
    }
    const Frame up = nodes_[parent];
    if (std::find(visited_.begin(), visited_.end(), up) != visited_.end()) return;
    visited_.push_back(up);
    pos = up.pos;
    parent = up.parent;
  }
}

void GrammarMatcher::EndStep() {
  Step s{step_begin_, static_cast<uint32_t>(stacks_.size()), static_cast<uint32_t>(nodes_.size()),
         ByteSet(), false};
  visited_.clear();
  for (uint32_t i = s.stacks_begin; i < s.stacks_end; ++i) {
    Summarize(stacks_[i].pos, stacks_[i].parent, &s);
  }
  steps_.push_back(s);
}

bool GrammarMatcher::SameFrames(int32_t a, int32_t b) const {
  for (; a != b; a = nodes_[a].parent, b = nodes_[b].parent) {
    if (a < 0 || b < 0) return false;
    if (grammar_->closure_class(nodes_[a].pos) != grammar_->closure_class(nodes_[b].pos)) {
      return false;
    }
  }
  return true;
}

void GrammarMatcher::AddStack(Frame f) {
  // A stack that behaves like one of this step's is that stack: its position of the same closure
  // class, its frames the same up to that (made in different steps, so not shared). Without this
  // `.*a+.*` would hold one more stack after every `a`, and a state would never repeat.
  const int32_t cls = grammar_->closure_class(f.pos);
  for (uint32_t i = step_begin_; i < stacks_.size(); ++i) {
    if (grammar_->closure_class(stacks_[i].pos) == cls && SameFrames(stacks_[i].parent, f.parent)) {
      return;
    }
  }
  stacks_.push_back(f);
}

int32_t GrammarMatcher::PushFrame(int32_t pos, int32_t parent) {
  // Frames made earlier in this step are shared (up to the class of their position), so equal
  // stacks mostly stay equal by index. The most recent frame is the likeliest match, so search
  // backwards.
  const int32_t cls = grammar_->closure_class(pos);
  for (uint32_t i = static_cast<uint32_t>(nodes_.size()); i-- > step_nodes_begin_;) {
    if (grammar_->closure_class(nodes_[i].pos) == cls && SameFrames(nodes_[i].parent, parent)) {
      return static_cast<int32_t>(i);
    }
  }
  nodes_.push_back({pos, parent});
  return static_cast<int32_t>(nodes_.size()) - 1;
}

void GrammarMatcher::Advance(int32_t pos, int32_t parent, uint8_t b) {
  const auto& elems = grammar_->elements();
  const auto& sets = grammar_->byte_sets();
  const int32_t* chains = grammar_->chain_positions();
  for (;;) {
    if (!grammar_->closure_first_bytes(pos).Contains(b) && !grammar_->closure_has_pop(pos)) return;
    bool pop = false;
    for (const auto* e = grammar_->closure_begin(pos); e != grammar_->closure_end(pos); ++e) {
      if (e->pos == CompiledGrammar::kPop) {
        pop = true;
        continue;
      }
      if (!sets[elems[e->pos].arg].Contains(b)) continue;
      int32_t p = parent;
      for (uint32_t i = 0; i < e->chain_size; ++i) p = PushFrame(chains[e->chain_begin + i], p);
      AddStack({e->pos + 1, p});
    }
    // The alternative can end here: the byte may also continue the parent (once per frame).
    if (!pop || parent < 0) return;
    const Frame up = nodes_[parent];
    if (std::find(visited_.begin(), visited_.end(), up) != visited_.end()) return;
    visited_.push_back(up);
    pos = up.pos;
    parent = up.parent;
  }
}

bool GrammarMatcher::AcceptByte(uint8_t b) {
  if (!steps_.back().next_bytes.Contains(b)) return false;
  const Step cur = steps_.back();
  BeginStep();
  for (uint32_t i = cur.stacks_begin; i < cur.stacks_end; ++i) {
    const Frame f = stacks_[i];
    Advance(f.pos, f.parent, b);
  }
  if (stacks_.size() == step_begin_) {  // cannot happen when next_bytes is exact; be safe
    nodes_.resize(cur.nodes_end);
    return false;
  }
  EndStep();
  return true;
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  const size_t cp = Checkpoint();
  for (char c : bytes) {
    if (!AcceptByte(static_cast<uint8_t>(c))) {
      Rollback(cp);
      return false;
    }
  }
  return true;
}

void GrammarMatcher::Rollback(size_t checkpoint) {
  CHECK(checkpoint >= 1 && checkpoint <= steps_.size()) << checkpoint << " of " << steps_.size();
  steps_.resize(checkpoint);
  stacks_.resize(steps_.back().stacks_end);
  nodes_.resize(steps_.back().nodes_end);
}

void GrammarMatcher::AppendStateSignature(std::vector<int32_t>* out) const {
  const Step& s = steps_.back();
  for (uint32_t i = s.stacks_begin; i < s.stacks_end; ++i) {
    out->push_back(grammar_->closure_class(stacks_[i].pos));
    int32_t n = stacks_[i].parent;
    for (; n >= 0; n = nodes_[n].parent) out->push_back(grammar_->closure_class(nodes_[n].pos));
    out->push_back(-1);
  }
}

GrammarMatcher GrammarMatcher::Fork() const { return ForkMapped(-1); }

GrammarMatcher GrammarMatcher::ForkCanonical(int32_t max_bytes) const {
  return ForkMapped(max_bytes);
}

GrammarMatcher GrammarMatcher::ForkMapped(int32_t max_bytes) const {
  GrammarMatcher out(grammar_, ForkTag{});
  const CompiledGrammar& g = *grammar_;
  auto map = [&](int32_t pos) { return max_bytes < 0 ? pos : g.CanonicalPosition(pos, max_bytes); };
  // Our node -> out's node, for the nodes copied so far. The current stacks reach few nodes
  // (their depth, shared), so a linear search beats a hash map here.
  std::vector<std::pair<int32_t, int32_t>> remap;
  auto mapped = [&](int32_t node) -> int32_t {
    for (const auto& [from, to] : remap) {
      if (from == node) return to;
    }
    return -1;
  };
  // A frame of out's; when positions are mapped, frames that become equal are merged, so that
  // equal stacks stay equal by index.
  auto frame = [&](Frame f) -> int32_t {
    if (max_bytes >= 0) {
      for (size_t i = 0; i < out.nodes_.size(); ++i) {
        if (out.nodes_[i] == f) return static_cast<int32_t>(i);
      }
    }
    out.nodes_.push_back(f);
    return static_cast<int32_t>(out.nodes_.size()) - 1;
  };
  std::vector<int32_t> chain;
  const Step& s = steps_.back();
  out.stacks_.reserve(s.stacks_end - s.stacks_begin);
  for (uint32_t i = s.stacks_begin; i < s.stacks_end; ++i) {
    chain.clear();
    int32_t parent = stacks_[i].parent;
    for (; parent >= 0 && mapped(parent) < 0; parent = nodes_[parent].parent)
      chain.push_back(parent);
    if (parent >= 0) parent = mapped(parent);  // else -1: the bottom
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      parent = frame({map(nodes_[*it].pos), parent});
      remap.push_back({*it, parent});
    }
    const Frame top{map(stacks_[i].pos), parent};
    if (max_bytes < 0 ||
        std::find(out.stacks_.begin(), out.stacks_.end(), top) == out.stacks_.end()) {
      out.stacks_.push_back(top);
    }
  }
  Step fs = s;
  fs.stacks_begin = 0;
  fs.stacks_end = static_cast<uint32_t>(out.stacks_.size());
  fs.nodes_end = static_cast<uint32_t>(out.nodes_.size());
  out.steps_.push_back(fs);
  return out;
}

}  // namespace loom
