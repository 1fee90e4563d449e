// Typed, range-checked reads of optional fields of a JSON object, for request parsing. Every
// error is InvalidArgument with a message naming the field and sets *param to its name. A JSON
// null counts as absent (OpenAI clients send explicit nulls).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"

namespace loom {

class JsonFields {
 public:
  // `object` must outlive this; `param` receives the failing field name.
  JsonFields(const nlohmann::json& object, std::string* param) : obj_(object), param_(param) {}

  // Returns nullptr when `key` is absent or null.
  const nlohmann::json* Find(const char* key) const;

  Status Bool(const char* key, bool* out) const;
  // A number in [lo, hi] (inclusive).
  Status Number(const char* key, double lo, double hi, float* out) const;
  // An integer in [lo, hi]; 2.0 is accepted as 2, 2.5 is not.
  Status Int(const char* key, int64_t lo, int64_t hi, int* out, bool* present = nullptr) const;
  Status String(const char* key, std::string* out) const;

  // InvalidArgument naming `key` (sets *param).
  Status Error(const std::string& key, const std::string& message) const;

 private:
  const nlohmann::json& obj_;
  std::string* param_;
};

// InvalidArgument(message) with *param = field: a request parser's error for one field.
inline Status FieldError(std::string* param, const std::string& field, const std::string& message) {
  *param = field;
  return InvalidArgumentError(message);
}

// InvalidArgument "<field>: <what> is not supported yet by loom" with *param = field.
inline Status UnsupportedFieldError(std::string* param, const std::string& field,
                                    const std::string& what) {
  return FieldError(param, field, field + ": " + what + " is not supported yet by loom");
}

// Message content as the APIs send it: a string (the whole text, into *text), or an array of
// parts, each an object with a string "type", handed to `part(part, part_name, type)` in order
// ("<name>[j]"). `noun` names the parts in errors ("content parts", "content blocks").
Status ForEachContentPart(
    const nlohmann::json& content, const std::string& name, const char* noun, std::string* param,
    std::string* text,
    const std::function<Status(const nlohmann::json& part, const std::string& part_name,
                               const std::string& type)>& part);

// "integer", "string", "array", ... for messages like "max_tokens must be an integer, got string".
std::string JsonTypeName(const nlohmann::json& value);

// Parses `body` (must be a JSON object). Never throws: every error is InvalidArgument (a 400).
// Syntax errors name the byte position; ill-formed UTF-8 gets its own message; a number that
// does not fit in a double (1e999, -1e999) names its field ("max_tokens", "messages[0].x") in
// the message and in *param (when not null).
StatusOr<nlohmann::json> ParseJsonObject(const std::string& body, std::string* param = nullptr);

// Runs `parse` (a request parser returning StatusOr<T>) and turns a nlohmann::json::exception
// that escapes it (an accessor on a value of the wrong type that no field check caught) into
// InvalidArgument, so that bad input is always a 400 and never reaches the 500 handler.
template <class Fn>
auto CatchJsonErrors(Fn&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("the request could not be read: ") + e.what());
  }
}

}  // namespace loom
