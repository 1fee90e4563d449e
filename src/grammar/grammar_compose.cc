#include "grammar/grammar_compose.h"

#include <string>
#include <vector>

#include "base/check.h"

namespace loom {
namespace {

// Fills rules[0, k) (k = marker's length, already added) with the Knuth-Morris-Pratt automaton of
// `marker`: rule j = "the last j bytes matched marker[0, j)"; each alternative takes one byte
// and moves on. A byte completing the marker continues with `on_match` and leaves the automaton
// (no such byte when on_match is null); with `can_end` every state may also end.
void FillMarkerAutomaton(Grammar* g, std::string_view marker, const std::vector<int32_t>& rules,
                         const GrammarSequence* on_match, bool can_end) {
  const size_t k = marker.size();
  CHECK_GT(k, 0u);
  CHECK_EQ(rules.size(), k);
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
  for (size_t j = 0; j < k; ++j) {
    if (can_end) g->AddAlternative(rules[j], {});
    std::vector<ByteSet> by_next(k + 1);
    for (int b = 0; b < 256; ++b)
      by_next[next(j, static_cast<uint8_t>(b))].Add(static_cast<uint8_t>(b));
    for (size_t n = 0; n <= k; ++n) {
      if (by_next[n].empty() || (n == k && on_match == nullptr)) continue;
      GrammarSequence seq{GrammarElement::Bytes(by_next[n])};
      if (n < k) {
        seq.push_back(GrammarElement::Rule(rules[n]));
      } else {
        seq.insert(seq.end(), on_match->begin(), on_match->end());
      }
      g->AddAlternative(rules[j], std::move(seq));
    }
  }
}

std::vector<int32_t> AddRules(Grammar* g, size_t n, std::string_view name) {
  std::vector<int32_t> rules(n);
  for (int32_t& r : rules) r = g->AddRule(name);
  return rules;
}

// Adds rules matching any byte string that contains `marker` exactly once, at its end. Returns
// the rule of state 0.
int32_t UpToAndIncluding(Grammar* g, std::string_view marker) {
  const std::vector<int32_t> rules = AddRules(g, marker.size(), "up-to-marker");
  const GrammarSequence end;
  FillMarkerAutomaton(g, marker, rules, &end, /*can_end=*/false);
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

Grammar Triggered(Grammar inner, std::string_view trigger, bool repeat) {
  CHECK_GE(inner.root_idx(), 0);
  CHECK(!trigger.empty());
  const int32_t inner_root = inner.root_idx();
  const std::vector<int32_t> text = AddRules(&inner, trigger.size(), "free-text");
  // After the (last) triggered part: more of the same text, or text the trigger cannot enter.
  std::vector<int32_t> after = text;
  if (!repeat) {
    after = AddRules(&inner, trigger.size(), "free-text-after");
    FillMarkerAutomaton(&inner, trigger, after, nullptr, /*can_end=*/true);
  }
  const GrammarSequence on_match = {GrammarElement::Rule(inner_root),
                                    GrammarElement::Rule(after[0])};
  FillMarkerAutomaton(&inner, trigger, text, &on_match, /*can_end=*/true);
  inner.set_root(text[0]);
  return inner;
}

Grammar AtStart(Grammar inner, std::string_view trigger) {
  CHECK_GE(inner.root_idx(), 0);
  CHECK(!trigger.empty());
  const int32_t inner_root = inner.root_idx();
  const int32_t any = inner.AddRule("any-text");
  inner.AddAlternative(any, {});
  inner.AddAlternative(any, {GrammarElement::Bytes(ByteSet::All()), GrammarElement::Rule(any)});
  // prefix[k]: the output so far (after whitespace) is trigger[0, k).
  const std::vector<int32_t> prefix = AddRules(&inner, trigger.size(), "trigger-prefix");
  for (size_t k = 0; k < trigger.size(); ++k) {
    const auto b = static_cast<uint8_t>(trigger[k]);
    inner.AddAlternative(prefix[k], {});
    GrammarSequence on = {GrammarElement::Bytes(ByteSet::Single(b))};
    on.push_back(GrammarElement::Rule(k + 1 < trigger.size() ? prefix[k + 1] : inner_root));
    inner.AddAlternative(prefix[k], std::move(on));
    ByteSet other;
    for (int c = 0; c < 256; ++c) {
      const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
      if (c != b && !(k == 0 && space)) other.Add(static_cast<uint8_t>(c));
    }
    inner.AddAlternative(prefix[k], {GrammarElement::Bytes(other), GrammarElement::Rule(any)});
  }
  const auto space = static_cast<uint8_t>(trigger[0]);
  CHECK(space != ' ' && space != '\t' && space != '\n' && space != '\r');
  const int32_t ws = Whitespace(&inner);
  const int32_t root = inner.AddRule("at-start");
  inner.AddAlternative(root, {GrammarElement::Rule(ws), GrammarElement::Rule(prefix[0])});
  inner.set_root(root);
  return inner;
}

Grammar UpTo(std::string_view marker) {
  CHECK(!marker.empty());
  Grammar g;
  g.set_root(UpToAndIncluding(&g, marker));
  return g;
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
