// jinja2's builtin tests and globals (plus transformers' raise_exception and strftime_now) and
// the argument helpers of builtins.h. Filters are in filters.cc.
#include "tokenizer/chat_template/builtins.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "tokenizer/chat_template/error.h"
#include "tokenizer/chat_template/interpreter.h"
#include "tokenizer/chat_template/parser.h"

namespace loom::chat_template {

const Value* FindArg(const CallArgs& args, size_t index, std::string_view name) {
  if (!name.empty()) {
    for (const auto& [k, v] : args.keyword) {
      if (k == name) return &v;
    }
  }
  return index < args.positional.size() ? &args.positional[index] : nullptr;
}

Value ArgOr(const CallArgs& args, size_t index, std::string_view name, Value def) {
  const Value* v = FindArg(args, index, name);
  return v ? *v : std::move(def);
}

std::string StrArg(const CallArgs& args, size_t index, std::string_view name,
                   std::string_view def) {
  const Value* v = FindArg(args, index, name);
  if (v == nullptr || v->is_none()) return std::string(def);
  if (!v->is_string()) {
    ThrowRuntime("argument '" + std::string(name) + "' must be str, not " +
                 std::string(v->TypeName()));
  }
  return v->str();
}

namespace {

// ----- tests -----

bool TDefined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool TUndefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool TNone(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool TBoolean(Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }
bool TFalse(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool TTrue(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool TInteger(Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }
bool TFloat(Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }
bool TNumber(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool TString(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool TMapping(Interpreter&, const Value& v, CallArgs&) {
  return v.is_object() && !v.is_namespace();
}
bool TIterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_array() || (v.is_object() && !v.is_namespace());
}
bool TSequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || (v.is_array() && !v.is_generator()) ||
         (v.is_object() && !v.is_namespace());
}
bool TCallable(Interpreter&, const Value& v, CallArgs&) { return v.is_callable(); }
bool TEscaped(Interpreter&, const Value& v, CallArgs&) { return v.is_safe(); }
const Value& Other(CallArgs& a) {
  if (a.positional.empty()) ThrowRuntime("test requires an argument");
  return a.positional[0];
}
bool TEq(Interpreter&, const Value& v, CallArgs& a) { return PyEquals(v, Other(a)); }
bool TNe(Interpreter&, const Value& v, CallArgs& a) { return !PyEquals(v, Other(a)); }
bool TLt(Interpreter&, const Value& v, CallArgs& a) { return PyLess(v, Other(a)); }
bool TLe(Interpreter&, const Value& v, CallArgs& a) { return !PyLess(Other(a), v); }
bool TGt(Interpreter&, const Value& v, CallArgs& a) { return PyLess(Other(a), v); }
bool TGe(Interpreter&, const Value& v, CallArgs& a) { return !PyLess(v, Other(a)); }
bool TSameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = Other(a);
  if (v.kind() != o.kind()) return false;
  if (v.is_array()) return &v.array() == &o.array();
  if (v.is_object()) return &v.object() == &o.object();
  return PyEquals(v, o);
}
bool TIn(Interpreter& in, const Value& v, CallArgs& a) {
  return BinaryOp("in", v, Other(a), in).as_bool();
}
bool TOdd(Interpreter&, const Value& v, CallArgs&) { return v.is_int() && (v.as_int() & 1); }
bool TEven(Interpreter&, const Value& v, CallArgs&) { return v.is_int() && !(v.as_int() & 1); }
bool TDivisibleby(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = Other(a);
  if (!v.is_int() || !o.is_int() || o.as_int() == 0)
    ThrowRuntime("divisibleby needs non-zero integers");
  return v.as_int() % o.as_int() == 0;
}
bool TLower(Interpreter&, const Value& v, CallArgs&) {
  const std::string s = ToPyStr(v);
  return AsciiLower(s) == s && AsciiUpper(s) != s;
}
bool TUpper(Interpreter&, const Value& v, CallArgs&) {
  const std::string s = ToPyStr(v);
  return AsciiUpper(s) == s && AsciiLower(s) != s;
}
bool TFilter(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && FindFilter(v.str());
}
bool TTest(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && FindTest(v.str()); }

struct TestEntry {
  std::string_view name;
  TestFn fn;
};
constexpr TestEntry kTests[] = {
    {"defined", TDefined},
    {"undefined", TUndefined},
    {"none", TNone},
    {"boolean", TBoolean},
    {"false", TFalse},
    {"true", TTrue},
    {"integer", TInteger},
    {"float", TFloat},
    {"number", TNumber},
    {"string", TString},
    {"mapping", TMapping},
    {"iterable", TIterable},
    {"sequence", TSequence},
    {"callable", TCallable},
    {"escaped", TEscaped},
    {"eq", TEq},
    {"equalto", TEq},
    {"==", TEq},
    {"ne", TNe},
    {"!=", TNe},
    {"lt", TLt},
    {"lessthan", TLt},
    {"<", TLt},
    {"le", TLe},
    {"<=", TLe},
    {"gt", TGt},
    {"greaterthan", TGt},
    {">", TGt},
    {"ge", TGe},
    {">=", TGe},
    {"sameas", TSameas},
    {"in", TIn},
    {"odd", TOdd},
    {"even", TEven},
    {"divisibleby", TDivisibleby},
    {"lower", TLower},
    {"upper", TUpper},
    {"filter", TFilter},
    {"test", TTest},
};

// ----- globals -----

constexpr int64_t kMaxRange = 100000;  // jinja2 sandbox MAX_RANGE

Value GRange(Interpreter& in, CallArgs& a) {
  if (a.positional.empty() || a.positional.size() > 3)
    ThrowRuntime("range expected 1 to 3 arguments");
  for (const Value& v : a.positional) {
    if (!v.is_int() && !v.is_bool())
      ThrowRuntime("'" + std::string(v.TypeName()) +
                   "' object cannot be interpreted as an integer");
  }
  int64_t start = 0, stop, step = 1;
  if (a.positional.size() == 1) {
    stop = a.positional[0].as_int();
  } else {
    start = a.positional[0].as_int();
    stop = a.positional[1].as_int();
    if (a.positional.size() == 3) step = a.positional[2].as_int();
  }
  if (step == 0) ThrowRuntime("range() arg 3 must not be zero");
  Array out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange) {
      ThrowRuntime("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    out.push_back(Value::Int(i));
  }
  return Value::MakeArray(std::move(out));
}

Value GDict(Interpreter&, CallArgs& a) {
  Object o;
  if (!a.positional.empty()) {
    if (!a.positional[0].is_object()) ThrowRuntime("dict() positional argument must be a mapping");
    o.items = a.positional[0].object().items;
  }
  for (auto& [k, v] : a.keyword) o.Set(Value::String(k), v);
  return Value::MakeObject(std::move(o));
}

Value GNamespace(Interpreter& in, CallArgs& a) {
  Value ns = GDict(in, a);
  ns.object().is_namespace = true;
  in.RegisterNamespace(ns);
  return ns;
}

Value GRaiseException(Interpreter&, CallArgs& a) {
  throw TemplateError(TemplateError::Kind::kRaised,
                      a.positional.empty() ? std::string() : ToPyStr(a.positional[0]));
}

Value GStrftimeNow(Interpreter& in, CallArgs& a) {
  const std::string fmt = StrArg(a, 0, "format");
  const std::time_t now =
      in.options().now_unix_seconds
          ? static_cast<std::time_t>(*in.options().now_unix_seconds)
          : std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  if (in.options().utc) {
    gmtime_r(&now, &tm);
  } else {
    localtime_r(&now, &tm);
  }
  if (fmt.empty()) return Value::String("");
  std::string out(fmt.size() * 8 + 64, '\0');
  const size_t n = std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
  out.resize(n);
  return Value::String(std::move(out));
}

}  // namespace

TestFn FindTest(std::string_view name) {
  for (const TestEntry& e : kTests) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

void AddGlobals(std::vector<std::pair<std::string, Value>>* vars) {
  vars->emplace_back("range", Value::MakeCallable("range", GRange));
  vars->emplace_back("dict", Value::MakeCallable("dict", GDict));
  vars->emplace_back("namespace", Value::MakeCallable("namespace", GNamespace));
  vars->emplace_back("raise_exception", Value::MakeCallable("raise_exception", GRaiseException));
  vars->emplace_back("strftime_now", Value::MakeCallable("strftime_now", GStrftimeNow));
}

}  // namespace loom::chat_template
