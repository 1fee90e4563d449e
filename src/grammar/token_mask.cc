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
  std::vector<std::pair<std::string_view, TokenId>> allowed;
  for (TokenId id = 0; id < size(); ++id) {
    if (kind_[id] != kNormal) continue;
    allowed.push_back({token_bytes_[id], id});
    max_token_bytes_ = std::max(max_token_bytes_, static_cast<int32_t>(token_bytes_[id].size()));
  }
  trie_ = BuildTrie(std::move(allowed));
  IndexPlainText();
}

std::pair<TokenId, size_t> TokenVocabulary::LongestTokenPrefix(std::string_view bytes) const {
  std::pair<TokenId, size_t> best{-1, 0};
  uint32_t node = 0;
  for (size_t depth = 0;; ++depth) {
    const Node& n = trie_.nodes[node];
    if (n.num_tokens > 0) {
      const auto ids = trie_.ids.begin() + n.first_token;
      best = {*std::max_element(ids, ids + n.num_tokens), depth};
    }
    if (depth == bytes.size()) break;
    // A node's edges are in walk order (IndexPlainText), not by byte: a linear search.
    const auto first = trie_.edges.begin() + n.first_edge;
    const auto last = first + n.num_edges;
    const auto e = std::find_if(first, last, [&](const Edge& edge) {
      return edge.byte == static_cast<uint8_t>(bytes[depth]);
    });
    if (e == last) break;
    node = e->child;
  }
  return best;
}

TokenVocabulary::Trie TokenVocabulary::BuildTrie(
    std::vector<std::pair<std::string_view, TokenId>> keys) {
  // Built from the sorted byte strings: each node's tokens and children are contiguous because
  // sorted strings sharing a prefix are adjacent. Nodes are created in pre-order; edges of a
  // node are filled once its children are known, via a recursive split of the sorted range.
  std::sort(keys.begin(), keys.end());
  auto key = [&](size_t i) -> std::string_view { return keys[i].first; };
  struct Pending {
    uint32_t node;
    size_t begin, end, depth;  // keys[begin, end): tokens with this node's prefix (length depth)
  };
  Trie trie;
  trie.nodes.push_back({});
  std::vector<Pending> work = {{0, 0, keys.size(), 0}};
  while (!work.empty()) {
    const Pending p = work.back();
    work.pop_back();
    size_t i = p.begin;
    trie.nodes[p.node].first_token = static_cast<uint32_t>(trie.ids.size());
    while (i < p.end && key(i).size() == p.depth) trie.ids.push_back(keys[i++].second);
    trie.nodes[p.node].num_tokens =
        static_cast<uint32_t>(trie.ids.size()) - trie.nodes[p.node].first_token;
    trie.nodes[p.node].first_edge = static_cast<uint32_t>(trie.edges.size());
    std::vector<Pending> children;
    while (i < p.end) {
      const uint8_t b = static_cast<uint8_t>(key(i)[p.depth]);
      size_t j = i;
      while (j < p.end && static_cast<uint8_t>(key(j)[p.depth]) == b) ++j;
      const uint32_t child = static_cast<uint32_t>(trie.nodes.size());
      trie.nodes.push_back({});
      trie.edges.push_back({b, kNotPlain, child});
      children.push_back({child, i, j, p.depth + 1});
      i = j;
    }
    trie.nodes[p.node].num_edges =
        static_cast<uint32_t>(trie.edges.size()) - trie.nodes[p.node].first_edge;
    for (auto it = children.rbegin(); it != children.rend(); ++it) work.push_back(*it);
  }
  return trie;
}

