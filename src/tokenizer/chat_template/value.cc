#include "tokenizer/chat_template/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tokenizer/chat_template/error.h"

namespace loom::chat_template {
namespace {

bool KeyEquals(const Value& k, std::string_view s) { return k.is_string() && k.str() == s; }

void AppendHex(std::string* out, const char* prefix, uint32_t cp, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%s%0*x", prefix, digits, cp);
  *out += buf;
}

// Decodes one code point of valid UTF-8 at s[i]; returns its byte length.
int DecodeUtf8(std::string_view s, size_t i, uint32_t* cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  const int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  uint32_t v = c & (0x7F >> n);
  for (int k = 1; k < n; ++k) v = (v << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  *cp = v;
  return n;
}

// Python str.isprintable() for the code points templates meet (C0/C1 controls, separators
// and the common format characters are not printable).
bool PyPrintable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0)) return false;
  if (cp == 0xAD || cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF) return false;
  if ((cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E)) return false;
  if (cp >= 0x2060 && cp <= 0x2064) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x202F || cp == 0x205F ||
      cp == 0x3000)
    return false;
  return true;
}

void AppendPyStrRepr(std::string_view s, std::string* out) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out->push_back(quote);
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const int n = DecodeUtf8(s, i, &cp);
    if (cp == '\\') {
      *out += "\\\\";
    } else if (cp == static_cast<uint32_t>(quote)) {
      out->push_back('\\');
      out->push_back(quote);
    } else if (cp == '\n') {
      *out += "\\n";
    } else if (cp == '\r') {
      *out += "\\r";
    } else if (cp == '\t') {
      *out += "\\t";
    } else if (cp == ' ' || PyPrintable(cp)) {
      out->append(s.substr(i, n));
    } else if (cp < 0x100) {
      AppendHex(out, "\\x", cp, 2);
    } else if (cp < 0x10000) {
      AppendHex(out, "\\u", cp, 4);
    } else {
      AppendHex(out, "\\U", cp, 8);
    }
    i += n;
  }
  out->push_back(quote);
}

void AppendRepr(const Value& v, std::string* out, bool top_level_str, int depth = 0);

// Values nested deeper than this (or cyclic, e.g. a namespace holding itself) are rejected by
// the recursive traversals below instead of overflowing the stack.
constexpr int kMaxNesting = 512;

[[noreturn]] void FailTooDeep() {
  throw TemplateError(
      TemplateError::Kind::kLimit,
      "value nested deeper than " + std::to_string(kMaxNesting) + " levels (or cyclic)");
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          AppendHex(out, "\\u", c, 4);
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

void AppendRepr(const Value& v, std::string* out, bool top_level_str, int depth) {
  if (depth > kMaxNesting) FailTooDeep();
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      if (!top_level_str) *out += "Undefined";
      return;
    case Value::Kind::kNone:
      *out += "None";
      return;
    case Value::Kind::kBool:
      *out += v.as_bool() ? "True" : "False";
      return;
    case Value::Kind::kInt:
      *out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat:
      *out += PyFloatRepr(v.as_double());
      return;
    case Value::Kind::kString:
      if (top_level_str) {
        *out += v.str();
      } else if (v.is_safe()) {
        *out += "Markup(";
        AppendPyStrRepr(v.str(), out);
        *out += ")";
      } else {
        AppendPyStrRepr(v.str(), out);
      }
      return;
    case Value::Kind::kArray: {
      if (v.is_generator()) {
        *out += "<generator object>";
        return;
      }
      out->push_back(v.is_tuple() ? '(' : '[');
      bool first = true;
      for (const Value& e : v.array()) {
        if (!first) *out += ", ";
        first = false;
        AppendRepr(e, out, false, depth + 1);
      }
      if (v.is_tuple() && v.array().size() == 1) out->push_back(',');
      out->push_back(v.is_tuple() ? ')' : ']');
      return;
    }
    case Value::Kind::kObject: {
      if (v.is_namespace()) *out += "<Namespace ";
      out->push_back('{');
      bool first = true;
      for (const auto& [k, e] : v.object().items) {
        if (!first) *out += ", ";
        first = false;
        AppendRepr(k, out, false, depth + 1);
        *out += ": ";
        AppendRepr(e, out, false, depth + 1);
      }
      out->push_back('}');
      if (v.is_namespace()) out->push_back('>');
      return;
    }
    case Value::Kind::kCallable:
      *out += "<function " + v.callable().name + ">";
      return;
  }
}

