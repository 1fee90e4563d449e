#include "server/json_fields.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace loom {

using nlohmann::json;

Status ForEachContentPart(
    const json& content, const std::string& name, const char* noun, std::string* param,
    std::string* text,
    const std::function<Status(const json&, const std::string&, const std::string&)>& part) {
  if (content.is_string()) {
    *text = content.get<std::string>();
    return OkStatus();
  }
  if (!content.is_array()) {
    return FieldError(
        param, name,
        name + " must be a string or an array of " + noun + ", got " + JsonTypeName(content));
  }
  for (size_t j = 0; j < content.size(); ++j) {
    const json& p = content[j];
    const std::string pname = name + "[" + std::to_string(j) + "]";
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string()) {
      return FieldError(param, pname, pname + " must be an object with a string \"type\"");
    }
    RETURN_IF_ERROR(part(p, pname, p["type"].get<std::string>()));
  }
  return OkStatus();
}

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
    return Error(
        key, std::string(key) + " must be in [" + fmt(lo) + ", " + fmt(hi) + "], got " + v->dump());
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

namespace {

// Follows nlohmann's parser callbacks to know which value is being parsed when parsing fails:
// "max_tokens", "messages[0].content", "" for the top level.
class JsonPathTracker {
 public:
  void On(json::parse_event_t event, const json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        frames_.push_back(Frame{false, "", 0});
        break;
      case json::parse_event_t::array_start:
        frames_.push_back(Frame{true, "", 0});
        break;
      case json::parse_event_t::key:
        frames_.back().key = parsed.get<std::string>();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        ElementDone();
        break;
      case json::parse_event_t::value:
        ElementDone();
        break;
    }
  }

  std::string Path() const {
    std::string path;
    for (const Frame& f : frames_) {
      if (f.is_array) {
        path += "[" + std::to_string(f.num_elements) + "]";
      } else if (IsIdentifier(f.key)) {
        path += (path.empty() ? "" : ".") + f.key;
      } else {
        path += "[" + json(f.key).dump() + "]";  // logit_bias["50256"]
      }
    }
    return path;
  }

 private:
  static bool IsIdentifier(const std::string& key) {
    if (key.empty() || std::isdigit(static_cast<unsigned char>(key[0]))) return false;
    for (char c : key) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    }
    return true;
  }
  struct Frame {
    bool is_array;
    std::string key;       // object: the key whose value comes next
    int num_elements = 0;  // array: elements completed (= the index of the one being parsed)
  };
  void ElementDone() {
    if (!frames_.empty() && frames_.back().is_array) ++frames_.back().num_elements;
  }
  std::vector<Frame> frames_;
};

// Where in `body` parsing fails, as a field path; parses it again with JsonPathTracker (only
// called after a failure, so well-formed requests parse once, without callbacks).
std::string FailurePath(const std::string& body) {
  JsonPathTracker tracker;
  try {
    const json ignored =
        json::parse(body, [&tracker](int, json::parse_event_t event, json& parsed) {
          tracker.On(event, parsed);
          return true;
        });
  } catch (const json::exception&) {
  }
  return tracker.Path();
}

// "1e999" out of "... number overflow parsing '1e999'".
std::string QuotedToken(const std::string& what) {
  const size_t open = what.find('\'');
  const size_t close = what.rfind('\'');
  if (open == std::string::npos || close <= open) return "";
  return what.substr(open + 1, close - open - 1);
}

}  // namespace

StatusOr<json> ParseJsonObject(const std::string& body, std::string* param) {
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
  } catch (const json::out_of_range& e) {
    // The only range error of parsing: a number beyond a double's range (id 406).
    const std::string path = FailurePath(body);
    if (param != nullptr) *param = path;
    return InvalidArgumentError((path.empty() ? "the request body" : path) + ": the number " +
                                QuotedToken(e.what()) +
                                " is out of range (JSON numbers must fit in a double, about "
                                "1.8e308)");
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("the request body could not be read: ") + e.what());
  }
  if (!j.is_object()) {
    return InvalidArgumentError("the request body must be a JSON object, got " + JsonTypeName(j));
  }
  return j;
}

}  // namespace loom
