// jinja2's builtin filters (plus transformers' tojson), with jinja2 3.1 semantics.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>

#include "tokenizer/chat_template/builtins.h"
#include "tokenizer/chat_template/error.h"
#include "tokenizer/chat_template/interpreter.h"
#include "tokenizer/chat_template/parser.h"

namespace loom::chat_template {
namespace {

[[noreturn]] void FailUndefinedValue(const Value& u) {
  ThrowRuntime(u.str().empty() ? std::string("undefined value") : u.str());
}

int64_t IntArg(const CallArgs& a, size_t i, std::string_view name, int64_t def) {
  const Value* v = FindArg(a, i, name);
  if (v == nullptr) return def;
  if (!v->is_int() && !v->is_bool())
    ThrowRuntime("argument '" + std::string(name) + "' must be int");
  return v->as_int();
}

bool BoolArg(const CallArgs& a, size_t i, std::string_view name, bool def) {
  const Value* v = FindArg(a, i, name);
  return v ? v->Truthy() : def;
}

// environment.getattr for a dotted attribute path ("function.name", "0").
Value GetPath(Interpreter& in, const Value& obj, const std::string& path) {
  Value cur = obj;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    if (cur.is_undefined()) FailUndefinedValue(cur);
    if (numeric && cur.is_array() && !cur.is_generator()) {
      const size_t idx = std::stoul(part);
      cur = idx < cur.array().size() ? cur.array()[idx] : Value::Undefined();
    } else if (cur.is_object()) {
      const Value* v = cur.object().Find(std::string_view(part));
      if (v == nullptr) v = nullptr;
      cur = v ? *v : GetMethod(cur, part);
      if (cur.is_undefined())
        cur = Value::Undefined("'dict object' has no attribute '" + part + "'");
    } else {
      cur = GetMethod(cur, part);
    }
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

std::string IgnoreCaseKey(const Value& v) { return v.is_string() ? AsciiLower(v.str()) : ""; }

// Sort key comparison of jinja2's sort/dictsort/unique/min/max (case-insensitive by default).
bool KeyLess(const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is_string() && b.is_string()) return IgnoreCaseKey(a) < IgnoreCaseKey(b);
  return PyLess(a, b);
}

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(Utf8Length(v.str()));
    case Value::Kind::kArray:
      if (v.is_generator()) ThrowRuntime("object of type 'generator' has no len()");
      return static_cast<int64_t>(v.array().size());
    case Value::Kind::kObject:
      return static_cast<int64_t>(v.object().items.size());
    default:
      ThrowRuntime("object of type '" + std::string(v.TypeName()) + "' has no len()");
  }
}

// json.dumps(ensure_ascii=True): non-ASCII code points become \uXXXX (UTF-16 surrogate pairs
// above U+FFFF). JSON text holds non-ASCII only inside strings, so rewriting it is safe.
std::string AsciiEscapeJson(const std::string& s) {
  std::string out;
  const std::vector<size_t> offs = Utf8Offsets(s);
  for (size_t i = 0; i + 1 < offs.size(); ++i) {
    const size_t len = offs[i + 1] - offs[i];
    if (len == 1) {
      out.push_back(s[offs[i]]);
      continue;
    }
    const auto* p = reinterpret_cast<const unsigned char*>(s.data() + offs[i]);
    uint32_t cp = p[0] & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[k] & 0x3F);
    char buf[16];
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
      std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
    }
    out += buf;
  }
  return out;
}

// ----- filters -----