bool AppendJson(const Value& v, int indent, int depth, std::string* out, std::string* error) {
  if (depth > kMaxNesting) {
    *error = "value nested too deeply (or cyclic) for JSON";
    return false;
  }
  const auto newline = [&](int d) {
    out->push_back('\n');
    out->append(static_cast<size_t>(indent) * d, ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      *error = "Object of type Undefined is not JSON serializable";
      return false;
    case Value::Kind::kNone:
      *out += "null";
      return true;
    case Value::Kind::kBool:
      *out += v.as_bool() ? "true" : "false";
      return true;
    case Value::Kind::kInt:
      *out += std::to_string(v.as_int());
      return true;
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      if (std::isnan(d)) {
        *out += "NaN";
      } else if (std::isinf(d)) {
        *out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        *out += PyFloatRepr(d);
      }
      return true;
    }
    case Value::Kind::kString:
      AppendJsonString(v.str(), out);
      return true;
    case Value::Kind::kArray: {
      if (v.is_generator()) {
        *error = "Object of type generator is not JSON serializable";
        return false;
      }
      if (v.array().empty()) {
        *out += "[]";
        return true;
      }
      out->push_back('[');
      bool first = true;
      for (const Value& e : v.array()) {
        if (!first) *out += indent >= 0 ? "," : ", ";
        first = false;
        if (indent >= 0) newline(depth + 1);
        if (!AppendJson(e, indent, depth + 1, out, error)) return false;
      }
      if (indent >= 0) newline(depth);
      out->push_back(']');
      return true;
    }
    case Value::Kind::kObject: {
      if (v.is_namespace()) {
        *error = "Object of type Namespace is not JSON serializable";
        return false;
      }
      if (v.object().items.empty()) {
        *out += "{}";
        return true;
      }
      out->push_back('{');
      bool first = true;
      for (const auto& [k, e] : v.object().items) {
        if (!first) *out += indent >= 0 ? "," : ", ";
        first = false;
        if (indent >= 0) newline(depth + 1);
        if (k.is_string()) {
          AppendJsonString(k.str(), out);
        } else if (k.is_bool()) {
          *out += k.as_bool() ? "\"true\"" : "\"false\"";
        } else if (k.is_none()) {
          *out += "\"null\"";
        } else if (k.is_int() || k.is_float()) {
          out->push_back('"');
          if (!AppendJson(k, -1, 0, out, error)) return false;
          out->push_back('"');
        } else {
          *error = "keys must be str, int, float, bool or None, not " + std::string(k.TypeName());
          return false;
        }
        *out += ": ";
        if (!AppendJson(e, indent, depth + 1, out, error)) return false;
      }
      if (indent >= 0) newline(depth);
      out->push_back('}');
      return true;
    }
    case Value::Kind::kCallable:
      *error = "Object of type function is not JSON serializable";
      return false;
  }
  return false;
}

template <typename J>
bool FromJsonImpl(const J& j, Value* out, std::string* error, std::string* path, int depth = 0) {
  if (depth > kMaxNesting) {
    *error = "JSON nested deeper than " + std::to_string(kMaxNesting) + " levels at " + *path;
    return false;
  }
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      *out = Value::None();
      return true;
    case nlohmann::json::value_t::boolean:
      *out = Value::Bool(j.template get<bool>());
      return true;
    case nlohmann::json::value_t::number_integer:
      *out = Value::Int(j.template get<int64_t>());
      return true;
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      *out = u > static_cast<uint64_t>(INT64_MAX) ? Value::Float(static_cast<double>(u))
                                                  : Value::Int(static_cast<int64_t>(u));
      return true;
    }
    case nlohmann::json::value_t::number_float:
      *out = Value::Float(j.template get<double>());
      return true;
    case nlohmann::json::value_t::string: {
      const auto& s = j.template get_ref<const std::string&>();
      const size_t bad = FindInvalidUtf8(s);
      if (bad != std::string::npos) {
        *error = "invalid UTF-8 at byte " + std::to_string(bad) + " of " +
                 (path->empty() ? std::string("a string") : *path);
        return false;
      }
      *out = Value::String(s);
      return true;
    }
    case nlohmann::json::value_t::array: {
      Array arr;
      arr.reserve(j.size());
      const size_t len = path->size();
      for (size_t i = 0; i < j.size(); ++i) {
        *path += "[" + std::to_string(i) + "]";
        Value e;
        if (!FromJsonImpl(j[i], &e, error, path, depth + 1)) return false;
        path->resize(len);
        arr.push_back(std::move(e));
      }
      *out = Value::MakeArray(std::move(arr));
      return true;
    }
    case nlohmann::json::value_t::object: {
      Object obj;
      obj.items.reserve(j.size());
      const size_t len = path->size();
      for (auto it = j.begin(); it != j.end(); ++it) {
        const size_t bad = FindInvalidUtf8(it.key());
        if (bad != std::string::npos) {
          *error =
              "invalid UTF-8 in a key of " + (path->empty() ? std::string("the context") : *path);
          return false;
        }
        *path += (path->empty() ? "" : ".") + it.key();
        Value e;
        if (!FromJsonImpl(it.value(), &e, error, path, depth + 1)) return false;
        path->resize(len);
        obj.items.emplace_back(Value::String(it.key()), std::move(e));
      }
      *out = Value::MakeObject(std::move(obj));
      return true;
    }
    default:
      *error = "unsupported JSON value (binary/discarded) at " + *path;
      return false;
  }
}

}  // namespace

