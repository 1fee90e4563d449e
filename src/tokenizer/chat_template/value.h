// Value: a dynamically typed Jinja value with Python semantics (the semantics jinja2 gives chat
// templates in transformers). Arrays, objects and callables have reference semantics (shared),
// like Python lists and dicts; scalars and strings are copied.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::chat_template {

class Value;
class Interpreter;

// Arguments of a call: positional values then keyword arguments (in call order).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A builtin function, bound method or macro. Throws TemplateError (error.h) on failure.
using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;

struct Callable {
  std::string name;  // for messages ("raise_exception", "dict.get", macro name)
  NativeFn fn;
};

using Array = std::vector<Value>;
// An insertion-ordered dict. Keys are strings, integers, booleans or none (Python hashables
// that templates use). Lookup is linear: template dicts are small.
struct Object {
  std::vector<std::pair<Value, Value>> items;
  bool is_namespace = false;  // created by namespace(): attributes are assignable

  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  // Inserts or replaces `key` (keeps the original position on replace).
  void Set(Value key, Value value);
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,  // a missing variable/attribute: falsy, renders '', errors on most operations
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kArray,
    kObject,
    kCallable,
  };

  Value() = default;  // undefined
  static Value Undefined(std::string hint = {}) {
    Value v;
    v.str_ = std::move(hint);
    return v;
  }
  static Value None() { return Value(Kind::kNone); }
  static Value Bool(bool b) {
    Value v(Kind::kBool);
    v.int_ = b;
    return v;
  }
  static Value Int(int64_t i) {
    Value v(Kind::kInt);
    v.int_ = i;
    return v;
  }
  static Value Float(double d) {
    Value v(Kind::kFloat);
    v.float_ = d;
    return v;
  }
  static Value String(std::string s, bool safe = false) {
    Value v(Kind::kString);
    v.str_ = std::move(s);
    v.flag_ = safe;
    return v;
  }
  // A new array; `generator` marks the lazy results of map/select/... (jinja2 generators: they
  // iterate but have no len() and are not JSON serializable).
  static Value MakeArray(Array items = {}, bool generator = false);
  // A Python tuple: an array that prints as (a, b).
  static Value MakeTuple(Array items);
  static Value MakeObject(Object obj = {});
  static Value MakeCallable(std::string name, NativeFn fn);
  // Converts JSON; fails (returns false, sets *error naming the JSON path) on invalid UTF-8 in
  // a string or key. Use ordered_json to keep key order (transformers keeps dict insertion
  // order, which tojson output shows).
  static bool FromJson(const nlohmann::ordered_json& j, Value* out, std::string* error);
  static bool FromJson(const nlohmann::json& j, Value* out, std::string* error);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_safe() const { return kind_ == Kind::kString && flag_ != 0; }  // markupsafe.Markup
  bool is_generator() const { return kind_ == Kind::kArray && flag_ == 1; }
  bool is_tuple() const { return kind_ == Kind::kArray && flag_ == 2; }
  bool is_namespace() const { return kind_ == Kind::kObject && object().is_namespace; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // valid for kInt and kBool
  double as_double() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& str() const { return str_; }  // kString; kUndefined: the name hint
  Array& array() const { return *static_cast<Array*>(ptr_.get()); }
  Object& object() const { return *static_cast<Object*>(ptr_.get()); }
  const Callable& callable() const { return *static_cast<const Callable*>(ptr_.get()); }

  // Python truthiness.
  bool Truthy() const;
  // Python type name for messages ("str", "int", "list", "dict", "NoneType", "undefined").
  std::string_view TypeName() const;

 private:
  explicit Value(Kind k) : kind_(k) {}

  Kind kind_ = Kind::kUndefined;
  uint8_t flag_ = 0;  // kString: 1 = safe (Markup); kArray: 1 = generator, 2 = tuple
  union {
    int64_t int_ = 0;  // kBool, kInt
    double float_;     // kFloat
  };
  std::string str_;            // kString; kUndefined: a hint for the error message
  std::shared_ptr<void> ptr_;  // kArray: Array, kObject: Object, kCallable: Callable
};

// Python str(v) (jinja2 soft_str): None → "None", True → "True", lists/dicts as Python repr,
// undefined → "".
std::string ToPyStr(const Value& v);
// Python repr(v).
std::string ToPyRepr(const Value& v);
// Python float repr (shortest round-trip digits: 1.0, 1e-05, 1e+20, inf, nan).
std::string PyFloatRepr(double d);
// json.dumps(v, ensure_ascii=False, indent=indent (<0: None), separators=default,
// sort_keys=false). Returns false with *error for values JSON cannot hold (undefined,
// callables, generators).
bool ToJsonText(const Value& v, int indent, std::string* out, std::string* error);
// Python ==.
bool PyEquals(const Value& a, const Value& b);

// Number of Unicode code points of valid UTF-8 `s`.
size_t Utf8Length(std::string_view s);
// Returns the index of the first invalid byte of `s`, or npos if `s` is valid UTF-8.
size_t FindInvalidUtf8(std::string_view s);
// Splits valid UTF-8 into code point byte offsets: offsets[i] = start of code point i,
// offsets.back() = s.size().
std::vector<size_t> Utf8Offsets(std::string_view s);

}  // namespace loom::chat_template
