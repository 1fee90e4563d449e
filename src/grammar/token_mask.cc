#include "grammar/token_mask.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace loom {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes,
                                 const std::vector<TokenId>& never_allowed,
                                 std::vector<TokenId> eos_ids)
    : token_bytes_(std::move(token_bytes)), kind_(token_bytes_.size(), kNormal) {
  for (TokenId id : never_allowed) {
    CHECK(id >= 0 && id < size()) << id;
    kind_[id] = kNever;
  }
  for (size_t id = 0; id < token_bytes_.size(); ++id) {
    if (token_bytes_[id].empty()) kind_[id] = kNever;
  }
  for (TokenId id : eos_ids) {
    CHECK(id >= 0 && id < size()) << id;
    if (kind_[id] != kEos) eos_ids_.push_back(id);
    kind_[id] = kEos;
  }
  // The trie, built from the sorted byte strings: each node's tokens and children are
  // contiguous because sorted strings sharing a prefix are adjacent. Nodes are created in
  // pre-order; edges of a node are filled once its children are known, so build per level via a
  // recursive split of the sorted range.
  std::vector<TokenId> order;
  for (TokenId id = 0; id < size(); ++id) {
    if (kind_[id] == kNormal) order.push_back(id);
  }
  std::sort(order.begin(), order.end(),
            [&](TokenId a, TokenId b) { return token_bytes_[a] < token_bytes_[b]; });
  struct Pending {
    uint32_t node;
    size_t begin, end, depth;  // order[begin, end): tokens with this node's prefix (length depth)
  };
  nodes_.push_back({});
  std::vector<Pending> work = {{0, 0, order.size(), 0}};
  while (!work.empty()) {
    const Pending p = work.back();
    work.pop_back();
    size_t i = p.begin;
    nodes_[p.node].first_token = static_cast<uint32_t>(ids_.size());
    while (i < p.end && token_bytes_[order[i]].size() == p.depth) ids_.push_back(order[i++]);
    nodes_[p.node].num_tokens = static_cast<uint32_t>(ids_.size()) - nodes_[p.node].first_token;
    nodes_[p.node].first_edge = static_cast<uint32_t>(edges_.size());
    std::vector<Pending> children;
    while (i < p.end) {
      const uint8_t b = static_cast<uint8_t>(token_bytes_[order[i]][p.depth]);
      size_t j = i;
      while (j < p.end && static_cast<uint8_t>(token_bytes_[order[j]][p.depth]) == b) ++j;
      const uint32_t child = static_cast<uint32_t>(nodes_.size());
      nodes_.push_back({});
      edges_.push_back({b, child});
      children.push_back({child, i, j, p.depth + 1});
      i = j;
    }
    nodes_[p.node].num_edges = static_cast<uint32_t>(edges_.size()) - nodes_[p.node].first_edge;
    for (auto it = children.rbegin(); it != children.rend(); ++it) work.push_back(*it);
  }
}

StatusOr<TokenVocabulary> TokenVocabulary::FromTokenizer(
    const Tokenizer& tokenizer, const std::vector<TokenId>& extra_eos_ids) {
  const StreamPlan& plan = tokenizer.stream_plan();
  if (!plan.supported) {
    return UnimplementedError(
        "grammar: this tokenizer's decoder has no per-token stream plan, so token bytes are not "
        "known");
  }
  const int32_t n = tokenizer.vocab_size();
  std::vector<std::string> bytes(n);
  std::vector<TokenId> never;
  for (TokenId id = 0; id < n; ++id) {
    if (tokenizer.IsSpecial(id)) never.push_back(id);
    if (static_cast<size_t>(id) < plan.byte_value.size() && plan.byte_value[id] >= 0) {
      bytes[id] = std::string(1, static_cast<char>(plan.byte_value[id]));
    } else if (static_cast<size_t>(id) < plan.pieces.size()) {
      bytes[id] = plan.pieces[id];
    }
  }
  std::vector<TokenId> eos = extra_eos_ids;
  if (tokenizer.eos_id()) eos.push_back(*tokenizer.eos_id());
  for (TokenId id : eos) {
    if (id < 0 || id >= n) return InvalidArgumentError("grammar: EOS id out of the vocabulary");
  }
  return TokenVocabulary(std::move(bytes), never, std::move(eos));
}

