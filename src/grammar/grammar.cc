#include "grammar/grammar.h"

#include <algorithm>
#include <charconv>

#include "base/utf8.h"
#include "grammar/scc.h"

namespace loom {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

int Utf8Length(char32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void AppendHexByte(int b, std::string* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out->append("\\x");
  out->push_back(kHex[b >> 4]);
  out->push_back(kHex[b & 15]);
}

void AppendClassByte(int b, std::string* out) {
  if (b >= 0x21 && b < 0x7F && b != ']' && b != '\\' && b != '^' && b != '-') {
    out->push_back(static_cast<char>(b));
  } else {
    AppendHexByte(b, out);
  }
}

// Splits [s, e] into ranges whose code points share a UTF-8 length and whose encodings differ only
// in a per-byte range (the construction of Rust's regex-syntax Utf8Sequences).
void SplitUtf8(char32_t s, char32_t e, std::vector<std::vector<ByteSet>>* out) {
  for (char32_t boundary : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
    if (s <= boundary && e > boundary) {
      SplitUtf8(s, boundary, out);
      SplitUtf8(boundary + 1, e, out);
      return;
    }
  }
  const int n = Utf8Length(s);
  if (n == 1) {
    out->push_back({ByteSet::Range(static_cast<uint8_t>(s), static_cast<uint8_t>(e))});
    return;
  }
  for (int i = 1; i < n; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;
    if ((s & ~m) != (e & ~m)) {
      if ((s & m) != 0) {
        SplitUtf8(s, s | m, out);
        SplitUtf8((s | m) + 1, e, out);
        return;
      }
      if ((e & m) != m) {
        SplitUtf8(s, (e & ~m) - 1, out);
        SplitUtf8(e & ~m, e, out);
        return;
      }
    }
  }
  std::string bs, be;
  AppendUtf8(s, &bs);
  AppendUtf8(e, &be);
  std::vector<ByteSet> seq;
  for (size_t k = 0; k < bs.size(); ++k) {
    seq.push_back(ByteSet::Range(static_cast<uint8_t>(bs[k]), static_cast<uint8_t>(be[k])));
  }
  out->push_back(std::move(seq));
}

}  // namespace

ByteSet ByteSet::Single(uint8_t b) {
  ByteSet s;
  s.Add(b);
  return s;
}

ByteSet ByteSet::Range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  s.AddRange(lo, hi);
  return s;
}

void ByteSet::AddRange(uint8_t lo, uint8_t hi) {
  for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
}

std::string ByteSet::ToString() const {
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!Contains(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && Contains(static_cast<uint8_t>(e + 1))) ++e;
    AppendClassByte(b, &out);
    if (e > b) {
      out.push_back('-');
      AppendClassByte(e, &out);
    }
    b = e + 1;
  }
  out.push_back(']');
  return out;
}

