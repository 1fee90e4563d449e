#include "grammar/gbnf.h"

#include <string>
#include <unordered_map>

#include "base/utf8.h"

namespace loom {
namespace {

constexpr int64_t kMaxRepeat = 10000;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view src) : src_(src) {}
  GbnfParser(std::string_view src, Grammar base,
             const std::vector<std::pair<std::string, int32_t>>& externals)
      : src_(src), grammar_(std::move(base)) {
    for (const auto& [name, idx] : externals) rules_[name] = idx;
  }

  StatusOr<Grammar> Parse() {
    SkipSpace();
    if (pos_ == src_.size()) return Error("empty grammar (expected `root ::= ...`)");
    while (pos_ < src_.size()) RETURN_IF_ERROR(ParseRule());
    const auto root = rules_.find("root");
    if (root == rules_.end() || !grammar_.rule(root->second).defined) {
      return InvalidArgumentError("GBNF: no rule named \"root\"");
    }
    grammar_.set_root(root->second);
    for (const auto& [name, idx] : rules_) {
      if (!grammar_.rule(idx).defined) {
        return InvalidArgumentError("GBNF: rule \"" + name + "\" is used but not defined");
      }
    }
    RETURN_IF_ERROR(grammar_.Validate().WithContext("GBNF"));
    return std::move(grammar_);
  }

