// Python operator semantics for Expr::kBinary, iteration and ordering.
#include <cmath>
#include <cstdio>

#include "tokenizer/chat_template/error.h"
#include "tokenizer/chat_template/interpreter.h"

namespace loom::chat_template {
namespace {

[[noreturn]] void Unsupported(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) ThrowRuntime(a.str().empty() ? "undefined value" : a.str());
  if (b.is_undefined()) ThrowRuntime(b.str().empty() ? "undefined value" : b.str());
  ThrowRuntime("unsupported operand type(s) for " + std::string(op) + ": '" +
               std::string(a.TypeName()) + "' and '" + std::string(b.TypeName()) + "'");
}

double FloorMod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value Repeat(const Value& seq, int64_t n, const Interpreter& interp) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    interp.CheckSize(seq.str().size() * static_cast<size_t>(n));
    std::string out;
    out.reserve(seq.str().size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::String(std::move(out), seq.is_safe());
  }
  interp.CheckSize(seq.array().size() * static_cast<size_t>(n) * sizeof(Value));
  Array out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.array().begin(), seq.array().end());
  return Value::MakeArray(std::move(out));
}

// printf-style `str % args` for the conversions templates use: %s %r %d %i %f %e %g %x %o %%.
Value PercentFormat(const Value& fmt_v, const Value& args_v) {
  const std::string& fmt = fmt_v.str();
  Array args;
  const bool is_tuple = args_v.is_array() && !args_v.is_generator();
  if (is_tuple) {
    args = args_v.array();
  } else {
    args.push_back(args_v);
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    size_t j = i + 1;
    std::string spec = "%";
    std::string key;
    if (j < fmt.size() && fmt[j] == '(') {
      const size_t close = fmt.find(')', j);
      if (close == std::string::npos) ThrowRuntime("incomplete format key");
      key = fmt.substr(j + 1, close - j - 1);
      j = close + 1;
    }
    while (j < fmt.size() &&
           std::string_view("-+ #0123456789.").find(fmt[j]) != std::string::npos) {
      spec.push_back(fmt[j++]);
    }
    if (j >= fmt.size()) ThrowRuntime("incomplete format");
    const char conv = fmt[j];
    i = j;
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    Value arg;
    if (!key.empty()) {
      const Value* v = args_v.is_object() ? args_v.object().Find(std::string_view(key)) : nullptr;
      if (v == nullptr) ThrowRuntime("format requires a mapping with key '" + key + "'");
      arg = *v;
    } else {
      if (next >= args.size()) ThrowRuntime("not enough arguments for format string");
      arg = args[next++];
    }
    char buf[512];
    switch (conv) {
      case 's':
      case 'r': {
        const std::string s = conv == 's' ? ToPyStr(arg) : ToPyRepr(arg);
        spec += "s";
        std::snprintf(buf, sizeof(buf), spec.c_str(), s.c_str());
        out += s.size() + 64 < sizeof(buf) ? std::string(buf) : s;
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o': {
        if (!arg.is_number())
          ThrowRuntime("%" + std::string(1, conv) + " format: a number is required");
        const long long v = arg.is_float() ? static_cast<long long>(arg.as_double()) : arg.as_int();
        spec += "ll";
        spec.push_back(conv == 'i' ? 'd' : conv);
        std::snprintf(buf, sizeof(buf), spec.c_str(), v);
        out += buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!arg.is_number())
          ThrowRuntime("must be real number, not " + std::string(arg.TypeName()));
        spec.push_back(conv);
        std::snprintf(buf, sizeof(buf), spec.c_str(), arg.as_double());
        out += buf;
        break;
      }
      default:
        ThrowRuntime(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (is_tuple && next < args.size()) {
    ThrowRuntime("not all arguments converted during string formatting");
  }
  return Value::String(std::move(out));
}

}  // namespace

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

Array Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kArray:
      return v.array();
    case Value::Kind::kObject: {
      Array keys;
      keys.reserve(v.object().items.size());
      for (const auto& [k, _] : v.object().items) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      const std::vector<size_t> offs = Utf8Offsets(v.str());
      Array chars;
      chars.reserve(offs.size() - 1);
      for (size_t i = 0; i + 1 < offs.size(); ++i) {
        chars.push_back(Value::String(v.str().substr(offs[i], offs[i + 1] - offs[i])));
      }
      return chars;
    }
    default:
      ThrowRuntime("'" + std::string(v.TypeName()) + "' object is not iterable");
  }
}

bool PyLess(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_array() && b.is_array() && !a.is_generator() && !b.is_generator()) {
    const Array& x = a.array();
    const Array& y = b.array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!PyEquals(x[i], y[i])) return PyLess(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  Unsupported("<", a, b);
}