std::vector<CodePointRange> NormalizeRanges(std::vector<CodePointRange> ranges, bool negate) {
  for (auto& r : ranges) {
    if (r.first > r.second) std::swap(r.first, r.second);
    r.second = std::min(r.second, kMaxCodePoint);
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodePointRange> merged;
  for (const auto& r : ranges) {
    if (r.first > kMaxCodePoint) continue;
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (negate) {
    std::vector<CodePointRange> complement;
    char32_t next = 0;
    for (const auto& r : merged) {
      if (r.first > next) complement.push_back({next, r.first - 1});
      next = r.second + 1;
    }
    if (next <= kMaxCodePoint) complement.push_back({next, kMaxCodePoint});
    merged = std::move(complement);
  }
  // Remove the surrogates, which UTF-8 cannot encode.
  std::vector<CodePointRange> out;
  for (const auto& r : merged) {
    if (r.second < 0xD800 || r.first > 0xDFFF) {
      out.push_back(r);
      continue;
    }
    if (r.first < 0xD800) out.push_back({r.first, 0xD7FF});
    if (r.second > 0xDFFF) out.push_back({0xE000, r.second});
  }
  return out;
}

std::vector<std::vector<ByteSet>> Utf8Sequences(const std::vector<CodePointRange>& ranges) {
  std::vector<std::vector<ByteSet>> out;
  for (const auto& r : NormalizeRanges(ranges, false)) SplitUtf8(r.first, r.second, &out);
  return out;
}

int32_t Grammar::AddRule(std::string_view name) {
  std::string unique(name);
  int32_t& suffix = next_suffix_[unique];
  while (by_name_.count(unique) > 0) unique = std::string(name) + "-" + std::to_string(++suffix);
  const int32_t idx = static_cast<int32_t>(rules_.size());
  by_name_[unique] = idx;
  rules_.push_back(GrammarRule{std::move(unique), {}, false});
  return idx;
}

int32_t Grammar::Embed(const Grammar& other, std::string_view prefix) {
  CHECK_GE(other.root_idx_, 0);
  const auto base = static_cast<int32_t>(rules_.size());
  rules_.reserve(rules_.size() + other.rules_.size());
  for (const GrammarRule& r : other.rules_) {
    GrammarRule copy = r;
    copy.name = std::string(prefix) + "." + r.name;
    for (GrammarSequence& seq : copy.alternatives) {
      for (GrammarElement& e : seq) {
        if (e.kind == GrammarElement::Kind::kRule) e.rule_idx += base;
      }
    }
    by_name_.try_emplace(copy.name, static_cast<int32_t>(rules_.size()));
    rules_.push_back(std::move(copy));
  }
  for (std::vector<int32_t> chain : other.count_chains_) {
    for (int32_t& r : chain) r += base;
    count_chains_.push_back(std::move(chain));
  }
  return other.root_idx_ + base;
}

int32_t Grammar::FindRule(std::string_view name) const {
  const auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? -1 : it->second;
}

void Grammar::AddAlternative(int32_t rule_idx, GrammarSequence seq) {
  CHECK(rule_idx >= 0 && rule_idx < static_cast<int32_t>(rules_.size())) << rule_idx;
  rules_[rule_idx].alternatives.push_back(std::move(seq));
  rules_[rule_idx].defined = true;
}

void Grammar::AppendLiteral(std::string_view bytes, GrammarSequence* seq) {
  for (char c : bytes)
    seq->push_back(GrammarElement::Bytes(ByteSet::Single(static_cast<uint8_t>(c))));
}

GrammarElement Grammar::CodePointClass(std::vector<CodePointRange> ranges, bool negate) {
  const std::vector<CodePointRange> norm = NormalizeRanges(std::move(ranges), negate);
  std::string key;
  for (const auto& r : norm) key += std::to_string(r.first) + "-" + std::to_string(r.second) + ",";
  if (const auto it = class_rules_.find(key); it != class_rules_.end()) {
    return GrammarElement::Rule(it->second);
  }
  ByteSet ascii;
  std::vector<GrammarSequence> alternatives;
  for (auto& seq : Utf8Sequences(norm)) {
    if (seq.size() == 1) {
      ascii.AddSet(seq[0]);
      continue;
    }
    GrammarSequence alt;
    for (const ByteSet& b : seq) alt.push_back(GrammarElement::Bytes(b));
    alternatives.push_back(std::move(alt));
  }
  if (alternatives.empty() && !ascii.empty()) return GrammarElement::Bytes(ascii);
  if (!ascii.empty()) alternatives.insert(alternatives.begin(), {GrammarElement::Bytes(ascii)});
  const int32_t idx = AddRule("char");
  for (auto& alt : alternatives) AddAlternative(idx, std::move(alt));
  MarkDefined(idx);
  class_rules_[key] = idx;
  return GrammarElement::Rule(idx);
}

GrammarElement Grammar::Group(std::vector<GrammarSequence> alternatives,
                              std::string_view name_hint) {
  if (alternatives.size() == 1 && alternatives[0].size() == 1) return alternatives[0][0];
  const int32_t idx = AddRule(name_hint);
  for (auto& alt : alternatives) AddAlternative(idx, std::move(alt));
  MarkDefined(idx);
  return GrammarElement::Rule(idx);
}

GrammarSequence Grammar::Repeat(GrammarSequence body, int64_t min_count, int64_t max_count,
                                std::string_view name_hint) {
  CHECK(min_count >= 0 && (max_count < 0 || min_count <= max_count))
      << min_count << " " << max_count;
  GrammarSequence out;
  if (max_count == 0) return out;
  const GrammarElement item =
      body.size() == 1 ? body[0] : Group({std::move(body)}, std::string(name_hint) + "-item");
  // What follows the required repetitions: a star, an optional chain or nothing.
  GrammarSequence rest;
  if (max_count < 0) {
    const int32_t star = AddRule(std::string(name_hint) + "-star");
    AddAlternative(star, {item, GrammarElement::Rule(star)});
    AddAlternative(star, {});
    rest.push_back(GrammarElement::Rule(star));
  } else if (max_count > min_count) {
    // opt_k ::= item opt_{k-1} | "" (opt_1 ::= item | ""): opt_k matches 0 .. k items.
    std::vector<int32_t> chain;
    chain.reserve(max_count - min_count);
    ReserveRules(max_count - min_count);
    const int32_t first = AddRule(std::string(name_hint) + "-opt");
    const std::string base = rules_[first].name;
    for (int64_t k = 1; k <= max_count - min_count; ++k) {
      const int32_t opt = k == 1 ? first : AddChainRule(base, k);
      GrammarSequence alt;
      alt.reserve(2);
      alt.push_back(item);
      if (!chain.empty()) alt.push_back(GrammarElement::Rule(chain.back()));
      rules_[opt].alternatives.reserve(2);
      AddAlternative(opt, std::move(alt));
      AddAlternative(opt, {});
      chain.push_back(opt);
    }
    rest.push_back(GrammarElement::Rule(chain.back()));
    if (chain.size() >= kMinCountChain) count_chains_.push_back(std::move(chain));
  }
  if (min_count < static_cast<int64_t>(kMinCountChain)) {
    for (int64_t i = 0; i < min_count; ++i) out.push_back(item);
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
  }
  // Many required repetitions: req_k ::= item req_{k-1}, req_1 ::= item rest (one rule a count,
  // so that the mask DFA can tell counts apart only where a token could; compiled_grammar.h).
  std::vector<int32_t> chain;
  chain.reserve(min_count);
  ReserveRules(min_count);
  const int32_t first = AddRule(std::string(name_hint) + "-req");
  const std::string base = rules_[first].name;
  for (int64_t k = 1; k <= min_count; ++k) {
    const int32_t req = k == 1 ? first : AddChainRule(base, k);
    GrammarSequence alt;
    alt.reserve(2);
    alt.push_back(item);
    if (chain.empty()) {
      alt.insert(alt.end(), rest.begin(), rest.end());
    } else {
      alt.push_back(GrammarElement::Rule(chain.back()));
    }
    AddAlternative(req, std::move(alt));
    chain.push_back(req);
  }
  out.push_back(GrammarElement::Rule(chain.back()));
  count_chains_.push_back(std::move(chain));
  return out;
}

void Grammar::ReserveRules(int64_t more) {
  const size_t needed = rules_.size() + static_cast<size_t>(more);
  if (needed > rules_.capacity()) rules_.reserve(std::max(needed, 2 * rules_.capacity()));
}

int32_t Grammar::AddChainRule(const std::string& base, int64_t k) {
  // Named base@k for dumps and messages; not registered in by_name_ (chains run to 100k rules,
  // and nothing looks their rules up by name).
  const int32_t idx = static_cast<int32_t>(rules_.size());
  char digits[24] = {'@'};
  const char* end = std::to_chars(digits + 1, digits + sizeof(digits), k).ptr;
  GrammarRule& rule = rules_.emplace_back();
  rule.name.reserve(base.size() + (end - digits));
  rule.name.append(base).append(digits, static_cast<size_t>(end - digits));
  return idx;
}

std::vector<uint8_t> Grammar::NullableRules() const {
  // A worklist instead of passes until nothing changes: a pass sees a rule before the rules after
  // it become nullable, and front ends number rules outside in, so passes would be as many as
  // the grammar is deep. need[a] counts alternative a's references to rules not yet known
  // nullable (kNever when it holds bytes); users[R] lists the alternatives referring to R.
  constexpr uint32_t kNever = UINT32_MAX;
  const auto n = static_cast<int32_t>(rules_.size());
  std::vector<uint8_t> nullable(n, 0);
  std::vector<uint32_t> need, alt_rule, users_begin(n + 1, 0), users;
  std::vector<int32_t> queue;
  for (int32_t i = 0; i < n; ++i) {
    for (const GrammarSequence& alt : rules_[i].alternatives) {
      uint32_t refs = 0;
      for (const GrammarElement& e : alt) {
        if (e.kind != GrammarElement::Kind::kRule) {
          refs = kNever;
          break;
        }
        ++refs;
      }
      if (refs == 0 && !nullable[i]) {
        nullable[i] = 1;
        queue.push_back(i);
      }
      if (refs != kNever) {
        for (const GrammarElement& e : alt) ++users_begin[e.rule_idx + 1];
      }
      need.push_back(refs);
      alt_rule.push_back(static_cast<uint32_t>(i));
    }
  }
  for (int32_t i = 0; i < n; ++i) users_begin[i + 1] += users_begin[i];
  users.resize(users_begin[n]);
  std::vector<uint32_t> fill(users_begin.begin(), users_begin.end() - 1);
  uint32_t a = 0;
  for (int32_t i = 0; i < n; ++i) {
    for (const GrammarSequence& alt : rules_[i].alternatives) {
      if (need[a] != kNever) {
        for (const GrammarElement& e : alt) users[fill[e.rule_idx]++] = a;
      }
      ++a;
    }
  }
  while (!queue.empty()) {
    const int32_t r = queue.back();
    queue.pop_back();
    for (uint32_t k = users_begin[r]; k < users_begin[r + 1]; ++k) {
      const uint32_t alt = users[k];
      if (--need[alt] == 0 && !nullable[alt_rule[alt]]) {
        nullable[alt_rule[alt]] = 1;
        queue.push_back(static_cast<int32_t>(alt_rule[alt]));
      }
    }
  }
  return nullable;
}

Status Grammar::Validate() const {
  const int32_t n = static_cast<int32_t>(rules_.size());
  if (root_idx_ < 0 || root_idx_ >= n) return InvalidArgumentError("grammar has no root rule");
  for (const GrammarRule& r : rules_) {
    for (const GrammarSequence& alt : r.alternatives) {
      for (const GrammarElement& e : alt) {
        if (e.kind != GrammarElement::Kind::kRule) continue;
        CHECK(e.rule_idx >= 0 && e.rule_idx < n) << e.rule_idx;
        if (!rules_[e.rule_idx].defined) {
          return InvalidArgumentError("rule \"" + rules_[e.rule_idx].name + "\" (used by \"" +
                                      r.name + "\") is not defined");
        }
      }
    }
  }
  const std::vector<uint8_t> nullable = NullableRules();
  // Left edges A -> B: B can be entered before A consumed a byte. "grow" when something follows
  // B in the alternative (the matcher pushes a frame); tail edges push nothing. Rule i's edges are
  // edges[edge_begin[i], edge_begin[i + 1]).
  struct Edge {
    int32_t to;
    bool grow;
  };
  std::vector<Edge> edges;
  std::vector<uint32_t> edge_begin(n + 1, 0);
  for (int32_t i = 0; i < n; ++i) {
    for (const GrammarSequence& alt : rules_[i].alternatives) {
      for (size_t k = 0; k < alt.size(); ++k) {
        if (alt[k].kind != GrammarElement::Kind::kRule) break;
        edges.push_back({alt[k].rule_idx, k + 1 != alt.size()});
        if (!nullable[alt[k].rule_idx]) break;
      }
    }
    edge_begin[i + 1] = static_cast<uint32_t>(edges.size());
  }
  // A grow edge inside a strongly connected component is left recursion.
  std::vector<int32_t> comp(n, -1);
  int32_t num_comps = 0;
  (void)ForEachStronglyConnectedComponent(
      n, edge_begin, [&](uint32_t k) { return edges[k].to; },
      [&](const std::vector<int32_t>& nodes) {
        for (int32_t v : nodes) comp[v] = num_comps;
        ++num_comps;
        return OkStatus();
      });
  for (int32_t i = 0; i < n; ++i) {
    for (uint32_t k = edge_begin[i]; k < edge_begin[i + 1]; ++k) {
      const Edge& e = edges[k];
      if (e.grow && comp[e.to] == comp[i]) {
        return InvalidArgumentError("rule \"" + rules_[i].name +
                                    "\" is left-recursive (it can reach itself before consuming "
                                    "input); rewrite it with repetition, e.g. x ::= y (\"op\" y)*");
      }
    }
  }
  return OkStatus();
}

std::string Grammar::ToString() const {
  std::string out;
  for (size_t i = 0; i < rules_.size(); ++i) {
    const GrammarRule& r = rules_[i];
    out += r.name + " ::=";
    for (size_t a = 0; a < r.alternatives.size(); ++a) {
      if (a > 0) out += " |";
      if (r.alternatives[a].empty()) out += " \"\"";
      for (const GrammarElement& e : r.alternatives[a]) {
        out += " ";
        out += e.kind == GrammarElement::Kind::kRule ? rules_[e.rule_idx].name : e.bytes.ToString();
      }
    }
    out += "\n";
  }
  return out;
}

Status GrammarBudget::Check(size_t rules) const {
  if (rules > max_rules) {
    return InvalidArgumentError("grammar: more than " + std::to_string(max_rules) +
                                " rules (lower maxLength / maxItems / repetition counts)");
  }
  if (timeout_ms > 0 &&
      std::chrono::steady_clock::now() - start > std::chrono::milliseconds(timeout_ms)) {
    return InvalidArgumentError("grammar: compiling took longer than " +
                                std::to_string(timeout_ms) +
                                " ms (--grammar-compile-timeout); simplify the schema");
  }
  return OkStatus();
}

StatusOr<Grammar> CompileChoice(const std::vector<std::string>& choices) {
  if (choices.empty()) return InvalidArgumentError("choice: the list of choices is empty");
  Grammar g;
  const int32_t root = g.AddRule("root");
  for (const std::string& c : choices) {
    GrammarSequence seq;
    Grammar::AppendLiteral(c, &seq);
    g.AddAlternative(root, std::move(seq));
  }
  g.set_root(root);
  return g;
}

}  // namespace loom