Value FAbs(Interpreter&, const Value& v, CallArgs&) {
  if (!v.is_number())
    ThrowRuntime("bad operand type for abs(): '" + std::string(v.TypeName()) + "'");
  return v.is_float() ? Value::Float(std::fabs(v.as_double())) : Value::Int(std::llabs(v.as_int()));
}
Value FAttr(Interpreter& in, const Value& v, CallArgs& a) {
  const std::string name = StrArg(a, 0, "name");
  if (v.is_undefined()) FailUndefinedValue(v);
  return GetMethod(v, name);
}
Value FCapitalize(Interpreter&, const Value& v, CallArgs&) {
  return Value::String(PyCapitalize(ToPyStr(v)));
}
Value FDefault(Interpreter&, const Value& v, CallArgs& a) {
  if (v.is_undefined() || (BoolArg(a, 1, "boolean", false) && !v.Truthy())) {
    return ArgOr(a, 0, "default_value", Value::String(""));
  }
  return v;
}
Value FDictsort(Interpreter&, const Value& v, CallArgs& a) {
  if (!v.is_object()) ThrowRuntime("dictsort: expected a mapping");
  const bool cs = BoolArg(a, 0, "case_sensitive", false);
  const std::string by = StrArg(a, 1, "by", "key");
  const bool reverse = BoolArg(a, 2, "reverse", false);
  if (by != "key" && by != "value")
    ThrowRuntime("You can only sort by either \"key\" or \"value\"");
  auto items = v.object().items;
  const int pos = by == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
    const Value& l = pos == 0 ? x.first : x.second;
    const Value& r = pos == 0 ? y.first : y.second;
    return reverse ? KeyLess(r, l, cs) : KeyLess(l, r, cs);
  });
  Array out;
  for (auto& [k, val] : items) out.push_back(Value::MakeTuple({k, val}));
  return Value::MakeArray(std::move(out));
}
Value FEscape(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_safe()) return v;
  return Value::String(HtmlEscape(ToPyStr(v)), true);
}
Value FFirst(Interpreter&, const Value& v, CallArgs&) {
  Array items = Iterate(v);
  return items.empty() ? Value::Undefined("No first item, sequence was empty.") : items.front();
}
Value FFloat(Interpreter&, const Value& v, CallArgs& a) {
  if (v.is_number()) return Value::Float(v.as_double());
  if (v.is_string()) {
    const std::string s = PyStrip(v.str(), Value::None(), true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value::Float(d);
  }
  return ArgOr(a, 0, "default", Value::Float(0.0));
}
Value FFormat(Interpreter& in, const Value& v, CallArgs& a) {
  if (!a.keyword.empty() && !a.positional.empty()) {
    ThrowRuntime("can't handle positional and keyword arguments at the same time");
  }
  Value args;
  if (!a.keyword.empty()) {
    Object o;
    for (auto& [k, x] : a.keyword) o.Set(Value::String(k), x);
    args = Value::MakeObject(std::move(o));
  } else {
    args = Value::MakeArray(a.positional);
  }
  return BinaryOp("%", Value::String(ToPyStr(v)), args, in);
}
Value FIndent(Interpreter&, const Value& v, CallArgs& a) {
  const Value* w = FindArg(a, 0, "width");
  std::string indent =
      w && w->is_string()
          ? w->str()
          : std::string(w ? static_cast<size_t>(std::max<int64_t>(0, w->as_int())) : 4, ' ');
  const bool first = BoolArg(a, 1, "first", false);
  const bool blank = BoolArg(a, 2, "blank", false);
  const std::vector<std::string> lines = PySplitLines(ToPyStr(v) + "\n");
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + indent : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i)
      rv += "\n" + (lines[i].empty() ? "" : indent) + lines[i];
  }
  if (first) rv = indent + rv;
  return Value::String(std::move(rv));
}
Value FInt(Interpreter&, const Value& v, CallArgs& a) {
  if (v.is_int() || v.is_bool()) return Value::Int(v.as_int());
  if (v.is_float() && std::isfinite(v.as_double()))
    return Value::Int(static_cast<int64_t>(v.as_double()));
  if (v.is_string()) {
    const std::string s = PyStrip(v.str(), Value::None(), true, true);
    const int base = static_cast<int>(IntArg(a, 1, "base", 10));
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, base);
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value::Int(i);
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d))
      return Value::Int(static_cast<int64_t>(d));
  }
  return ArgOr(a, 0, "default", Value::Int(0));
}
Value FItems(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::MakeArray({}, true);
  if (!v.is_object()) ThrowRuntime("Can only get item pairs from a mapping.");
  Array out;
  for (const auto& [k, x] : v.object().items) out.push_back(Value::MakeTuple({k, x}));
  return Value::MakeArray(std::move(out), true);
}
Value FJoin(Interpreter& in, const Value& v, CallArgs& a) {
  const std::string sep = ToPyStr(ArgOr(a, 0, "d", Value::String("")));
  const Value* attr = FindArg(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : Iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += ToPyStr(attr && !attr->is_none() ? GetPath(in, item, ToPyStr(*attr)) : item);
    in.CheckSize(out.size());
  }
  return Value::String(std::move(out));
}
Value FLast(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_generator()) ThrowRuntime("'generator' object is not reversible");
  Array items = Iterate(v);
  return items.empty() ? Value::Undefined("No last item, sequence was empty.") : items.back();
}
Value FLength(Interpreter&, const Value& v, CallArgs&) { return Value::Int(Length(v)); }
Value FList(Interpreter&, const Value& v, CallArgs&) { return Value::MakeArray(Iterate(v)); }
Value FLower(Interpreter&, const Value& v, CallArgs&) {
  return Value::String(AsciiLower(ToPyStr(v)));
}
Value FUpper(Interpreter&, const Value& v, CallArgs&) {
  return Value::String(AsciiUpper(ToPyStr(v)));
}

