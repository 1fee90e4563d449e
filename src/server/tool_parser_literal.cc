// The formats whose arguments are literals of another syntax, converted to JSON as they stream
// (LiteralArgs, tool_parser_internal.h):
//   Gemma 4:          <|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>  (several
//                     possible; <|tool_response>, the turn's end after calls, is dropped)
//   Gemma 3 tool_code: ```tool_code\nNAME(key="text", n=3)\nNAME2()\n```  (one call a line;
//                     print(NAME(...)) as the model sometimes writes it, too)
#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/tool_parser_internal.h"

namespace loom::tool_parser_internal {

using nlohmann::json;

namespace {

constexpr size_t kMaxNameBytes = 256;  // longer names, keys and scalars are not markup

constexpr std::string_view kGemmaQuote = "<|\"|>";
constexpr std::string_view kGemmaCallOpen = "<|tool_call>";
constexpr std::string_view kGemmaCallClose = "<tool_call|>";
constexpr std::string_view kGemmaCallPrefix = "call:";
constexpr std::string_view kGemmaToolResponse = "<|tool_response>";
constexpr std::string_view kToolCodeOpen = "```tool_code";
constexpr std::string_view kFence = "```";

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// A bare key or scalar: up to whitespace or punctuation.
bool IsBareChar(char c) {
  return !IsSpace(c) && std::string_view(":=,{}[]()<>'\"").find(c) == std::string_view::npos;
}

bool IsIdentChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// A bare scalar's JSON: true / false / null (Python's spellings too), a number (Python's
// 1_000, 1., .5, +2 too), else the word as a string.
std::string ScalarJson(std::string_view t) {
  if (t == "true" || t == "True") return "true";
  if (t == "false" || t == "False") return "false";
  if (t == "null" || t == "None") return "null";
  std::string num;
  for (const char c : t) {
    if (c != '_') num += c;
  }
  if (num.starts_with('+')) num.erase(0, 1);
  const size_t digits = num.starts_with('-') ? 1 : 0;
  if (num.size() > digits && num[digits] == '.') num.insert(digits, "0");
  if (num.ends_with('.')) num += '0';
  const json v = json::parse(num, nullptr, /*allow_exceptions=*/false);
  if (v.is_number()) return num;
  return JsonQuote(t);
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

size_t LiteralArgs::OpenString(char c, bool key, std::string* emit) {
  *emit += '"';
  quote_ = c;
  string_key_ = key;
  state_ = State::kString;
  return dialect_ == Dialect::kPython ? 1 : kGemmaQuote.size();
}

size_t LiteralArgs::PythonEscape(std::string_view s, bool eof, std::string* out) {
  if (s.size() < 2) return eof ? s.size() : 0;  // at the end: a lone backslash is dropped
  const char c = s[1];
  switch (c) {
    case 'n':
      *out += '\n';
      return 2;
    case 't':
      *out += '\t';
      return 2;
    case 'r':
      *out += '\r';
      return 2;
    case 'b':
      *out += '\b';
      return 2;
    case 'f':
      *out += '\f';
      return 2;
    case '0':
      *out += '\0';
      return 2;
    case '\\':
    case '\'':
    case '"':
      *out += c;
      return 2;
    case '\n':  // a line continuation
      return 2;
    case 'x':
    case 'u':
    case 'U': {
      const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
      uint32_t cp = 0;
      for (size_t i = 0; i < n; ++i) {
        if (2 + i >= s.size()) {
          if (!eof) return 0;
          *out += s.substr(0, 2 + i);  // cut short: as written
          return 2 + i;
        }
        const int h = HexValue(s[2 + i]);
        if (h < 0) {  // not an escape after all: as written
          *out += s.substr(0, 2 + i);
          return 2 + i;
        }
        cp = cp * 16 + static_cast<uint32_t>(h);
      }
      AppendUtf8(cp, out);
      return 2 + n;
    }
    default:  // Python keeps an unknown escape as written
      *out += s.substr(0, 2);
      return 2;
  }
}

void LiteralArgs::Close(std::string* emit) {
  *emit += stack_.back().sep != 0 ? '}' : ']';
  stack_.pop_back();
  state_ = stack_.empty() ? State::kDone : State::kAfterValue;
}

JsonValueScanner::Result LiteralArgs::Feed(std::string_view s, bool eof, size_t* consumed,
                                           std::string* emit) {
  using Result = JsonValueScanner::Result;
  const bool python = dialect_ == Dialect::kPython;
  size_t i = 0;
  auto result = [&](Result r) {
    *consumed = i;
    return r;
  };
  while (true) {
    if (state_ == State::kDone) return result(Result::kDone);
    if (state_ == State::kString) {
      if (!python) {
        const std::string_view r = s.substr(i);
        const size_t end = r.find(kGemmaQuote);
        if (end != std::string_view::npos) {
          *emit += JsonEscape(r.substr(0, end));
          *emit += '"';
          i += end + kGemmaQuote.size();
          state_ = string_key_ ? State::kSep : State::kAfterValue;
          continue;
        }
        const std::string_view markers[] = {kGemmaQuote};
        const size_t keep = eof ? 0 : PartialMarkerAtEnd(r, markers);
        *emit += JsonEscape(r.substr(0, r.size() - keep));
        i = s.size() - keep;
        return result(Result::kMore);
      }
      std::string text;
      while (i < s.size() && s[i] != quote_) {
        if (s[i] == '\n') {  // a one-line string does not span lines
          *emit += JsonEscape(text);
          return result(Result::kBad);
        }
        if (s[i] == '\\') {
          const size_t n = PythonEscape(s.substr(i), eof, &text);
          if (n == 0) break;
          i += n;
        } else {
          text += s[i++];
        }
      }
      *emit += JsonEscape(text);
      if (i < s.size() && s[i] == quote_) {
        *emit += '"';
        ++i;
        state_ = string_key_ ? State::kSep : State::kAfterValue;
        continue;
      }
      return result(Result::kMore);
    }
    while (i < s.size() && IsSpace(s[i])) ++i;
    if (i == s.size()) return result(Result::kMore);
    const std::string_view r = s.substr(i);
    const char c = r[0];
    switch (state_) {
      case State::kOpen:
        if (c != (python ? '(' : '{')) return result(Result::kBad);
        stack_.push_back({python ? ')' : '}', python ? '=' : ':'});
        *emit += '{';
        ++i;
        state_ = State::kKeyOrClose;
        break;
      case State::kKeyOrClose: {
        if (c == stack_.back().close) {
          Close(emit);
          ++i;
          break;
        }
        const bool top_python = python && stack_.size() == 1;  // keyword arguments
        const bool quoted =
            !top_python && ((python && (c == '\'' || c == '"')) || r.starts_with(kGemmaQuote));
        if (!quoted && !python && MayBecome(r, kGemmaQuote)) return result(Result::kMore);
        size_t n = 0;
        if (!quoted) {
          while (n < r.size() && IsBareChar(r[n])) ++n;
          if (n == 0 || n > kMaxNameBytes) return result(Result::kBad);
          if (n == r.size() && !eof) return result(Result::kMore);
          const std::string_view key = r.substr(0, n);
          if (top_python && !std::all_of(key.begin(), key.end(), IsIdentChar)) {
            return result(Result::kBad);
          }
        }
        if (stack_.back().count++ > 0) *emit += ", ";
        if (quoted) {
          i += OpenString(c, /*key=*/true, emit);
        } else {
          *emit += JsonQuote(r.substr(0, n));
          i += n;
          state_ = State::kSep;
        }
        break;
      }
      case State::kSep:
        if (c != stack_.back().sep) return result(Result::kBad);
        *emit += ": ";
        ++i;
        state_ = State::kValue;
        break;
      case State::kValueOrClose:
        if (c == stack_.back().close) {
          Close(emit);
          ++i;
          break;
        }
        state_ = State::kValue;
        break;
      case State::kValue: {
        const bool quoted = (python && (c == '\'' || c == '"')) || r.starts_with(kGemmaQuote);
        const bool container = c == '{' || c == '[' || (python && c == '(');
        if (!quoted && !container && !python && MayBecome(r, kGemmaQuote)) {
          return result(Result::kMore);
        }
        size_t n = 0;
        if (!quoted && !container) {
          while (n < r.size() && IsBareChar(r[n])) ++n;
          if (n == 0 || n > kMaxNameBytes) return result(Result::kBad);
          if (n == r.size() && !eof) return result(Result::kMore);
        }
        if (stack_.back().sep == 0 && stack_.back().count++ > 0) *emit += ", ";
        if (c == '{') {
          stack_.push_back({'}', ':'});
          *emit += '{';
          ++i;
          state_ = State::kKeyOrClose;
        } else if (container) {  // a list, or a Python tuple: an array
          stack_.push_back({c == '(' ? ')' : ']', 0});
          *emit += '[';
          ++i;
          state_ = State::kValueOrClose;
        } else if (quoted) {
          i += OpenString(c, /*key=*/false, emit);
        } else {
          *emit += ScalarJson(r.substr(0, n));
          i += n;
          state_ = State::kAfterValue;
        }
        break;
      }
      case State::kAfterValue:
        if (c == ',') {
          ++i;
          state_ = stack_.back().sep != 0 ? State::kKeyOrClose : State::kValueOrClose;
        } else if (c == stack_.back().close) {
          Close(emit);
          ++i;
        } else {
          return result(Result::kBad);
        }
        break;
      case State::kString:
      case State::kDone:
        break;
    }
  }
}

namespace {

// Gemma 4: <|tool_call>call:NAME{...}<tool_call|>, any number, content around them.
class Gemma4Parser final : public MarkupParser {
 private:
  enum class State { kText, kHead, kArgs, kClose };

  bool Step(bool eof) override {
    switch (state_) {
      case State::kText: {
        static constexpr std::string_view kMarkers[] = {kGemmaCallOpen, kGemmaToolResponse};
        const int m = ScanText(kMarkers, eof);
        if (m < 0) return false;
        if (m == 1) {  // the turn's end after calls (dropped then); content before any call
          if (calls_ > 0) {
            Consume(kGemmaToolResponse.size());
          } else {
            EmitText(kGemmaToolResponse);
            Consume(kGemmaToolResponse.size());
          }
          return true;
        }
        BeginTentative(kGemmaCallOpen.size());
        Consume(kGemmaCallOpen.size());
        state_ = State::kHead;
        return true;
      }
      case State::kHead: {  // call:NAME{
        const std::string_view r = Rest();
        if (!r.starts_with(kGemmaCallPrefix)) {
          if (!eof && MayBecome(r, kGemmaCallPrefix)) return false;
          Malformed();
          return true;
        }
        size_t n = kGemmaCallPrefix.size();
        while (n < r.size() && (IsIdentChar(r[n]) || r[n] == '-' || r[n] == '.')) ++n;
        const size_t len = n - kGemmaCallPrefix.size();
        if (len > kMaxNameBytes) {
          Malformed();
          return true;
        }
        if (n == r.size()) return false;  // at eof the tentative markup becomes text
        if (len == 0 || r[n] != '{') {
          Malformed();
          return true;
        }
        const std::string name(r.substr(kGemmaCallPrefix.size(), len));
        Consume(n);
        StartCall(name);
        ++calls_;
        args_ = LiteralArgs(LiteralArgs::Dialect::kGemma4);
        state_ = State::kArgs;
        return true;
      }
      case State::kArgs: {
        size_t n = 0;
        std::string emit;
        const JsonValueScanner::Result r = args_.Feed(Rest(), eof, &n, &emit);
        Consume(n);
        EmitArgs(emit);
        if (r == JsonValueScanner::Result::kBad) {
          Malformed();
          return true;
        }
        if (r == JsonValueScanner::Result::kDone) state_ = State::kClose;
        return r == JsonValueScanner::Result::kDone || n > 0;
      }
      case State::kClose: {
        if (!TakeMarker(*this, kGemmaCallClose, eof)) return false;
        EndCall();  // without <tool_call|> too: what follows is content
        state_ = State::kText;
        return true;
      }
    }
    return false;
  }
  void OnMalformed() override { state_ = State::kText; }

  State state_ = State::kText;
  LiteralArgs args_{LiteralArgs::Dialect::kGemma4};
  int calls_ = 0;
};

// Gemma 3's function-calling prompt: ```tool_code\nNAME(k=v, ...)\n...\n```, content around it.
class GemmaToolCodeParser final : public MarkupParser {
 private:
  enum class State { kText, kOpenLine, kLine, kName, kArgs, kAfterCall };

  bool Step(bool eof) override {
    switch (state_) {
      case State::kText: {
        static constexpr std::string_view kMarkers[] = {kToolCodeOpen};
        if (ScanText(kMarkers, eof) < 0) return false;
        BeginTentative(kToolCodeOpen.size());
        Consume(kToolCodeOpen.size());
        state_ = State::kOpenLine;
        return true;
      }
      case State::kOpenLine: {  // the rest of the fence's line: blank
        const std::string_view r = Rest();
        size_t n = 0;
        while (n < r.size() && (r[n] == ' ' || r[n] == '\t' || r[n] == '\r')) ++n;
        if (n == r.size()) return false;
        if (r[n] != '\n') {
          Malformed();
          return true;
        }
        Consume(n + 1);
        state_ = State::kLine;
        return true;
      }
      case State::kLine: {  // the next call, or the closing fence
        SkipWhitespace();
        const std::string_view r = Rest();
        if (r.empty()) return false;
        if (r.starts_with(kFence)) {
          if (tentative()) {  // a block without calls is content
            Malformed();
            return true;
          }
          Consume(kFence.size());
          EndCall();  // whitespace after the block is dropped
          state_ = State::kText;
          return true;
        }
        if (!eof && MayBecome(r, kFence)) return false;
        if (!tentative()) BeginTentative(0);  // a malformed next line is content
        state_ = State::kName;
        return true;
      }
      case State::kName:
        return StepName();
      case State::kArgs: {
        size_t n = 0;
        std::string emit;
        const JsonValueScanner::Result r = args_.Feed(Rest(), eof, &n, &emit);
        Consume(n);
        EmitArgs(emit);
        if (r == JsonValueScanner::Result::kBad) {
          Malformed();
          return true;
        }
        if (r == JsonValueScanner::Result::kDone) state_ = State::kAfterCall;
        return r == JsonValueScanner::Result::kDone || n > 0;
      }
      case State::kAfterCall: {  // print(...)'s parenthesis
        if (printed_) {
          const std::optional<bool> close = TakeMarker(*this, ")", eof);
          if (!close) return false;
          if (!*close) {
            Malformed();
            return true;
          }
        }
        EndCall();
        state_ = State::kLine;
        return true;
      }
    }
    return false;
  }

  // NAME( or print(NAME( followed by a keyword argument or ')': the call starts. While more
  // input is needed, false (at the end the tentative markup becomes text).
  bool StepName() {
    const std::string_view r = Rest();
    auto ident = [&](size_t at) {
      size_t n = at;
      while (n < r.size() && (IsIdentChar(r[n]) || r[n] == '.')) ++n;
      return n - at;
    };
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    size_t at = 0;
    size_t len = ident(0);
    if (len == r.size()) {
      if (len <= kMaxNameBytes) return false;
      Malformed();
      return true;
    }
    bool printed = false;
    if (r.substr(0, len) == "print" && r[len] == '(') {
      const size_t inner = ident(len + 1);
      if (len + 1 + inner == r.size()) return false;
      if (inner > 0 && r[len + 1 + inner] == '(') {
        printed = true;
        at = len + 1;
        len = inner;
      }
    }
    const size_t open = at + len;
    if (len == 0 || len > kMaxNameBytes || digit(r[at]) || r[open] != '(') {
      Malformed();
      return true;
    }
    // What follows '(' must be ')' or IDENT= (positional arguments have no names).
    size_t q = open + 1;
    while (q < r.size() && IsSpace(r[q])) ++q;
    if (q == r.size()) return false;
    if (r[q] != ')') {
      size_t k = q;
      while (k < r.size() && IsIdentChar(r[k])) ++k;
      if (k == r.size()) return false;
      if (k == q || digit(r[q])) {
        Malformed();
        return true;
      }
      while (k < r.size() && (r[k] == ' ' || r[k] == '\t')) ++k;
      if (k == r.size()) return false;
      if (r[k] != '=') {
        Malformed();
        return true;
      }
      if (k + 1 == r.size()) return false;
      if (r[k + 1] == '=') {  // a comparison
        Malformed();
        return true;
      }
    }
    const std::string name(r.substr(at, len));
    Consume(open);
    StartCall(name);
    printed_ = printed;
    args_ = LiteralArgs(LiteralArgs::Dialect::kPython);
    state_ = State::kArgs;
    return true;
  }

  void OnMalformed() override { state_ = State::kText; }

  State state_ = State::kText;
  LiteralArgs args_{LiteralArgs::Dialect::kPython};
  bool printed_ = false;
};

}  // namespace

std::unique_ptr<ToolCallParser> MakeGemma4Parser() { return std::make_unique<Gemma4Parser>(); }
std::unique_ptr<ToolCallParser> MakeGemmaToolCodeParser() {
  return std::make_unique<GemmaToolCodeParser>();
}

}  // namespace loom::tool_parser_internal