void TokenVocabulary::Walk(uint32_t node, GrammarMatcher* m, uint32_t* bitmask) const {
  const Node& nd = nodes_[node];
  const ByteSet next = m->NextBytes();  // a copy: AcceptByte may reallocate the steps
  for (uint32_t e = nd.first_edge; e < nd.first_edge + nd.num_edges; ++e) {
    const Edge edge = edges_[e];
    if (!next.Contains(edge.byte)) continue;
    const size_t cp = m->Checkpoint();
    if (!m->AcceptByte(edge.byte)) continue;
    SetTokens(edge.child, bitmask);
    if (nodes_[edge.child].num_edges > 0) Walk(edge.child, m, bitmask);
    m->Rollback(cp);
  }
}

bool TokenVocabulary::PartialWalk(uint32_t node, GrammarMatcher* m, PartialMask* out) const {
  if (m->TouchesContext()) {
    out->node_flags[node] |= kDependent;
    return true;
  }
  bool any = false;
  const Node& nd = nodes_[node];
  const ByteSet next = m->NextBytes();  // a copy: AcceptByte may reallocate the steps
  for (uint32_t e = nd.first_edge; e < nd.first_edge + nd.num_edges; ++e) {
    const Edge edge = edges_[e];
    if (!next.Contains(edge.byte)) continue;
    const size_t cp = m->Checkpoint();
    if (!m->AcceptByte(edge.byte)) continue;
    SetTokens(edge.child, out->accepted.data());
    if (nodes_[edge.child].num_edges > 0 && PartialWalk(edge.child, m, out)) any = true;
    m->Rollback(cp);
  }
  if (any) out->node_flags[node] |= kOnPath;
  return any;
}

TokenVocabulary::PartialMask TokenVocabulary::BuildPartialMask(
    const GrammarMatcher& truncated) const {
  PartialMask out{std::vector<uint32_t>(mask_words(), 0), std::vector<uint8_t>(nodes_.size(), 0)};
  GrammarMatcher walker = truncated.Fork();
  PartialWalk(0, &walker, &out);
  return out;
}

void TokenVocabulary::RestrictedWalk(uint32_t node, GrammarMatcher* m, const PartialMask& partial,
                                     uint32_t* bitmask) const {
  const Node& nd = nodes_[node];
  const ByteSet next = m->NextBytes();  // a copy: AcceptByte may reallocate the steps
  for (uint32_t e = nd.first_edge; e < nd.first_edge + nd.num_edges; ++e) {
    const Edge edge = edges_[e];
    const uint8_t flags = partial.node_flags[edge.child];
    if (flags == 0 || !next.Contains(edge.byte)) continue;
    const size_t cp = m->Checkpoint();
    if (!m->AcceptByte(edge.byte)) continue;
    SetTokens(edge.child, bitmask);
    if (flags & kDependent) {
      Walk(edge.child, m, bitmask);
    } else {
      RestrictedWalk(edge.child, m, partial, bitmask);
    }
    m->Rollback(cp);
  }
}

void TokenVocabulary::FillMaskWithPartial(const GrammarMatcher& matcher, const PartialMask& partial,
                                          uint32_t* bitmask) const {
  std::memcpy(bitmask, partial.accepted.data(), mask_words() * sizeof(uint32_t));
  GrammarMatcher walker = matcher.Fork();
  if (partial.node_flags[0] & kDependent) {
    Walk(0, &walker, bitmask);
  } else if (partial.node_flags[0] & kOnPath) {
    RestrictedWalk(0, &walker, partial, bitmask);
  }
  if (matcher.IsAccepting()) {
    for (TokenId id : eos_ids_) bitmask[id >> 5] |= uint32_t{1} << (id & 31);
  }
}

void TokenVocabulary::FillMask(const GrammarMatcher& matcher, uint32_t* bitmask) const {
  std::memset(bitmask, 0, mask_words() * sizeof(uint32_t));
  GrammarMatcher walker = matcher.Fork();
  Walk(0, &walker, bitmask);
  if (matcher.IsAccepting()) {
    for (TokenId id : eos_ids_) bitmask[id >> 5] |= uint32_t{1} << (id & 31);
  }
}

}  // namespace loom