const Value* Object::Find(const Value& key) const {
  if (key.is_string()) return Find(std::string_view(key.str()));
  for (const auto& [k, v] : items) {
    if (PyEquals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Object::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (KeyEquals(k, key)) return &v;
  }
  return nullptr;
}

void Object::Set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (PyEquals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::MakeArray(Array items, bool generator) {
  Value v(Kind::kArray);
  v.ptr_ = std::make_shared<Array>(std::move(items));
  v.flag_ = generator;
  return v;
}

Value Value::MakeTuple(Array items) {
  Value v = MakeArray(std::move(items));
  v.flag_ = 2;
  return v;
}

Value Value::MakeObject(Object obj) {
  Value v(Kind::kObject);
  v.ptr_ = std::make_shared<Object>(std::move(obj));
  return v;
}

Value Value::MakeCallable(std::string name, NativeFn fn) {
  Value v(Kind::kCallable);
  v.ptr_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

bool Value::FromJson(const nlohmann::ordered_json& j, Value* out, std::string* error) {
  std::string path;
  return FromJsonImpl(j, out, error, &path);
}

bool Value::FromJson(const nlohmann::json& j, Value* out, std::string* error) {
  std::string path;
  return FromJsonImpl(j, out, error, &path);
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0;
    case Kind::kString:
      return !str_.empty();
    case Kind::kArray:
      return is_generator() || !array().empty();
    case Kind::kObject:
      return is_namespace() || !object().items.empty();
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string_view Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return flag_ ? "Markup" : "str";
    case Kind::kArray:
      return flag_ == 1 ? "generator" : flag_ == 2 ? "tuple" : "list";
    case Kind::kObject:
      return is_namespace() ? "Namespace" : "dict";
    case Kind::kCallable:
      return "function";
  }
  return "?";
}

std::string ToPyStr(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  AppendRepr(v, &out, true);
  return out;
}

std::string ToPyRepr(const Value& v) {
  std::string out;
  AppendRepr(v, &out, false);
  return out;
}

std::string PyFloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-d.ddde+XX"
  const size_t e_pos = sci.find('e');
  const int exp10 = std::stoi(sci.substr(e_pos + 1));
  std::string mant = sci.substr(0, e_pos);
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits.push_back(c);
  }
  std::string out = neg ? "-" : "";
  if (exp10 >= -4 && exp10 < 16) {  // Python 'r' repr: fixed for 1e-4 <= |d| < 1e16
    if (exp10 < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp10 + 1) {
      out += digits + std::string(static_cast<size_t>(exp10 + 1) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp10 + 1)) + "." +
             digits.substr(static_cast<size_t>(exp10 + 1));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return out + ebuf;
}

bool ToJsonText(const Value& v, int indent, std::string* out, std::string* error) {
  return AppendJson(v, indent, 0, out, error);
}

namespace {
bool PyEqualsImpl(const Value& a, const Value& b, int depth);
}  // namespace

bool PyEquals(const Value& a, const Value& b) { return PyEqualsImpl(a, b, 0); }

namespace {
bool PyEqualsImpl(const Value& a, const Value& b, int depth) {
  if (depth > kMaxNesting) FailTooDeep();
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kArray: {
      if (a.is_generator() || b.is_generator()) return &a.array() == &b.array();
      const Array& x = a.array();
      const Array& y = b.array();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!PyEqualsImpl(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kObject: {
      if (a.is_namespace() || b.is_namespace()) return &a.object() == &b.object();
      const Object& x = a.object();
      const Object& y = b.object();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.Find(k);
        if (other == nullptr || !PyEqualsImpl(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kCallable:
      return &a.callable() == &b.callable();
    default:
      return false;
  }
}
}  // namespace

size_t Utf8Length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

size_t FindInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int n;
    uint32_t min;
    if ((c & 0xE0) == 0xC0) {
      n = 2;
      min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      n = 3;
      min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      n = 4;
      min = 0x10000;
    } else {
      return i;
    }
    if (i + n > s.size()) return i;
    uint32_t cp = c & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::vector<size_t> Utf8Offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) offsets.push_back(i);
  }
  offsets.push_back(s.size());
  return offsets;
}

}  // namespace loom::chat_template
