#include "grammar/grammar_compose.h"

#include <string>
#include <vector>

#include "base/check.h"

namespace loom {
namespace {

// Adds rules matching any byte string that contains `marker` exactly once, at its end (the
// Knuth-Morris-Pratt automaton of `marker`: rule j = "the last j bytes matched marker[0, j)").
// Returns the rule of state 0.
int32_t UpToAndIncluding(Grammar* g, std::string_view marker) {
  const size_t k = marker.size();
  CHECK_GT(k, 0u);
  // failure[j]: the longest proper border of marker[0, j).
  std::vector<size_t> failure(k + 1, 0);
  for (size_t j = 2; j <= k; ++j) {
    size_t f = failure[j - 1];
    while (f > 0 && marker[f] != marker[j - 1]) f = failure[f];
    if (marker[f] == marker[j - 1]) ++f;
    failure[j] = f;
  }
  auto next = [&](size_t j, uint8_t b) {
    while (j > 0 && static_cast<uint8_t>(marker[j]) != b) j = failure[j];
    return static_cast<uint8_t>(marker[j]) == b ? j + 1 : 0;
  };
  std::vector<int32_t> rules(k);
  for (size_t j = 0; j < k; ++j) rules[j] = g->AddRule("up-to-marker");
  for (size_t j = 0; j < k; ++j) {
    std::vector<ByteSet> by_next(k + 1);
    for (int b = 0; b < 256; ++b)
      by_next[next(j, static_cast<uint8_t>(b))].Add(static_cast<uint8_t>(b));
    for (size_t n = 0; n <= k; ++n) {
      if (by_next[n].empty()) continue;
      GrammarSequence seq{GrammarElement::Bytes(by_next[n])};
      if (n < k) seq.push_back(GrammarElement::Rule(rules[n]));
      g->AddAlternative(rules[j], std::move(seq));
    }
  }
  return rules[0];
}

int32_t Whitespace(Grammar* g) {
  const int32_t ws = g->AddRule("reasoning-ws");
  ByteSet space;
  for (char c : {' ', '\t', '\n', '\r'}) space.Add(static_cast<uint8_t>(c));
  g->AddAlternative(ws, {});
  g->AddAlternative(ws, {GrammarElement::Bytes(space), GrammarElement::Rule(ws)});
  return ws;
}

}  // namespace

Grammar Framed(Grammar inner, std::string_view prefix, std::string_view suffix) {
  CHECK_GE(inner.root_idx(), 0);
  const int32_t inner_root = inner.root_idx();
  const int32_t root = inner.AddRule("framed");
  GrammarSequence seq;
  Grammar::AppendLiteral(prefix, &seq);
  seq.push_back(GrammarElement::Rule(inner_root));
  Grammar::AppendLiteral(suffix, &seq);
  inner.AddAlternative(root, std::move(seq));
  inner.set_root(root);
  return inner;
}

Grammar AfterReasoning(Grammar inner, std::string_view open, std::string_view close,
                       bool already_open) {
  CHECK_GE(inner.root_idx(), 0);
  CHECK(!open.empty() && !close.empty());
  const int32_t inner_root = inner.root_idx();
  const int32_t ws = Whitespace(&inner);
  const int32_t text = UpToAndIncluding(&inner, close);
  const int32_t root = inner.AddRule("after-reasoning");
  if (already_open) {
    inner.AddAlternative(root, {GrammarElement::Rule(text), GrammarElement::Rule(ws),
                                GrammarElement::Rule(inner_root)});
  } else {
    GrammarSequence with;
    with.push_back(GrammarElement::Rule(ws));
    Grammar::AppendLiteral(open, &with);
    with.push_back(GrammarElement::Rule(text));
    with.push_back(GrammarElement::Rule(ws));
    with.push_back(GrammarElement::Rule(inner_root));
    inner.AddAlternative(root, std::move(with));
    inner.AddAlternative(root, {GrammarElement::Rule(ws), GrammarElement::Rule(inner_root)});
  }
  inner.set_root(root);
  return inner;
}

}  // namespace loom
