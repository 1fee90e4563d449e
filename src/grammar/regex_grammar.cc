#include "grammar/regex_grammar.h"

#include <map>
#include <string>

#include "base/utf8.h"

namespace loom {
namespace {

constexpr int64_t kMaxRepeat = 10000;

struct RegexNode {
  enum class Kind { kClass, kConcat, kAlt, kRepeat };
  Kind kind = Kind::kConcat;              // an empty concat matches ""
  std::vector<CodePointRange> ranges;     // kClass
  std::vector<RegexNode> children;        // kConcat, kAlt; kRepeat: one
  int64_t min_count = 0, max_count = -1;  // kRepeat, max < 0: unbounded

  static RegexNode Class(std::vector<CodePointRange> r) {
    RegexNode n;
    n.kind = Kind::kClass;
    n.ranges = std::move(r);
    return n;
  }
};

const std::vector<CodePointRange> kDigit = {{'0', '9'}};
const std::vector<CodePointRange> kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const std::vector<CodePointRange> kSpace = {
    {0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const std::vector<CodePointRange> kAny = {{0, 0x10FFFF}};
const std::vector<CodePointRange> kDot = {
    {0, 0x09}, {0x0B, 0x0C}, {0x0E, 0x2027}, {0x202A, 0x10FFFF}};

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view src) : src_(src) {}

  StatusOr<RegexNode> Parse() {
    ASSIGN_OR_RETURN(RegexNode n, ParseAlt(/*depth=*/0));
    if (pos_ < src_.size()) return Error("unmatched `)`");
    return n;
  }

 private:
  Status Error(std::string_view what) const {
    return InvalidArgumentError("regex /" + std::string(src_) + "/ at offset " +
                                std::to_string(pos_) + ": " + std::string(what));
  }
  bool AtEnd() const { return pos_ >= src_.size(); }
  char Peek() const { return AtEnd() ? '\0' : src_[pos_]; }

  StatusOr<RegexNode> ParseAlt(int depth) {
    RegexNode alt;
    alt.kind = RegexNode::Kind::kAlt;
    for (;;) {
      ASSIGN_OR_RETURN(RegexNode branch, ParseConcat(depth));
      alt.children.push_back(std::move(branch));
      if (Peek() != '|') break;
      ++pos_;
    }
    if (alt.children.size() == 1) return std::move(alt.children[0]);
    return alt;
  }

  // A branch; at depth 0 its anchors are resolved here: the missing side gets "any string".
  StatusOr<RegexNode> ParseConcat(int depth) {
    RegexNode seq;
    bool anchored_start = false, anchored_end = false;
    if (depth == 0 && Peek() == '^') {
      anchored_start = true;
      ++pos_;
    }
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$') {
        ++pos_;
        if (depth == 0 && (AtEnd() || Peek() == '|')) {
          anchored_end = true;
          break;
        }
        --pos_;
        return Error("anchor `$` is only supported at the end of the pattern");
      }
      if (Peek() == '^') return Error("anchor `^` is only supported at the start of the pattern");
      ASSIGN_OR_RETURN(RegexNode item, ParseQuantified(depth));
      seq.children.push_back(std::move(item));
    }
    if (depth == 0) {
      RegexNode any;
      any.kind = RegexNode::Kind::kRepeat;
      any.children.push_back(RegexNode::Class(kAny));
      if (!anchored_start) seq.children.insert(seq.children.begin(), any);
      if (!anchored_end) seq.children.push_back(any);
    }
    if (seq.children.size() == 1) return std::move(seq.children[0]);
    return seq;
  }

