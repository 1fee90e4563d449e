#include "grammar/matcher.h"

#include <algorithm>
#include <unordered_map>

namespace loom {

using Kind = CompiledGrammar::Kind;

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)) {
  CHECK(grammar_ != nullptr);
  Reset();
}

void GrammarMatcher::Reset() {
  nodes_.clear();
  stacks_.clear();
  steps_.clear();
  step_begin_ = 0;
  step_nodes_begin_ = 0;
  visited_.clear();
  const int32_t root = grammar_->root_idx();
  for (const int32_t* a = grammar_->alt_begin(root); a != grammar_->alt_end(root); ++a) {
    Expand(*a, -1);
  }
  steps_.push_back({0, static_cast<uint32_t>(stacks_.size()), static_cast<uint32_t>(nodes_.size())});
}

void GrammarMatcher::AddStack(Frame f) {
  for (uint32_t i = step_begin_; i < stacks_.size(); ++i) {
    if (stacks_[i] == f) return;
  }
  stacks_.push_back(f);
}

int32_t GrammarMatcher::PushFrame(int32_t pos, int32_t parent) {
  // Frames made earlier in this step are shared, so equal stacks stay equal by index.
  for (uint32_t i = step_nodes_begin_; i < nodes_.size(); ++i) {
    if (nodes_[i].pos == pos && nodes_[i].parent == parent) return static_cast<int32_t>(i);
  }
  nodes_.push_back({pos, parent});
  return static_cast<int32_t>(nodes_.size()) - 1;
}

void GrammarMatcher::Expand(int32_t pos, int32_t parent) {
  const auto& elems = grammar_->elements();
  for (;;) {
    const CompiledGrammar::Element& e = elems[pos];
    if (e.kind == Kind::kBytes) {
      AddStack({pos, parent});
      return;
    }
    if (e.kind == Kind::kEnd) {
      if (parent < 0) {
        AddStack({kAcceptPos, -1});
        return;
      }
      const Frame up = nodes_[parent];
      pos = up.pos;
      parent = up.parent;
      continue;
    }
    // A rule reference: push the continuation unless it is the end of this alternative (a tail
    // call), then enter every alternative once per (alternative, parent) in this step. The
    // Validate() ban on left recursion bounds the frames pushed; the visited set ends the cycles
    // that tail calls through nullable rules can form.
    const int32_t cont = elems[pos + 1].kind == Kind::kEnd ? parent : PushFrame(pos + 1, parent);
    for (const int32_t* a = grammar_->alt_begin(e.arg); a != grammar_->alt_end(e.arg); ++a) {
      const Frame key{*a, cont};
      if (std::find(visited_.begin(), visited_.end(), key) != visited_.end()) continue;
      visited_.push_back(key);
      Expand(*a, cont);
    }
    return;
  }
}

bool GrammarMatcher::AcceptByte(uint8_t b) {
  const Step cur = steps_.back();
  step_begin_ = static_cast<uint32_t>(stacks_.size());
  step_nodes_begin_ = static_cast<uint32_t>(nodes_.size());
  visited_.clear();
  const auto& elems = grammar_->elements();
  const auto& sets = grammar_->byte_sets();
  for (uint32_t i = cur.stacks_begin; i < cur.stacks_end; ++i) {
    const Frame f = stacks_[i];
    if (f.pos == kAcceptPos || !sets[elems[f.pos].arg].Contains(b)) continue;
    Expand(f.pos + 1, f.parent);
  }
  if (stacks_.size() == step_begin_) {
    nodes_.resize(cur.nodes_end);
    return false;
  }
  steps_.push_back({step_begin_, static_cast<uint32_t>(stacks_.size()),
                    static_cast<uint32_t>(nodes_.size())});
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

bool GrammarMatcher::IsAccepting() const {
  const Step& s = steps_.back();
  for (uint32_t i = s.stacks_begin; i < s.stacks_end; ++i) {
    if (stacks_[i].pos == kAcceptPos) return true;
  }
  return false;
}

bool GrammarMatcher::CanAcceptMoreBytes() const {
  const Step& s = steps_.back();
  for (uint32_t i = s.stacks_begin; i < s.stacks_end; ++i) {
    if (stacks_[i].pos != kAcceptPos) return true;
  }
  return false;
}

ByteSet GrammarMatcher::NextBytes() const {
  ByteSet out;
  const Step& s = steps_.back();
  for (uint32_t i = s.stacks_begin; i < s.stacks_end; ++i) {
    if (stacks_[i].pos == kAcceptPos) continue;
    out.AddSet(grammar_->byte_sets()[grammar_->elements()[stacks_[i].pos].arg]);
  }
  return out;
}

void GrammarMatcher::Rollback(size_t checkpoint) {
  CHECK(checkpoint >= 1 && checkpoint <= steps_.size()) << checkpoint << " of " << steps_.size();
  steps_.resize(checkpoint);
  stacks_.resize(steps_.back().stacks_end);
  nodes_.resize(steps_.back().nodes_end);
}

GrammarMatcher GrammarMatcher::Fork() const {
  GrammarMatcher out(grammar_, ForkTag{});
  std::unordered_map<int32_t, int32_t> remap;  // our node -> out's node
  std::vector<int32_t> chain;
  auto copy_chain = [&](int32_t node) -> int32_t {
    chain.clear();
    while (node >= 0 && remap.find(node) == remap.end()) {
      chain.push_back(node);
      node = nodes_[node].parent;
    }
    int32_t parent = node < 0 ? -1 : remap[node];
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      out.nodes_.push_back({nodes_[*it].pos, parent});
      parent = static_cast<int32_t>(out.nodes_.size()) - 1;
      remap[*it] = parent;
    }
    return parent;
  };
  const Step& s = steps_.back();
  for (uint32_t i = s.stacks_begin; i < s.stacks_end; ++i) {
    out.stacks_.push_back({stacks_[i].pos, copy_chain(stacks_[i].parent)});
  }
  out.steps_.push_back({0, static_cast<uint32_t>(out.stacks_.size()),
                        static_cast<uint32_t>(out.nodes_.size())});
  return out;
}

}  // namespace loom
