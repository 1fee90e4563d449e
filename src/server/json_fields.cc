#include "server/json_fields.h"

#include <cmath>
#include <cstdio>

namespace loom {

using nlohmann::json;

std::string JsonTypeName(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

const json* JsonFields::Find(const char* key) const {
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

Status JsonFields::Error(const std::string& key, const std::string& message) const {
  if (param_ != nullptr) *param_ = key;
  return InvalidArgumentError(message);
}

Status JsonFields::Bool(const char* key, bool* out) const {
  const json* v = Find(key);
  if (v == nullptr) return OkStatus();
  if (!v->is_boolean()) {
    return Error(key, std::string(key) + " must be a boolean, got " + JsonTypeName(*v));
  }
  *out = v->get<bool>();
  return OkStatus();
}

Status JsonFields::Number(const char* key, double lo, double hi, float* out) const {
  const json* v = Find(key);
  if (v == nullptr) return OkStatus();
  if (!v->is_number()) {
    return Error(key, std::string(key) + " must be a number, got " + JsonTypeName(*v));
  }
  double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    auto fmt = [](double x) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%g", x);
      return std::string(buf);
    };
    return Error(key, std::string(key) + " must be in [" + fmt(lo) + ", " + fmt(hi) + "], got " +
                          v->dump());
  }
  *out = static_cast<float>(d);
  return OkStatus();
}

Status JsonFields::Int(const char* key, int64_t lo, int64_t hi, int* out, bool* present) const {
  const json* v = Find(key);
  if (present != nullptr) *present = v != nullptr;
  if (v == nullptr) return OkStatus();
  if (!v->is_number()) {
    return Error(key, std::string(key) + " must be an integer, got " + JsonTypeName(*v));
  }
  double d = v->get<double>();
  if (!std::isfinite(d) || d != std::floor(d)) {
    return Error(key, std::string(key) + " must be an integer, got " + v->dump());
  }
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
    return Error(key, std::string(key) + " must be in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "], got " + v->dump());
  }
  *out = static_cast<int>(d);
  return OkStatus();
}

Status JsonFields::String(const char* key, std::string* out) const {
  const json* v = Find(key);
  if (v == nullptr) return OkStatus();
  if (!v->is_string()) {
    return Error(key, std::string(key) + " must be a string, got " + JsonTypeName(*v));
  }
  *out = v->get<std::string>();
  return OkStatus();
}

StatusOr<json> ParseJsonObject(const std::string& body) {
  if (body.empty()) return InvalidArgumentError("the request body is empty; send a JSON object");
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    if (what.find("UTF-8") != std::string::npos || what.find("utf-8") != std::string::npos) {
      return InvalidArgumentError("the request body is not valid UTF-8 (byte " +
                                  std::to_string(e.byte) + ")");
    }
    return InvalidArgumentError("the request body is not valid JSON: " + what);
  }
  if (!j.is_object()) {
    return InvalidArgumentError("the request body must be a JSON object, got " + JsonTypeName(j));
  }
  return j;
}

}  // namespace loom