  StatusOr<RegexNode> ParseQuantified(int depth) {
    ASSIGN_OR_RETURN(RegexNode atom, ParseAtom(depth));
    for (;;) {
      int64_t lo = 0, hi = -1;
      const char c = Peek();
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        lo = 1;
      } else if (c == '?') {
        ++pos_;
        hi = 1;
      } else if (c == '{' && ParseBraces(&lo, &hi)) {
        if (hi >= 0 && hi < lo) return Error("quantifier {m,n} has n < m");
        if (lo > kMaxRepeat || hi > kMaxRepeat) return Error("repetition count past 10000");
      } else {
        return atom;
      }
      if (Peek() == '?') ++pos_;  // lazy: same language
      if (Peek() == '*' || Peek() == '+' || Peek() == '?') {
        return Error(
            "a quantifier cannot follow a quantifier (possessive quantifiers are not "
            "supported)");
      }
      RegexNode rep;
      rep.kind = RegexNode::Kind::kRepeat;
      rep.min_count = lo;
      rep.max_count = hi;
      rep.children.push_back(std::move(atom));
      atom = std::move(rep);
    }
  }

  // {m} {m,} {m,n} at pos_: consumes it and returns true; otherwise false (a literal `{`).
  bool ParseBraces(int64_t* lo, int64_t* hi) {
    size_t p = pos_ + 1;
    auto number = [&](int64_t* out) {
      const size_t start = p;
      int64_t v = 0;
      while (p < src_.size() && src_[p] >= '0' && src_[p] <= '9') {
        v = std::min<int64_t>(v * 10 + (src_[p] - '0'), kMaxRepeat + 1);
        ++p;
      }
      *out = v;
      return p > start;
    };
    if (!number(lo)) return false;
    *hi = *lo;
    if (p < src_.size() && src_[p] == ',') {
      ++p;
      *hi = -1;
      if (p < src_.size() && src_[p] != '}' && !number(hi)) return false;
    }
    if (p >= src_.size() || src_[p] != '}') return false;
    pos_ = p + 1;
    return true;
  }

  StatusOr<RegexNode> ParseAtom(int depth) {
    const char c = Peek();
    if (c == '(') {
      ++pos_;
      if (Peek() == '?') {
        const std::string_view rest = src_.substr(pos_);
        if (rest.substr(0, 2) == "?:") {
          pos_ += 2;
        } else if (rest.substr(0, 2) == "?=" || rest.substr(0, 2) == "?!" ||
                   rest.substr(0, 3) == "?<=" || rest.substr(0, 3) == "?<!") {
          return Error("lookaround assertions are not supported");
        } else if (rest.substr(0, 2) == "?<") {
          const size_t close = rest.find('>');
          if (close == std::string_view::npos) return Error("unterminated group name");
          pos_ += close + 1;
        } else {
          return Error("unknown group syntax `(?`");
        }
      }
      ASSIGN_OR_RETURN(RegexNode inner, ParseAlt(depth + 1));
      if (Peek() != ')') return Error("missing `)`");
      ++pos_;
      return inner;
    }
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      return RegexNode::Class(kDot);
    }
    if (c == '\\') {
      std::vector<CodePointRange> ranges;
      RETURN_IF_ERROR(ParseEscape(/*in_class=*/false, &ranges));
      return RegexNode::Class(std::move(ranges));
    }
    if (c == '*' || c == '+' || c == '?') return Error("quantifier has nothing to repeat");
    ASSIGN_OR_RETURN(const char32_t cp, ParseUtf8());
    return RegexNode::Class({{cp, cp}});
  }

  StatusOr<RegexNode> ParseClass() {
    ++pos_;  // [
    bool negate = false;
    if (Peek() == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<CodePointRange> ranges;
    while (!AtEnd() && Peek() != ']') {  // ECMAScript: [] is the empty class
      std::vector<CodePointRange> lo_set;
      bool lo_single = true;
      if (Peek() == '\\') {
        RETURN_IF_ERROR(ParseEscape(/*in_class=*/true, &lo_set));
        lo_single = lo_set.size() == 1 && lo_set[0].first == lo_set[0].second;
      } else {
        ASSIGN_OR_RETURN(const char32_t cp, ParseUtf8());
        lo_set = {{cp, cp}};
      }
      if (lo_single && Peek() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
        ++pos_;
        std::vector<CodePointRange> hi_set;
        if (Peek() == '\\') {
          RETURN_IF_ERROR(ParseEscape(/*in_class=*/true, &hi_set));
          if (hi_set.size() != 1 || hi_set[0].first != hi_set[0].second) {
            return Error("a class escape cannot end a range");
          }
        } else {
          ASSIGN_OR_RETURN(const char32_t cp, ParseUtf8());
          hi_set = {{cp, cp}};
        }
        if (hi_set[0].first < lo_set[0].first) return Error("class range out of order");
        ranges.push_back({lo_set[0].first, hi_set[0].first});
      } else {
        ranges.insert(ranges.end(), lo_set.begin(), lo_set.end());
      }
    }
    if (AtEnd()) return Error("unterminated character class");
    ++pos_;  // ]
    return RegexNode::Class(NormalizeRanges(std::move(ranges), negate));
  }

  // Parses an escape at pos_ (a backslash) into the code points it matches.
  Status ParseEscape(bool in_class, std::vector<CodePointRange>* out) {
    if (pos_ + 1 >= src_.size()) return Error("trailing backslash");
    const char e = src_[pos_ + 1];
    pos_ += 2;
    auto single = [&](char32_t cp) {
      out->push_back({cp, cp});
      return OkStatus();
    };
    switch (e) {
      case 'd':
        *out = kDigit;
        return OkStatus();
      case 'D':
        *out = NormalizeRanges(kDigit, true);
        return OkStatus();
      case 'w':
        *out = kWord;
        return OkStatus();
      case 'W':
        *out = NormalizeRanges(kWord, true);
        return OkStatus();
      case 's':
        *out = kSpace;
        return OkStatus();
      case 'S':
        *out = NormalizeRanges(kSpace, true);
        return OkStatus();
      case 'n':
        return single('\n');
      case 'r':
        return single('\r');
      case 't':
        return single('\t');
      case 'f':
        return single('\f');
      case 'v':
        return single('\v');
      case '0':
        if (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
          pos_ -= 2;
          return Error("octal escapes (\\0 followed by a digit) are not supported");
        }
        return single(0);
      case 'b':
        if (in_class) return single('\b');
        pos_ -= 2;
        return Error("word boundary \\b is not supported");
      case 'B':
        pos_ -= 2;
        return Error("word boundary \\B is not supported");
      case 'x':
      case 'u': {
        const int digits = e == 'x' ? 2 : 4;
        char32_t v = 0;
        for (int i = 0; i < digits; ++i) {
          const int h = AtEnd() ? -1 : HexValue(src_[pos_]);
          if (h < 0)
            return Error(std::string("\\") + e + " needs " + std::to_string(digits) +
                         " hex digits");
          v = v * 16 + static_cast<char32_t>(h);
          ++pos_;
        }
        // \uD83D\uDE00: a surrogate pair is the one code point it encodes (U+1F600), as in
        // ECMAScript's unicode mode; a lone surrogate stays one (no UTF-8 text holds it).
        if (e == 'u' && v >= 0xD800 && v <= 0xDBFF) {
          const char32_t low = LowSurrogateAt(pos_);
          if (low != 0) {
            v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
            pos_ += 6;
          }
        }
        return single(v);
      }
      case 'k':
        pos_ -= 2;
        return Error("backreferences (\\k<name>) are not supported");
      case 'c':
        pos_ -= 2;
        return Error("control escapes \\cX are not supported");
      case 'p':
      case 'P':
        pos_ -= 2;
        return Error("Unicode property escapes \\p{...} are not supported");
      default:
        break;
    }
    if (e >= '1' && e <= '9') {
      pos_ -= 2;
      return Error("backreferences (\\1 ...) are not supported");
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
      pos_ -= 2;
      return Error(std::string("unknown escape \\") + e);
    }
    --pos_;  // an escaped punctuation character or UTF-8 sequence: itself
    ASSIGN_OR_RETURN(const char32_t cp, ParseUtf8());
    return single(cp);
  }

  // The low surrogate of a `\uXXXX` escape at `p` (U+DC00-U+DFFF), else 0.
  char32_t LowSurrogateAt(size_t p) const {
    if (src_.substr(p, 2) != "\\u" || p + 6 > src_.size()) return 0;
    char32_t v = 0;
    for (size_t i = p + 2; i < p + 6; ++i) {
      const int h = HexValue(src_[i]);
      if (h < 0) return 0;
      v = v * 16 + static_cast<char32_t>(h);
    }
    return v >= 0xDC00 && v <= 0xDFFF ? v : 0;
  }

  StatusOr<char32_t> ParseUtf8() {
    const int32_t cp = DecodeUtf8At(src_, &pos_);
    if (cp < 0) return Error("invalid UTF-8");
    return static_cast<char32_t>(cp);
  }

  std::string_view src_;
  size_t pos_ = 0;
};