Value BinaryOp(std::string_view op, const Value& a, const Value& b, const Interpreter& interp) {
  if (op == "==") return Value::Bool(PyEquals(a, b));
  if (op == "!=") return Value::Bool(!PyEquals(a, b));
  if (op == "<") return Value::Bool(PyLess(a, b));
  if (op == ">") return Value::Bool(PyLess(b, a));
  if (op == "<=") return Value::Bool(!PyLess(b, a));
  if (op == ">=") return Value::Bool(!PyLess(a, b));
  if (op == "in" || op == "notin") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) {
        ThrowRuntime("'in <string>' requires string as left operand, not " +
                     std::string(a.TypeName()));
      }
      found = b.str().find(a.str()) != std::string::npos;
    } else if (b.is_object()) {
      found = b.object().Find(a) != nullptr;
    } else if (b.is_array() || b.is_undefined()) {
      for (const Value& e : Iterate(b)) {
        if (PyEquals(e, a)) {
          found = true;
          break;
        }
      }
    } else {
      ThrowRuntime("argument of type '" + std::string(b.TypeName()) + "' is not iterable");
    }
    return Value::Bool(found == (op == "in"));
  }
  const bool numbers = a.is_number() && b.is_number();
  const bool any_float = a.is_float() || b.is_float();
  if (op == "+") {
    if (numbers) {
      return any_float ? Value::Float(a.as_double() + b.as_double())
                       : Value::Int(a.as_int() + b.as_int());
    }
    if (a.is_string() && b.is_string()) {
      interp.CheckSize(a.str().size() + b.str().size());
      if (a.is_safe() != b.is_safe()) {  // markupsafe: the plain side is escaped
        return Value::String(
            a.is_safe() ? a.str() + HtmlEscape(b.str()) : HtmlEscape(a.str()) + b.str(), true);
      }
      return Value::String(a.str() + b.str(), a.is_safe());
    }
    if (a.is_array() && b.is_array() && !a.is_generator() && !b.is_generator()) {
      interp.CheckSize((a.array().size() + b.array().size()) * sizeof(Value));
      Array out = a.array();
      out.insert(out.end(), b.array().begin(), b.array().end());
      return Value::MakeArray(std::move(out));
    }
    if (a.is_string() && !b.is_undefined()) {
      ThrowRuntime("can only concatenate str (not \"" + std::string(b.TypeName()) + "\") to str");
    }
    if (a.is_array() && !b.is_undefined()) {
      ThrowRuntime("can only concatenate list (not \"" + std::string(b.TypeName()) + "\") to list");
    }
    Unsupported(op, a, b);
  }
  if (op == "-") {
    if (!numbers) Unsupported(op, a, b);
    return any_float ? Value::Float(a.as_double() - b.as_double())
                     : Value::Int(a.as_int() - b.as_int());
  }
  if (op == "*") {
    if (numbers) {
      return any_float ? Value::Float(a.as_double() * b.as_double())
                       : Value::Int(a.as_int() * b.as_int());
    }
    if ((a.is_string() || (a.is_array() && !a.is_generator())) && (b.is_int() || b.is_bool())) {
      return Repeat(a, b.as_int(), interp);
    }
    if ((b.is_string() || (b.is_array() && !b.is_generator())) && (a.is_int() || a.is_bool())) {
      return Repeat(b, a.as_int(), interp);
    }
    Unsupported(op, a, b);
  }
  if (op == "/") {
    if (!numbers) Unsupported(op, a, b);
    if (b.as_double() == 0) ThrowRuntime("division by zero");
    return Value::Float(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!numbers) Unsupported(op, a, b);
    if (b.as_double() == 0) ThrowRuntime("integer division or modulo by zero");
    if (any_float) return Value::Float(std::floor(a.as_double() / b.as_double()));
    return Value::Int(FloorDiv(a.as_int(), b.as_int()));
  }
  if (op == "%") {
    if (a.is_string()) return PercentFormat(a, b);
    if (!numbers) Unsupported(op, a, b);
    if (b.as_double() == 0) ThrowRuntime("integer division or modulo by zero");
    if (any_float) return Value::Float(FloorMod(a.as_double(), b.as_double()));
    return Value::Int(a.as_int() - FloorDiv(a.as_int(), b.as_int()) * b.as_int());
  }
  if (op == "**") {
    if (!numbers) Unsupported(op, a, b);
    if (!any_float && b.as_int() >= 0) {
      int64_t r = 1;
      for (int64_t i = 0; i < b.as_int() && i < 64; ++i) r *= a.as_int();
      return Value::Int(r);
    }
    return Value::Float(std::pow(a.as_double(), b.as_double()));
  }
  ThrowRuntime("unknown operator " + std::string(op));
}

}  // namespace loom::chat_template
