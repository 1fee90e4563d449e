// Methods of str, dict and list values (`s.strip()`, `d.get(k)`, ...), as the jinja2 sandbox
// exposes them: methods that mutate a list or dict are unsafe and fail when called.
#include <algorithm>
#include <cctype>

#include "tokenizer/chat_template/builtins.h"
#include "tokenizer/chat_template/error.h"
#include "tokenizer/chat_template/interpreter.h"

namespace loom::chat_template {
namespace {

bool IsPySpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '\x1c' ||
         c == '\x1d' || c == '\x1e' || c == '\x1f';
}

using Method = Value (*)(Interpreter&, const Value& self, CallArgs& args);

Value Bind(const Value& self, std::string name, Method m) {
  return Value::MakeCallable(std::move(name),
                             [self, m](Interpreter& in, CallArgs& a) { return m(in, self, a); });
}

Value StrList(std::vector<std::string> parts) {
  Array out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::String(std::move(p)));
  return Value::MakeArray(std::move(out));
}

bool MatchAffix(const Value& self, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) ThrowRuntime("startswith/endswith first arg must be str or a tuple of str");
    const std::string& s = self.str();
    const std::string& x = a.str();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_array()) {
    return std::any_of(affix.array().begin(), affix.array().end(), one);
  }
  return one(affix);
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` between every character (bytes suffice for ASCII)
    const std::vector<size_t> offs = Utf8Offsets(s);
    int64_t n = 0;
    for (size_t i = 0; i + 1 < offs.size(); ++i) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      out.append(s, offs[i], offs[i + 1] - offs[i]);
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

// str.format with {} / {0} / {name} fields (format specs are not supported).
std::string StrFormat(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out.push_back('}');
      ++i;
    } else if (c == '{') {
      const size_t close = fmt.find('}', i);
      if (close == std::string::npos) ThrowRuntime("Single '{' encountered in format string");
      const std::string field = fmt.substr(i + 1, close - i - 1);
      if (field.find(':') != std::string::npos || field.find('!') != std::string::npos) {
        ThrowRuntime("str.format: format specs and conversions are not supported");
      }
      const Value* v = nullptr;
      if (field.empty()) {
        v = FindArg(args, auto_idx++, "");
      } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
        v = FindArg(args, std::stoul(field), "");
      } else {
        v = FindArg(args, SIZE_MAX, field);
      }
      if (v == nullptr) ThrowRuntime("str.format: no argument for field '{" + field + "}'");
      out += ToPyStr(*v);
      i = close;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

int64_t FindSub(const std::string& s, const std::string& sub, bool reverse) {
  const size_t hit = reverse ? s.rfind(sub) : s.find(sub);
  if (hit == std::string::npos) return -1;
  return static_cast<int64_t>(Utf8Length(std::string_view(s).substr(0, hit)));
}

Value StrMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& a) {
  const std::string& s = self.str();
  if (name == "strip")
    return Value::String(PyStrip(s, ArgOr(a, 0, "chars", Value::None()), true, true));
  if (name == "lstrip")
    return Value::String(PyStrip(s, ArgOr(a, 0, "chars", Value::None()), true, false));
  if (name == "rstrip")
    return Value::String(PyStrip(s, ArgOr(a, 0, "chars", Value::None()), false, true));
  if (name == "split" || name == "rsplit") {
    const Value max = ArgOr(a, 1, "maxsplit", Value::Int(-1));
    if (name == "rsplit" && max.as_int() >= 0)
      ThrowRuntime("rsplit with maxsplit is not supported");
    return StrList(PySplit(s, ArgOr(a, 0, "sep", Value::None()), max.as_int()));
  }
  if (name == "splitlines") return StrList(PySplitLines(s));
  if (name == "startswith") return Value::Bool(MatchAffix(self, ArgOr(a, 0, "prefix", {}), true));
  if (name == "endswith") return Value::Bool(MatchAffix(self, ArgOr(a, 0, "suffix", {}), false));
  if (name == "replace") {
    const std::string out = Replace(s, StrArg(a, 0, "old"), StrArg(a, 1, "new"),
                                    ArgOr(a, 2, "count", Value::Int(-1)).as_int());
    in.CheckSize(out.size());
    return Value::String(out);
  }
  if (name == "upper") return Value::String(AsciiUpper(s));
  if (name == "lower") return Value::String(AsciiLower(s));
  if (name == "title") return Value::String(PyTitle(s));
  if (name == "capitalize") return Value::String(PyCapitalize(s));
  if (name == "find") return Value::Int(FindSub(s, StrArg(a, 0, "sub"), false));
  if (name == "rfind") return Value::Int(FindSub(s, StrArg(a, 0, "sub"), true));
  if (name == "index") {
    const int64_t i = FindSub(s, StrArg(a, 0, "sub"), false);
    if (i < 0) ThrowRuntime("substring not found");
    return Value::Int(i);
  }
  if (name == "count") {
    const std::string sub = StrArg(a, 0, "sub");
    if (sub.empty()) return Value::Int(static_cast<int64_t>(Utf8Length(s) + 1));
    int64_t n = 0;
    for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
    return Value::Int(n);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Value& v : Iterate(ArgOr(a, 0, "iterable", {}))) {
      if (!v.is_string())
        ThrowRuntime("sequence item: expected str instance, " + std::string(v.TypeName()) +
                     " found");
      if (!first) out += s;
      first = false;
      out += v.str();
    }
    return Value::String(std::move(out));
  }
  if (name == "format") return Value::String(StrFormat(s, a));
  auto all_of = [&](int (*pred)(int)) {
    return Value::Bool(!s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
      return pred(static_cast<unsigned char>(c)) != 0;
    }));
  };
  if (name == "isdigit") return all_of(::isdigit);
  if (name == "isalpha") return all_of(::isalpha);
  if (name == "isalnum") return all_of(::isalnum);
  if (name == "isspace") return all_of(::isspace);
  if (name == "isupper") return Value::Bool(AsciiUpper(s) == s && AsciiLower(s) != s);
  if (name == "islower") return Value::Bool(AsciiLower(s) == s && AsciiUpper(s) != s);
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string x = StrArg(a, 0, "affix");
    const bool pre = name == "removeprefix";
    if (MatchAffix(self, Value::String(x), pre)) {
      return Value::String(pre ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
    }
    return self;
  }
  if (name == "partition" || name == "rpartition") {
    const std::string sep = StrArg(a, 0, "sep");
    if (sep.empty()) ThrowRuntime("empty separator");
    const size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
    Array parts;
    if (hit == std::string::npos) {
      parts = name == "partition" ? Array{Value::String(s), Value::String(""), Value::String("")}
                                  : Array{Value::String(""), Value::String(""), Value::String(s)};
    } else {
      parts = {Value::String(s.substr(0, hit)), Value::String(sep),
               Value::String(s.substr(hit + sep.size()))};
    }
    return Value::MakeTuple(std::move(parts));
  }
  if (name == "zfill" || name == "center" || name == "ljust" || name == "rjust") {
    const int64_t width = ArgOr(a, 0, "width", Value::Int(0)).as_int();
    const std::string fill = name == "zfill" ? "0" : StrArg(a, 1, "fillchar", " ");
    const int64_t len = static_cast<int64_t>(Utf8Length(s));
    if (width <= len) return self;
    in.CheckSize(static_cast<size_t>(width));
    const auto pad = static_cast<size_t>(width - len);
    auto rep = [&](size_t n) {
      std::string r;
      for (size_t i = 0; i < n; ++i) r += fill;
      return r;
    };
    if (name == "ljust") return Value::String(s + rep(pad));
    if (name == "rjust") return Value::String(rep(pad) + s);
    if (name == "zfill") {
      if (!s.empty() && (s[0] == '-' || s[0] == '+'))
        return Value::String(s.substr(0, 1) + rep(pad) + s.substr(1));
      return Value::String(rep(pad) + s);
    }
    const size_t left = pad / 2 + (pad & static_cast<size_t>(width) & 1);
    return Value::String(rep(left) + s + rep(pad - left));
  }
  ThrowRuntime("str has no method '" + std::string(name) + "'");
}

constexpr std::string_view kStrMethods[] = {
    "strip",      "lstrip",  "rstrip",  "split",   "rsplit",       "splitlines",   "startswith",
    "endswith",   "replace", "upper",   "lower",   "title",        "capitalize",   "find",
    "rfind",      "index",   "count",   "join",    "format",       "isdigit",      "isalpha",
    "isalnum",    "isspace", "isupper", "islower", "removeprefix", "removesuffix", "partition",
    "rpartition", "zfill",   "center",  "ljust",   "rjust"};
constexpr std::string_view kUnsafeDict[] = {"pop", "popitem", "update", "setdefault", "clear"};
constexpr std::string_view kUnsafeList[] = {"append", "extend",  "insert", "pop",
                                            "remove", "reverse", "sort",   "clear"};

template <size_t N>
bool In(std::string_view name, const std::string_view (&set)[N]) {
  return std::find(std::begin(set), std::end(set), name) != std::end(set);
}

Value Unsafe(std::string_view name, std::string_view type) {
  const std::string msg = "access to attribute '" + std::string(name) + "' of '" +
                          std::string(type) + "' object is unsafe.";
  return Value::MakeCallable(std::string(name),
                             [msg](Interpreter&, CallArgs&) -> Value { ThrowRuntime(msg); });
}

}  // namespace

Value GetMethod(const Value& self, std::string_view name) {
  if (self.is_string()) {
    if (!In(name, kStrMethods)) return Value::Undefined();
    const std::string n(name);
    return Value::MakeCallable(
        "str." + n, [self, n](Interpreter& in, CallArgs& a) { return StrMethod(in, self, n, a); });
  }
  if (self.is_object() && !self.is_namespace()) {
    if (name == "get") {
      return Bind(self, "dict.get", [](Interpreter&, const Value& d, CallArgs& a) {
        const Value* key = FindArg(a, 0, "key");
        if (key == nullptr) ThrowRuntime("get expected at least 1 argument, got 0");
        const Value* v = d.object().Find(*key);
        return v ? *v : ArgOr(a, 1, "default", Value::None());
      });
    }
    if (name == "items" || name == "keys" || name == "values") {
      const int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
      return Value::MakeCallable(
          "dict." + std::string(name), [self, which](Interpreter&, CallArgs&) {
            Array out;
            for (const auto& [k, v] : self.object().items) {
              out.push_back(which == 0 ? Value::MakeTuple({k, v}) : which == 1 ? k : v);
            }
            return Value::MakeArray(std::move(out));
          });
    }
    if (name == "copy") {
      return Bind(self, "dict.copy", [](Interpreter&, const Value& d, CallArgs&) {
        return Value::MakeObject(Object{d.object().items, false});
      });
    }
    if (In(name, kUnsafeDict)) return Unsafe(name, "dict");
    return Value::Undefined();
  }
  if (self.is_array() && !self.is_generator()) {
    if (name == "index" || name == "count") {
      const bool index = name == "index";
      return Value::MakeCallable("list." + std::string(name),
                                 [self, index](Interpreter&, CallArgs& a) {
                                   const Value x = ArgOr(a, 0, "value", {});
                                   int64_t n = 0;
                                   for (size_t i = 0; i < self.array().size(); ++i) {
                                     if (!PyEquals(self.array()[i], x)) continue;
                                     if (index) return Value::Int(static_cast<int64_t>(i));
                                     ++n;
                                   }
                                   if (index) ThrowRuntime(ToPyRepr(x) + " is not in list");
                                   return Value::Int(n);
                                 });
    }
    if (name == "copy") {
      return Bind(self, "list.copy", [](Interpreter&, const Value& l, CallArgs&) {
        return Value::MakeArray(l.array());
      });
    }
    if (In(name, kUnsafeList)) return Unsafe(name, "list");
  }
  return Value::Undefined();
}

std::string PyStrip(std::string_view s, const Value& chars, bool left, bool right) {
  size_t b = 0;
  size_t e = s.size();
  if (chars.is_none() || chars.is_undefined()) {
    while (left && b < e && IsPySpace(s[b])) ++b;
    while (right && e > b && IsPySpace(s[e - 1])) --e;
  } else {
    if (!chars.is_string()) ThrowRuntime("strip arg must be None or str");
    const std::vector<size_t> offs = Utf8Offsets(chars.str());
    auto starts_with_any = [&](size_t at, bool from_end, size_t* len) {
      for (size_t i = 0; i + 1 < offs.size(); ++i) {
        const std::string_view c =
            std::string_view(chars.str()).substr(offs[i], offs[i + 1] - offs[i]);
        if (from_end ? (at >= b + c.size() && s.substr(at - c.size(), c.size()) == c)
                     : (at + c.size() <= e && s.substr(at, c.size()) == c)) {
          *len = c.size();
          return true;
        }
      }
      return false;
    };
    size_t len = 0;
    while (left && b < e && starts_with_any(b, false, &len)) b += len;
    while (right && e > b && starts_with_any(e, true, &len)) e -= len;
  }
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> PySplit(std::string_view s, const Value& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep.is_none() || sep.is_undefined()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && IsPySpace(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = s.size();
        while (e > i && IsPySpace(s[e - 1])) --e;
        out.emplace_back(s.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !IsPySpace(s[j])) ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  if (!sep.is_string()) ThrowRuntime("must be str or None, not " + std::string(sep.TypeName()));
  const std::string& d = sep.str();
  if (d.empty()) ThrowRuntime("empty separator");
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t hit = s.find(d, pos);
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::vector<std::string> PySplitLines(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t brk = 0;  // length of the line break at i
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\r') {
      brk = i + 1 < s.size() && s[i + 1] == '\n' ? 2 : 1;
    } else if (c == '\n' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e) {
      brk = 1;
    } else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) {
      brk = 2;
    } else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
                static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      brk = 3;
    }
    if (brk == 0) {
      ++i;
      continue;
    }
    out.emplace_back(s.substr(start, i - start));
    i += brk;
    start = i;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out(s);
  bool prev_cased = false;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
      prev_cased = true;
    } else {
      prev_cased = u >= 0x80 && prev_cased;  // keep words with non-ASCII letters together
    }
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out = AsciiLower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

}  // namespace loom::chat_template