std::string CanonicalJsonEscape(char32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      std::string s = "\\u00";
      s.push_back(kHex[cp >> 4]);
      s.push_back(kHex[cp & 15]);
      return s;
    }
  }
}

GrammarElement JsonCharClass(const std::vector<CodePointRange>& ranges, Grammar* g) {
  std::vector<CodePointRange> plain;
  std::vector<char32_t> escaped;
  for (const CodePointRange& r : NormalizeRanges(ranges, false)) {
    char32_t lo = r.first;
    for (char32_t cp = r.first; cp <= r.second && cp < 0x80; ++cp) {
      if (cp < 0x20 || cp == '"' || cp == '\\') {
        if (cp > lo) plain.push_back({lo, cp - 1});
        escaped.push_back(cp);
        lo = cp + 1;
      }
    }
    if (lo <= r.second) plain.push_back({lo, r.second});
  }
  if (escaped.empty()) return g->CodePointClass(plain, false);
  std::vector<GrammarSequence> alts;
  if (!plain.empty()) alts.push_back({g->CodePointClass(plain, false)});
  for (char32_t cp : escaped) {
    GrammarSequence s;
    Grammar::AppendLiteral(CanonicalJsonEscape(cp), &s);
    alts.push_back(std::move(s));
  }
  return g->Group(std::move(alts), "json-char");
}