void TokenVocabulary::IndexPlainText() {
  plain_chars_.assign(token_bytes_.size(), 0);
  for (TokenId id = 0; id < size(); ++id) {
    if (kind_[id] != kNormal) continue;
    int state = kPlainBoundary, chars = 0;
    for (char c : token_bytes_[id]) {
      state = PlainTextNext(state, static_cast<uint8_t>(c));
      if (state < 0) break;
      chars += state == kPlainBoundary;
    }
    if (state == kPlainBoundary) plain_chars_[id] = static_cast<uint8_t>(std::min(chars, 254));
  }
  // Children come after their parent (pre-order), so one backward pass folds subtrees up.
  std::vector<uint8_t> plain_max(trie_.nodes.size(), 0);
  for (size_t n = trie_.nodes.size(); n-- > 0;) {
    const Node& nd = trie_.nodes[n];
    uint8_t m = 0;
    for (uint32_t t = nd.first_token; t < nd.first_token + nd.num_tokens; ++t) {
      const uint8_t c = plain_chars_[trie_.ids[t]];
      m = std::max<uint8_t>(m, c == 0 ? kNotPlain : c);
    }
    for (uint32_t e = nd.first_edge; e < nd.first_edge + nd.num_edges; ++e) {
      m = std::max(m, plain_max[trie_.edges[e].child]);
    }
    plain_max[n] = m;
  }
  // Lay the trie out again so that the nodes a walk skipping at level L visits (plain_max > L)
  // come first (pre-order within a level; a parent's plain_max is >= its children's, so parents
  // stay first), and each node's edges in descending plain_max: a walk reads a prefix of the
  // arrays (the ~12k nodes above the non-plain tokens fit in L2 instead of 5 MB for all) and
  // stops at a node's first skippable edge.
  std::vector<uint32_t> order(trie_.nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return plain_max[a] > plain_max[b]; });
  std::vector<uint32_t> new_index(order.size());
  for (uint32_t i = 0; i < order.size(); ++i) new_index[order[i]] = i;
  Trie laid_out;
  laid_out.nodes.resize(order.size());
  for (uint32_t i = 0; i < order.size(); ++i) {
    const Node& old = trie_.nodes[order[i]];
    Node& nd = laid_out.nodes[i];
    nd.first_token = static_cast<uint32_t>(laid_out.ids.size());
    nd.num_tokens = old.num_tokens;
    laid_out.ids.insert(laid_out.ids.end(), trie_.ids.begin() + old.first_token,
                        trie_.ids.begin() + old.first_token + old.num_tokens);
    nd.first_edge = static_cast<uint32_t>(laid_out.edges.size());
    nd.num_edges = old.num_edges;
    for (uint32_t e = old.first_edge; e < old.first_edge + old.num_edges; ++e) {
      const Edge& edge = trie_.edges[e];
      laid_out.edges.push_back({edge.byte, plain_max[edge.child], new_index[edge.child]});
    }
    std::stable_sort(laid_out.edges.begin() + nd.first_edge, laid_out.edges.end(),
                     [](const Edge& a, const Edge& b) { return a.plain_max > b.plain_max; });
  }
  trie_ = std::move(laid_out);
  plain_masks_.assign(kPlainLevels.size() + 1, std::vector<uint32_t>(mask_words(), 0));
  for (TokenId id = 0; id < size(); ++id) {
    const uint8_t c = plain_chars_[id];
    if (c == 0) continue;
    for (size_t l = 0; l <= kPlainLevels.size(); ++l) {
      if (l == kPlainLevels.size() || c <= kPlainLevels[l]) {
        plain_masks_[l][id >> 5] |= uint32_t{1} << (id & 31);
      }
    }
  }
  // The other tokens, split after their longest prefix of whole plain characters.
  std::vector<std::pair<std::string_view, TokenId>> heads, tails;
  for (TokenId id = 0; id < size(); ++id) {
    if (kind_[id] != kNormal || plain_chars_[id] > 0) continue;
    const std::string_view bytes = token_bytes_[id];
    size_t prefix = 0;  // bytes of whole plain characters
    int state = kPlainBoundary;
    for (size_t i = 0; i < bytes.size(); ++i) {
      state = PlainTextNext(state, static_cast<uint8_t>(bytes[i]));
      if (state < 0) break;
      if (state == kPlainBoundary) prefix = i + 1;
    }
    (prefix == 0 ? heads : tails).push_back({bytes.substr(prefix), id});
  }
  head_trie_ = BuildTrie(std::move(heads));
  tail_trie_ = BuildTrie(std::move(tails));
  // Tokens by first byte, for the plain ASCII bytes (a whole character each).
  std::array<std::vector<TokenId>, 256> by_first;
  for (TokenId id = 0; id < size(); ++id) {
    const std::string& bytes = token_bytes_[id];
    if (plain_chars_[id] == 0 || bytes.size() < 2 || static_cast<uint8_t>(bytes[0]) >= 0x80) {
      continue;
    }
    by_first[static_cast<uint8_t>(bytes[0])].push_back(id);
  }
  first_byte_begin_.assign(1, 0);
  first_byte_plain_ids_.clear();
  for (const std::vector<TokenId>& ids : by_first) {
    first_byte_plain_ids_.insert(first_byte_plain_ids_.end(), ids.begin(), ids.end());
    first_byte_begin_.push_back(static_cast<uint32_t>(first_byte_plain_ids_.size()));
  }
}

StatusOr<TokenVocabulary> TokenVocabulary::FromTokenizer(
    const Tokenizer& tokenizer, const std::vector<TokenId>& extra_eos_ids,
    const std::vector<std::string>& special_as_text) {
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
  for (const std::string& text : special_as_text) {
    const std::optional<TokenId> id = tokenizer.TokenToId(text);
    if (!id || *id < 0 || *id >= n || !tokenizer.IsSpecial(*id)) continue;
    never.erase(std::remove(never.begin(), never.end(), *id), never.end());
    bytes[*id] = text;
  }
  std::vector<TokenId> eos = extra_eos_ids;
  if (tokenizer.eos_id()) eos.push_back(*tokenizer.eos_id());
  for (TokenId id : eos) {
    if (id < 0 || id >= n) return InvalidArgumentError("grammar: EOS id out of the vocabulary");
  }
  return TokenVocabulary(std::move(bytes), never, std::move(eos));
}