Value FMinMax(const Value& v, CallArgs& a, bool want_max, Interpreter& in) {
  const bool cs = BoolArg(a, 0, "case_sensitive", false);
  const Value* attr = FindArg(a, 1, "attribute");
  Array items = Iterate(v);
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  auto key = [&](size_t i) { return attr ? GetPath(in, items[i], ToPyStr(*attr)) : items[i]; };
  for (size_t i = 1; i < items.size(); ++i) {
    if (want_max ? KeyLess(key(best), key(i), cs) : KeyLess(key(i), key(best), cs)) best = i;
  }
  return items[best];
}
Value FMax(Interpreter& in, const Value& v, CallArgs& a) { return FMinMax(v, a, true, in); }
Value FMin(Interpreter& in, const Value& v, CallArgs& a) { return FMinMax(v, a, false, in); }

Value FMap(Interpreter& in, const Value& v, CallArgs& a) {
  Array out;
  if (!v.Truthy()) return Value::MakeArray({}, true);  // jinja2: `if value:`
  if (const Value* attr = FindArg(a, SIZE_MAX, "attribute")) {
    const Value* def = FindArg(a, SIZE_MAX, "default");
    for (const Value& item : Iterate(v)) {
      Value x = GetPath(in, item, ToPyStr(*attr));
      out.push_back(x.is_undefined() && def ? *def : x);
    }
    return Value::MakeArray(std::move(out), true);
  }
  if (a.positional.empty()) ThrowRuntime("map requires a filter argument");
  const std::string name = ToPyStr(a.positional[0]);
  const FilterFn f = FindFilter(name);
  if (f == nullptr) ThrowRuntime("No filter named '" + name + "'.");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : Iterate(v)) {
    CallArgs copy = rest;
    out.push_back(f(in, item, copy));
  }
  return Value::MakeArray(std::move(out), true);
}

// select / reject / selectattr / rejectattr.
// jinja2 skips falsy inputs (`if value:`), so `none | selectattr(...)` is an empty generator.
Value SelectImpl(Interpreter& in, const Value& v, CallArgs& a, bool want, bool by_attr) {
  if (!v.Truthy()) return Value::MakeArray({}, true);
  size_t i = 0;
  std::string attr;
  if (by_attr) {
    if (a.positional.empty()) ThrowRuntime("Missing parameter for attribute name");
    attr = ToPyStr(a.positional[i++]);
  }
  TestFn test = nullptr;
  if (i < a.positional.size()) {
    const std::string name = ToPyStr(a.positional[i++]);
    test = FindTest(name);
    if (test == nullptr) ThrowRuntime("No test named '" + name + "'.");
  }
  CallArgs rest;
  rest.positional.assign(
      a.positional.begin() + static_cast<ptrdiff_t>(std::min(i, a.positional.size())),
      a.positional.end());
  Array out;
  for (const Value& item : Iterate(v)) {
    const Value x = by_attr ? GetPath(in, item, attr) : item;
    CallArgs copy = rest;
    const bool ok = test ? test(in, x, copy) : x.Truthy();
    if (ok == want) out.push_back(item);
  }
  return Value::MakeArray(std::move(out), true);
}
Value FSelect(Interpreter& in, const Value& v, CallArgs& a) {
  return SelectImpl(in, v, a, true, false);
}
Value FReject(Interpreter& in, const Value& v, CallArgs& a) {
  return SelectImpl(in, v, a, false, false);
}
Value FSelectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return SelectImpl(in, v, a, true, true);
}
Value FRejectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return SelectImpl(in, v, a, false, true);
}