class RegexEmitter {
 public:
  RegexEmitter(RegexTarget target, Grammar* g) : target_(target), g_(g) {}

  void Emit(const RegexNode& n, GrammarSequence* out) {
    switch (n.kind) {
      case RegexNode::Kind::kClass:
        out->push_back(EmitClass(n.ranges));
        return;
      case RegexNode::Kind::kConcat:
        for (const RegexNode& c : n.children) Emit(c, out);
        return;
      case RegexNode::Kind::kAlt: {
        std::vector<GrammarSequence> alts;
        for (const RegexNode& c : n.children) {
          GrammarSequence s;
          Emit(c, &s);
          alts.push_back(std::move(s));
        }
        out->push_back(g_->Group(std::move(alts), "regex-alt"));
        return;
      }
      case RegexNode::Kind::kRepeat: {
        GrammarSequence body;
        Emit(n.children[0], &body);
        for (GrammarElement& e : g_->Repeat(std::move(body), n.min_count, n.max_count, "regex")) {
          out->push_back(e);
        }
        return;
      }
    }
  }

 private:
  GrammarElement EmitClass(const std::vector<CodePointRange>& ranges) {
    if (target_ == RegexTarget::kRaw) return g_->CodePointClass(ranges, false);
    std::string key;
    for (const auto& r : ranges)
      key += std::to_string(r.first) + "-" + std::to_string(r.second) + ",";
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
    const GrammarElement e = JsonCharClass(ranges, g_);
    memo_[key] = e;
    return e;
  }

  RegexTarget target_;
  Grammar* g_;
  std::map<std::string, GrammarElement> memo_;
};

}  // namespace

GrammarElement JsonStringCharClass(const std::vector<CodePointRange>& ranges, Grammar* grammar) {
  return JsonCharClass(ranges, grammar);
}

std::string JsonEscape(char32_t cp) { return CanonicalJsonEscape(cp); }

StatusOr<GrammarSequence> LowerRegex(std::string_view pattern, RegexTarget target,
                                     Grammar* grammar) {
  ASSIGN_OR_RETURN(const RegexNode ast, RegexParser(pattern).Parse());
  GrammarSequence seq;
  RegexEmitter(target, grammar).Emit(ast, &seq);
  return seq;
}

std::string AnchorWholeMatch(std::string p) {
  // Each top-level alternative (split at `|` outside groups, classes and escapes) loses its
  // leading `^` and unescaped trailing `$`: under a whole match they say nothing, and the parser
  // takes anchors only at the top level.
  std::string out = "^(?:";
  std::string alt;
  bool ends_with_anchor = false;
  auto flush = [&] {
    if (ends_with_anchor) alt.pop_back();
    out += alt;
    alt.clear();
    ends_with_anchor = false;
  };
  int depth = 0;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    const bool top = depth == 0 && !in_class;
    if (top && c == '|') {
      flush();
      out += '|';
      continue;
    }
    ends_with_anchor = false;
    if (c == '\\' && i + 1 < p.size()) {
      alt += c;
      alt += p[++i];
      continue;
    }
    if (top && c == '^' && alt.empty()) continue;
    if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    }
    ends_with_anchor = top && c == '$';
    alt += c;
  }
  flush();
  return out + ")$";
}

StatusOr<Grammar> CompileRegex(std::string_view pattern) {
  Grammar g;
  const int32_t root = g.AddRule("root");
  ASSIGN_OR_RETURN(GrammarSequence seq, LowerRegex(pattern, RegexTarget::kRaw, &g));
  g.AddAlternative(root, std::move(seq));
  g.set_root(root);
  RETURN_IF_ERROR(g.Validate());
  return g;
}

}  // namespace loom
