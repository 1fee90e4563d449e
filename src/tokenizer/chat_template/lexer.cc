#include "tokenizer/chat_template/lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "base/utf8.h"

namespace loom::chat_template {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> Run() {
    size_t pos = 0;
    bool line_starting = true;  // jinja2: the previous match ended with '\n' (or start)
    while (pos < src_.size()) {
      const size_t tag = FindTagStart(pos);
      std::string text(src_.substr(pos, tag - pos));
      if (tag == src_.size()) {
        EmitText(std::move(text), pos);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (modifier == '-') {
        text.erase(std::find_if_not(text.rbegin(), text.rend(), IsSpace).base(), text.end());
      } else if (kind != '{' && modifier != '+') {
        // lstrip_blocks: strip [ \t]* between the last newline and the tag.
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            std::all_of(text.begin() + l_pos, text.end(), IsSpace)) {
          text.resize(l_pos);
        }
      }
      EmitText(std::move(text), pos);
      size_t inner = tag + 2 + (modifier == '-' || modifier == '+' ? 1 : 0);
      if (kind == '#') {
        pos = LexCommentEnd(tag, inner, &line_starting);
      } else if (kind == '%' && IsRawBlock(inner)) {
        pos = LexRaw(tag, inner, &line_starting);
      } else {
        pos = LexTag(tag, inner, kind == '%', &line_starting);
      }
    }
    tokens_.push_back(Token{Token::Type::kEof, "", 0, 0, PosOf(src_.size())});
    return std::move(tokens_);
  }

 private:
  SourcePos PosOf(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line_idx = static_cast<size_t>(it - line_starts_.begin()) - 1;
    return SourcePos{static_cast<int32_t>(line_idx + 1),
                     static_cast<int32_t>(offset - line_starts_[line_idx] + 1)};
  }

  [[noreturn]] void Fail(const std::string& msg, size_t offset) const {
    throw TemplateError(TemplateError::Kind::kSyntax, msg, PosOf(offset));
  }

  size_t FindTagStart(size_t pos) const {
    while (true) {
      const size_t p = src_.find('{', pos);
      if (p == std::string_view::npos || p + 1 >= src_.size()) return src_.size();
      const char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      pos = p + 1;
    }
  }

  void EmitText(std::string text, size_t offset) {
    if (text.empty()) return;
    if (!tokens_.empty() && tokens_.back().type == Token::Type::kText) {
      tokens_.back().text += text;
      return;
    }
    Token t;
    t.type = Token::Type::kText;
    t.text = std::move(text);
    t.pos = PosOf(offset);
    tokens_.push_back(std::move(t));
  }