Value FReplace(Interpreter& in, const Value& v, CallArgs& a) {
  CallArgs args = a;
  Value method = GetMethod(Value::String(ToPyStr(v)), "replace");
  return in.Call(method, args);
}
Value FReverse(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string()) {
    const std::vector<size_t> offs = Utf8Offsets(v.str());
    std::string out;
    for (size_t i = offs.size() - 1; i-- > 0;) out.append(v.str(), offs[i], offs[i + 1] - offs[i]);
    return Value::String(std::move(out));
  }
  Array items = Iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::MakeArray(std::move(items), !v.is_generator());  // reversed(list) is an iterator
}
Value FRound(Interpreter&, const Value& v, CallArgs& a) {
  const int64_t precision = IntArg(a, 0, "precision", 0);
  const std::string method = StrArg(a, 1, "method", "common");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  if (method == "common") {
    x = std::nearbyint(x);  // Python round(): half to even under the default rounding mode
  } else if (method == "ceil") {
    x = std::ceil(x);
  } else if (method == "floor") {
    x = std::floor(x);
  } else {
    ThrowRuntime("method must be common, ceil or floor");
  }
  return Value::Float(x / scale);
}
Value FSafe(Interpreter&, const Value& v, CallArgs&) { return Value::String(ToPyStr(v), true); }
Value FSort(Interpreter& in, const Value& v, CallArgs& a) {
  const bool reverse = BoolArg(a, 0, "reverse", false);
  const bool cs = BoolArg(a, 1, "case_sensitive", false);
  const Value* attr = FindArg(a, 2, "attribute");
  Array items = Iterate(v);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const Value kx = attr ? GetPath(in, x, ToPyStr(*attr)) : x;
    const Value ky = attr ? GetPath(in, y, ToPyStr(*attr)) : y;
    return reverse ? KeyLess(ky, kx, cs) : KeyLess(kx, ky, cs);
  });
  return Value::MakeArray(std::move(items));
}
Value FString(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() ? v : Value::String(ToPyStr(v));
}
Value FSum(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* attr = FindArg(a, 0, "attribute");
  Value total = ArgOr(a, 1, "start", Value::Int(0));
  for (const Value& item : Iterate(v)) {
    total = BinaryOp("+", total, attr ? GetPath(in, item, ToPyStr(*attr)) : item, in);
  }
  return total;
}
Value FTitle(Interpreter&, const Value& v, CallArgs&) {
  // jinja2 do_title: capitalise after runs of whitespace and -({[<.
  std::string s = ToPyStr(v);
  bool start = true;
  for (char& c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isspace(u) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<') {
      start = true;
    } else {
      c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
      start = false;
    }
  }
  return Value::String(std::move(s));
}
Value FToJson(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* indent_v = FindArg(a, 1, "indent");
  int indent = -1;
  if (indent_v && !indent_v->is_none()) {
    if (!indent_v->is_int()) ThrowRuntime("tojson: indent must be an integer");
    indent = static_cast<int>(std::clamp<int64_t>(indent_v->as_int(), 0, 64));
  }
  if (FindArg(a, 2, "separators") || BoolArg(a, 3, "sort_keys", false)) {
    ThrowRuntime("tojson: separators and sort_keys are not supported");
  }
  std::string out;
  std::string error;
  if (!ToJsonText(v, indent, &out, &error)) ThrowRuntime(error);
  if (BoolArg(a, 0, "ensure_ascii", false)) out = AsciiEscapeJson(out);
  in.CheckSize(out.size());
  return Value::String(std::move(out));
}
Value FTrim(Interpreter&, const Value& v, CallArgs& a) {
  return Value::String(PyStrip(ToPyStr(v), ArgOr(a, 0, "chars", Value::None()), true, true));
}
Value FUnique(Interpreter& in, const Value& v, CallArgs& a) {
  const bool cs = BoolArg(a, 0, "case_sensitive", false);
  const Value* attr = FindArg(a, 1, "attribute");
  Array out;
  Array seen;
  for (const Value& item : Iterate(v)) {
    Value key = attr ? GetPath(in, item, ToPyStr(*attr)) : item;
    if (!cs && key.is_string()) key = Value::String(AsciiLower(key.str()));
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return PyEquals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::MakeArray(std::move(out), true);
}
Value FWordcount(Interpreter&, const Value& v, CallArgs&) {
  return Value::Int(static_cast<int64_t>(PySplit(ToPyStr(v), Value::None(), -1).size()));
}
Value FCenter(Interpreter& in, const Value& v, CallArgs& a) {
  CallArgs args;
  args.positional.push_back(ArgOr(a, 0, "width", Value::Int(80)));
  return in.Call(GetMethod(Value::String(ToPyStr(v)), "center"), args);
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};
constexpr FilterEntry kFilters[] = {
    {"abs", FAbs},
    {"attr", FAttr},
    {"capitalize", FCapitalize},
    {"center", FCenter},
    {"count", FLength},
    {"d", FDefault},
    {"default", FDefault},
    {"dictsort", FDictsort},
    {"e", FEscape},
    {"escape", FEscape},
    {"first", FFirst},
    {"float", FFloat},
    {"forceescape", FEscape},
    {"format", FFormat},
    {"indent", FIndent},
    {"int", FInt},
    {"items", FItems},
    {"join", FJoin},
    {"last", FLast},
    {"length", FLength},
    {"list", FList},
    {"lower", FLower},
    {"map", FMap},
    {"max", FMax},
    {"min", FMin},
    {"reject", FReject},
    {"rejectattr", FRejectattr},
    {"replace", FReplace},
    {"reverse", FReverse},
    {"round", FRound},
    {"safe", FSafe},
    {"select", FSelect},
    {"selectattr", FSelectattr},
    {"sort", FSort},
    {"string", FString},
    {"sum", FSum},
    {"title", FTitle},
    {"tojson", FToJson},
    {"trim", FTrim},
    {"unique", FUnique},
    {"upper", FUpper},
    {"wordcount", FWordcount},
};

}  // namespace

FilterFn FindFilter(std::string_view name) {
  for (const FilterEntry& e : kFilters) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

}  // namespace loom::chat_template