 private:
  Status Error(std::string_view what) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return InvalidArgumentError("GBNF line " + std::to_string(line) + ", column " +
                                std::to_string(col) + ": " + std::string(what));
  }

  bool AtEnd() const { return pos_ >= src_.size(); }
  char Peek() const { return AtEnd() ? '\0' : src_[pos_]; }

  void SkipSpace() {
    while (!AtEnd()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && src_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  // An identifier followed by `::=` starts here.
  bool AtRuleStart() const {
    size_t p = pos_;
    while (p < src_.size() && IsNameChar(src_[p])) ++p;
    if (p == pos_) return false;
    while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t')) ++p;
    return src_.substr(p, 3) == "::=";
  }

  std::string ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(src_[pos_])) ++pos_;
    return std::string(src_.substr(start, pos_ - start));
  }

  int32_t RuleFor(const std::string& name) {
    const auto it = rules_.find(name);
    if (it != rules_.end()) return it->second;
    const int32_t idx = grammar_.AddRule(name);
    rules_[name] = idx;
    return idx;
  }

  Status ParseRule() {
    if (!AtRuleStart()) return Error("expected a rule `name ::= ...`");
    const std::string name = ParseName();
    SkipSpace();
    pos_ += 3;  // ::=
    const int32_t idx = RuleFor(name);
    if (grammar_.rule(idx).defined) return Error("rule \"" + name + "\" is defined twice");
    std::vector<GrammarSequence> alts;
    RETURN_IF_ERROR(ParseAlternates(&alts, /*nested=*/false));
    for (auto& alt : alts) grammar_.AddAlternative(idx, std::move(alt));
    grammar_.MarkDefined(idx);
    return OkStatus();
  }

  Status ParseAlternates(std::vector<GrammarSequence>* alts, bool nested) {
    for (;;) {
      GrammarSequence seq;
      RETURN_IF_ERROR(ParseSequence(&seq, nested));
      alts->push_back(std::move(seq));
      SkipSpace();
      if (Peek() != '|') return OkStatus();
      ++pos_;
    }
  }

  Status ParseSequence(GrammarSequence* seq, bool nested) {
    for (;;) {
      SkipSpace();
      if (AtEnd() || Peek() == '|' || Peek() == ')') break;
      if (AtRuleStart()) {
        if (nested) return Error("unclosed group: a new rule starts before `)`");
        break;
      }
      const char c = Peek();
      if (c == '"') {
        ++pos_;
        GrammarSequence lit;
        while (!AtEnd() && Peek() != '"') {
          ASSIGN_OR_RETURN(const char32_t cp, ParseChar());
          std::string bytes;
          AppendUtf8(cp, &bytes);
          Grammar::AppendLiteral(bytes, &lit);
        }
        if (AtEnd()) return Error("unterminated string literal");
        ++pos_;
        if (lit.empty()) continue;  // "" matches the empty string
        // A quantifier applies to the whole literal.
        seq->push_back(lit.size() == 1 ? lit[0] : grammar_.Group({std::move(lit)}, "literal"));
      } else if (c == '[') {
        ++pos_;
        bool negate = false;
        if (Peek() == '^') {
          negate = true;
          ++pos_;
        }
        std::vector<CodePointRange> ranges;
        while (!AtEnd() && Peek() != ']') {
          ASSIGN_OR_RETURN(const char32_t lo, ParseChar());
          char32_t hi = lo;
          if (Peek() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
            ++pos_;
            ASSIGN_OR_RETURN(hi, ParseChar());
            if (hi < lo) return Error("character range is out of order");
          }
          ranges.push_back({lo, hi});
        }
        if (AtEnd()) return Error("unterminated character class");
        ++pos_;
        seq->push_back(grammar_.CodePointClass(std::move(ranges), negate));
      } else if (c == '.') {
        ++pos_;
        seq->push_back(grammar_.CodePointClass({{0, 0x10FFFF}}, false));
      } else if (c == '(') {
        ++pos_;
        std::vector<GrammarSequence> alts;
        RETURN_IF_ERROR(ParseAlternates(&alts, /*nested=*/true));
        SkipSpace();
        if (Peek() != ')') return Error("expected `)`");
        ++pos_;
        // Always a rule of its own, so that a quantifier applies to the whole group.
        const int32_t idx = grammar_.AddRule("group");
        for (auto& alt : alts) grammar_.AddAlternative(idx, std::move(alt));
        grammar_.MarkDefined(idx);
        seq->push_back(GrammarElement::Rule(idx));
      } else if (IsNameChar(c)) {
        seq->push_back(GrammarElement::Rule(RuleFor(ParseName())));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        return Error(std::string("quantifier `") + c + "` has nothing to repeat");
      } else {
        return Error(std::string("unexpected character `") + c + "`");
      }
      RETURN_IF_ERROR(ParseQuantifier(seq));
    }
    return OkStatus();
  }

  // Applies a quantifier following the last element of `seq`, if any.
  Status ParseQuantifier(GrammarSequence* seq) {
    const char c = Peek();
    int64_t lo = 0, hi = -1;
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_;
      lo = 1;
    } else if (c == '?') {
      ++pos_;
      hi = 1;
    } else if (c == '{') {
      ++pos_;
      ASSIGN_OR_RETURN(lo, ParseCount());
      hi = lo;
      if (Peek() == ',') {
        ++pos_;
        hi = -1;
        if (Peek() != '}') {
          ASSIGN_OR_RETURN(hi, ParseCount());
        }
      }
      if (Peek() != '}') return Error("expected `}` after a repetition count");
      ++pos_;
      if (hi >= 0 && hi < lo) return Error("repetition {m,n} has n < m");
    } else {
      return OkStatus();
    }
    const GrammarElement item = seq->back();
    seq->pop_back();
    for (GrammarElement& e : grammar_.Repeat({item}, lo, hi, "repeat")) seq->push_back(e);
    return OkStatus();
  }

  StatusOr<int64_t> ParseCount() {
    SkipSpace();
    const size_t start = pos_;
    int64_t v = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      ++pos_;
      if (v > kMaxRepeat) return Error("repetition count is larger than 10000");
    }
    if (pos_ == start) return Error("expected a repetition count");
    SkipSpace();
    return v;
  }

  // One code point of a literal or class: an escape or a UTF-8 sequence.
  StatusOr<char32_t> ParseChar() {
    const unsigned char c = static_cast<unsigned char>(src_[pos_]);
    if (c == '\\') {
      if (pos_ + 1 >= src_.size()) return Error("unterminated escape");
      const char e = src_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case 'n':
          return U'\n';
        case 'r':
          return U'\r';
        case 't':
          return U'\t';
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
          return static_cast<char32_t>(e);
        case 'x':
          return ParseHex(2);
        case 'u':
          return ParseHex(4);
        case 'U':
          return ParseHex(8);
        default:
          pos_ -= 2;
          return Error(std::string("unknown escape `\\") + e + "`");
      }
    }
    const int32_t cp = DecodeUtf8At(src_, &pos_);
    if (cp < 0) return Error("invalid UTF-8");
    return static_cast<char32_t>(cp);
  }

  StatusOr<char32_t> ParseHex(int digits) {
    char32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = pos_ < src_.size() ? HexValue(src_[pos_]) : -1;
      if (h < 0) return Error("expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + static_cast<char32_t>(h);
      ++pos_;
    }
    if (v > 0x10FFFF) return Error("code point past U+10FFFF");
    return v;
  }

  std::string_view src_;
  size_t pos_ = 0;
  Grammar grammar_;
  std::unordered_map<std::string, int32_t> rules_;  // GBNF name -> rule (helpers are not here)
};

}  // namespace

StatusOr<Grammar> CompileGbnf(std::string_view text) { return GbnfParser(text).Parse(); }

StatusOr<Grammar> CompileGbnf(std::string_view text, Grammar base,
                              const std::vector<std::pair<std::string, int32_t>>& externals) {
  return GbnfParser(text, std::move(base), externals).Parse();
}

}  // namespace loom