  // Applies the closing tag's whitespace control after the tag ending at `end` (exclusive).
  // `strip` is "-", `plus` is "+"; trim_blocks applies to block and comment tags.
  size_t AfterTagEnd(size_t end, bool strip, bool plus, bool trim, bool* line_starting) {
    size_t p = end;
    if (strip) {
      while (p < src_.size() && IsSpace(src_[p])) ++p;
    } else if (trim && !plus && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    *line_starting = p > end && src_[p - 1] == '\n';
    return p;
  }

  size_t LexCommentEnd(size_t tag, size_t inner, bool* line_starting) {
    const size_t close = src_.find("#}", inner);
    if (close == std::string_view::npos) Fail("unterminated comment", tag);
    const bool strip = close > inner && src_[close - 1] == '-';
    const bool plus = close > inner && src_[close - 1] == '+';
    return AfterTagEnd(close + 2, strip, plus, /*trim=*/true, line_starting);
  }

  bool IsRawBlock(size_t inner) const {
    size_t p = inner;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && IsNameChar(src_[p + 3])))
      return false;
    p += 3;
    while (p < src_.size() && IsSpace(src_[p])) ++p;
    return src_.compare(p, 2, "%}") == 0 || src_.compare(p, 3, "-%}") == 0;
  }

  size_t LexRaw(size_t tag, size_t inner, bool* line_starting) {
    size_t p = src_.find("%}", inner);
    const bool open_strip = src_[p - 1] == '-';
    size_t body = AfterTagEnd(p + 2, open_strip, false, true, line_starting);
    size_t search = body;
    while (true) {
      const size_t start = src_.find("{%", search);
      if (start == std::string_view::npos) Fail("missing {% endraw %}", tag);
      size_t q = start + 2;
      const bool close_strip = q < src_.size() && src_[q] == '-';
      if (close_strip || (q < src_.size() && src_[q] == '+')) ++q;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") == 0) {
        q += 6;
        while (q < src_.size() && IsSpace(src_[q])) ++q;
        const bool end_strip = q < src_.size() && src_[q] == '-';
        if (end_strip) ++q;
        if (src_.compare(q, 2, "%}") != 0) Fail("malformed {% endraw %}", start);
        std::string text(src_.substr(body, start - body));
        if (close_strip) {
          text.erase(std::find_if_not(text.rbegin(), text.rend(), IsSpace).base(), text.end());
        }
        EmitText(std::move(text), body);
        return AfterTagEnd(q + 2, end_strip, false, true, line_starting);
      }
      search = start + 2;
    }
  }

  // Lexes the inside of {{ }} or {% %} starting at `inner`; returns the offset after the tag.
  size_t LexTag(size_t tag, size_t inner, bool is_block, bool* line_starting) {
    tokens_.push_back(
        Token{is_block ? Token::Type::kBlockBegin : Token::Type::kVarBegin, "", 0, 0, PosOf(tag)});
    const char close_char = is_block ? '%' : '}';
    int depth = 0;  // open ( [ {: a closing delimiter inside brackets is an operator
    size_t p = inner;
    while (true) {
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      if (p >= src_.size()) Fail(is_block ? "unterminated {% tag" : "unterminated {{ tag", tag);
      if (depth == 0) {
        const bool strip = src_[p] == '-' || src_[p] == '+';
        const size_t q = strip ? p + 1 : p;
        if (q + 1 < src_.size() && src_[q] == close_char && src_[q + 1] == '}') {
          tokens_.push_back(
              Token{is_block ? Token::Type::kBlockEnd : Token::Type::kVarEnd, "", 0, 0, PosOf(p)});
          return AfterTagEnd(q + 2, strip && src_[p] == '-', strip && src_[p] == '+', is_block,
                             line_starting);
        }
      }
      const char c = src_[p];
      Token t;
      t.pos = PosOf(p);
      if (IsNameStart(c)) {
        size_t e = p;
        while (e < src_.size() && IsNameChar(src_[e])) ++e;
        t.type = Token::Type::kName;
        t.text = std::string(src_.substr(p, e - p));
        p = e;
      } else if (IsDigit(c)) {
        p = LexNumber(p, &t);
      } else if (c == '\'' || c == '"') {
        p = LexString(p, &t);
      } else {
        static constexpr std::string_view kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
        t.type = Token::Type::kOp;
        for (std::string_view op : kTwo) {
          if (src_.compare(p, 2, op) == 0) t.text = std::string(op);
        }
        if (t.text.empty()) {
          if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos) {
            Fail(std::string("unexpected character '") + c + "' in tag", p);
          }
          t.text = std::string(1, c);
          if (c == '(' || c == '[' || c == '{') ++depth;
          if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        }
        p += t.text.size();
      }
      tokens_.push_back(std::move(t));
    }
  }

  size_t LexNumber(size_t p, Token* t) {
    size_t e = p;
    std::string digits;
    auto take_digits = [&] {
      while (e < src_.size() && (IsDigit(src_[e]) || (src_[e] == '_' && e > p))) {
        if (src_[e] != '_') digits.push_back(src_[e]);
        ++e;
      }
    };
    take_digits();
    bool is_float = false;
    // jinja2's float regex has (?<!\.): in `x.0.1` the digits after a dot are integers.
    const bool after_dot = p > 0 && src_[p - 1] == '.';
    if (!after_dot && e + 1 < src_.size() && src_[e] == '.' && IsDigit(src_[e + 1])) {
      is_float = true;
      digits.push_back('.');
      ++e;
      take_digits();
    }
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && IsDigit(src_[q])) {
        is_float = true;
        digits += std::string(src_.substr(e, q - e));
        e = q;
        take_digits();
      }
    }
    if (is_float) {
      t->type = Token::Type::kFloat;
      t->float_value = std::strtod(digits.c_str(), nullptr);
    } else {
      t->type = Token::Type::kInt;
      errno = 0;
      t->int_value = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) Fail("integer literal out of range", p);
    }
    return e;
  }

  size_t LexString(size_t p, Token* t) {
    const char quote = src_[p];
    size_t e = p + 1;
    std::string out;
    while (true) {
      if (e >= src_.size()) Fail("unterminated string literal", p);
      const char c = src_[e];
      if (c == quote) break;
      if (c != '\\') {
        out.push_back(c);
        ++e;
        continue;
      }
      if (e + 1 >= src_.size()) Fail("unterminated string literal", p);
      const char n = src_[e + 1];
      e += 2;
      switch (n) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case '0':
          out.push_back('\0');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case '\n':
          break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t len = n == 'x' ? 2 : n == 'u' ? 4 : 8;
          if (e + len > src_.size()) Fail("truncated \\" + std::string(1, n) + " escape", e - 2);
          const std::string hex(src_.substr(e, len));
          char* end = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (end != hex.c_str() + len || cp > 0x10FFFF) Fail("invalid escape in string", e - 2);
          AppendUtf8(static_cast<char32_t>(cp), &out);
          e += len;
          break;
        }
        default:
          out.push_back('\\');
          out.push_back(n);
      }
    }
    t->type = Token::Type::kString;
    t->text = std::move(out);
    return e + 1;
  }

  std::string_view src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Tokenize(std::string_view source) { return Lexer(source).Run(); }

}  // namespace loom::chat_template