void TokenVocabulary::Walk(uint32_t node, GrammarMatcher* m, uint32_t* bitmask) const {
  const Node& nd = trie_.nodes[node];
  const ByteSet next = m->NextBytes();  // a copy: AcceptByte may reallocate the steps
  for (uint32_t e = nd.first_edge; e < nd.first_edge + nd.num_edges; ++e) {
    const Edge edge = trie_.edges[e];
    if (!next.Contains(edge.byte)) continue;
    const size_t cp = m->Checkpoint();
    if (!m->AcceptByte(edge.byte)) continue;
    SetTokens(trie_, edge.child, bitmask);
    if (trie_.nodes[edge.child].num_edges > 0) Walk(edge.child, m, bitmask);
    m->Rollback(cp);
  }
}

void TokenVocabulary::DfaWalk(const Trie& trie, uint32_t node, int32_t s, MaskDfa* dfa,
                              int skip_chars, uint32_t* bitmask) const {
  const Node& nd = trie.nodes[node];
  for (uint32_t e = nd.first_edge; e < nd.first_edge + nd.num_edges; ++e) {
    const Edge edge = trie.edges[e];
    if (edge.plain_max <= skip_chars) break;  // and every later edge (descending plain_max)
    const int32_t t = dfa->Next(s, edge.byte);
    if (t == MaskDfa::kReject) continue;
    SetTokens(trie, edge.child, bitmask);
    if (trie.nodes[edge.child].num_edges > 0) {
      DfaWalk(trie, edge.child, t, dfa, skip_chars, bitmask);
    }
  }
}

void TokenVocabulary::DfaWalkFirstBytes(int32_t s, MaskDfa* dfa, uint32_t* bitmask) const {
  const Node& root = trie_.nodes[0];
  for (uint32_t e = root.first_edge; e < root.first_edge + root.num_edges; ++e) {
    const Edge edge = trie_.edges[e];
    const int32_t t = dfa->Next(s, edge.byte);
    if (t == MaskDfa::kReject) continue;
    SetTokens(trie_, edge.child, bitmask);
    if (trie_.nodes[edge.child].num_edges == 0) continue;
    // A plain ASCII byte is a whole character: below it, a token is plain text when its other
    // bytes are, so with every plain string accepted after it those come from the list.
    int skip = 0;
    if (edge.byte < 0x80 && PlainTextNext(kPlainBoundary, edge.byte) == kPlainBoundary &&
        dfa->PlainCharsAccepted(t) == MaskDfa::kUnbounded) {
      for (uint32_t i = first_byte_begin_[edge.byte]; i < first_byte_begin_[edge.byte + 1]; ++i) {
        const TokenId id = first_byte_plain_ids_[i];
        bitmask[id >> 5] |= uint32_t{1} << (id & 31);
      }
      skip = kNotPlain - 1;
    }
    DfaWalk(trie_, edge.child, t, dfa, skip, bitmask);
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

void TokenVocabulary::FillMask(const GrammarMatcher& matcher, const std::vector<int32_t>& signature,
                               MaskDfa* dfa, uint32_t* bitmask) const {
  dfa->SetMaxWalkBytes(max_token_bytes_);
  const int32_t s = dfa->Enter(matcher, signature);
  const int chars = dfa->PlainCharsAccepted(s);
  const size_t bytes = mask_words() * sizeof(uint32_t);
  if (chars == MaskDfa::kUnbounded) {
    std::memcpy(bitmask, plain_masks_.back().data(), bytes);
    const int32_t successor = dfa->PlainSuccessor(s);
    if (successor != MaskDfa::kReject) {
      DfaWalk(head_trie_, 0, s, dfa, 0, bitmask);
      DfaWalk(tail_trie_, 0, successor, dfa, 0, bitmask);
    } else {
      DfaWalk(trie_, 0, s, dfa, kNotPlain - 1, bitmask);
    }
  } else if (chars == 0) {
    std::memset(bitmask, 0, bytes);
    DfaWalkFirstBytes(s, dfa, bitmask);
  } else {
    // The deepest precomputed level the proof covers.
    size_t level = kPlainLevels.size();
    for (size_t l = 0; l < kPlainLevels.size() && kPlainLevels[l] <= chars; ++l) level = l;
    if (level == kPlainLevels.size()) {
      std::memset(bitmask, 0, bytes);
      DfaWalk(trie_, 0, s, dfa, 0, bitmask);
    } else {
      std::memcpy(bitmask, plain_masks_[level].data(), bytes);
      DfaWalk(trie_, 0, s, dfa, kPlainLevels[level], bitmask);
    }
  }
  if (matcher.IsAccepting()) {
    for (TokenId id : eos_ids_) bitmask[id >> 5] |= uint32_t{1} << (id & 31);
  }
}

}  // namespace loom
