// The formats whose calls are name/value pairs in tags, typed by the tool's schema:
//   Qwen3-Coder: <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...
//                </function>\n</tool_call>
//   GLM-4.5/4.6: <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n...</tool_call>
// A parameter's JSON is emitted when the parameter ends ({"P": V, then , "Q": W, then }).
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "server/tool_parser_internal.h"

namespace loom::tool_parser_internal {

using nlohmann::json;

namespace {

constexpr size_t kMaxNameBytes = 256;

constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";
constexpr std::string_view kArgKeyOpen = "<arg_key>";
constexpr std::string_view kArgKeyClose = "</arg_key>";
constexpr std::string_view kArgValueOpen = "<arg_value>";
constexpr std::string_view kArgValueClose = "</arg_value>";

// The value between the tags as the template writes it: one newline after the open tag and one
// before the close tag are markup.
std::string_view TrimOneNewline(std::string_view s) {
  if (s.starts_with("\r\n")) {
    s.remove_prefix(2);
  } else if (s.starts_with('\n')) {
    s.remove_prefix(1);
  }
  if (s.ends_with("\r\n")) {
    s.remove_suffix(2);
  } else if (s.ends_with('\n')) {
    s.remove_suffix(1);
  }
  return s;
}

bool HasType(const json& v, std::string_view type) {
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "null") return v.is_null();
  return false;
}

// `raw` as JSON; also Python's literals (templates that `| string` a boolean write True).
json ParseLenient(std::string_view raw) {
  json v = json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (!v.is_discarded()) return v;
  const std::string_view t = Trim(raw);
  if (t == "True") return true;
  if (t == "False") return false;
  if (t == "None") return nullptr;
  return v;
}

std::string Dump(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string TypedValueJson(const json* property, std::string_view raw) {
  std::vector<std::string> types;
  if (property != nullptr) AddSchemaTypes(*property, &types);
  bool wants_string = false;
  for (const std::string& t : types) wants_string |= t == "string";
  if (wants_string && types.size() == 1) return JsonQuote(raw);
  const json parsed = ParseLenient(raw);
  if (parsed.is_discarded()) return JsonQuote(raw);
  if (types.empty()) return Dump(parsed);  // no schema for it: JSON when it is JSON
  for (const std::string& t : types) {
    if (HasType(parsed, t)) return Dump(parsed);
  }
  return wants_string ? JsonQuote(raw) : Dump(parsed);
}

TypedArgs::TypedArgs(const std::vector<ToolSpec>* tools, std::string function) {
  if (tools == nullptr) return;
  for (const ToolSpec& tool : *tools) {
    if (tool.name != function || !tool.parameters.is_object()) continue;
    const auto props = tool.parameters.find("properties");
    if (props != tool.parameters.end() && props->is_object()) schema_ = &*props;
    break;
  }
}

namespace {

bool IsStringOnly(const json* property) {
  return property != nullptr && IsStringOnlySchema(*property);
}

}  // namespace

// As nlohmann's dump writes a string's text for valid UTF-8.
std::string JsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[(c >> 4) & 0xF];
          out += kHex[c & 0xF];
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string TypedArgs::BeginValue(std::string_view key) {
  key_ = std::string(key);
  property_ = nullptr;
  if (schema_ != nullptr) {
    if (const auto it = schema_->find(key_); it != schema_->end()) property_ = &*it;
  }
  streaming_ = IsStringOnly(property_);
  leading_decided_ = false;
  value_.clear();
  if (!streaming_) return "";
  return Separator() + JsonQuote(key_) + ": \"";
}

std::string TypedArgs::FeedValue(std::string_view text) {
  value_.append(text);
  if (!streaming_) return "";
  if (!leading_decided_) {  // one leading newline is markup; "\r" may yet be "\r\n"
    if (value_.empty() || value_ == "\r") return "";
    if (value_.starts_with("\r\n")) {
      value_.erase(0, 2);
    } else if (value_.starts_with('\n')) {
      value_.erase(0, 1);
    }
    leading_decided_ = true;
  }
  // Hold what may be the trailing newline (markup if the value ends right after it).
  size_t hold = 0;
  if (value_.ends_with("\r\n")) {
    hold = 2;
  } else if (value_.ends_with('\n') || value_.ends_with('\r')) {
    hold = 1;
  }
  std::string fragment = JsonEscape(std::string_view(value_).substr(0, value_.size() - hold));
  value_.erase(0, value_.size() - hold);
  return fragment;
}

std::string TypedArgs::EndValue() {
  if (!streaming_) {
    return Separator() + JsonQuote(key_) + ": " + TypedValueJson(property_, TrimOneNewline(value_));
  }
  // Held: nothing, a newline, "\r\n" or "\r"; or, with the leading one undecided, "" or "\r".
  std::string_view rest = value_;
  if (!leading_decided_) {
    rest = TrimOneNewline(rest);
  } else if (rest.ends_with("\r\n")) {
    rest.remove_suffix(2);
  } else if (rest.ends_with('\n')) {
    rest.remove_suffix(1);
  }
  std::string fragment = JsonEscape(rest) + "\"";
  value_.clear();
  return fragment;
}

namespace {

// The value of a parameter up to the earliest of `ends` (the first one is its own close tag,
// consumed; the others end it without one). Returns Step's result; `*done` when it ended.
bool StepValue(MarkupParser& p, std::span<const std::string_view> ends, std::string* value,
               bool* done) {
  const std::string_view r = p.Rest();
  const Found found = FindFirst(r, ends);
  if (found.idx >= 0) {
    value->append(r.substr(0, found.pos));
    p.Consume(found.pos + (found.idx == 0 ? ends[0].size() : 0));
    *done = true;
    return true;
  }
  const size_t keep = PartialMarkerAtEnd(r, ends);
  value->append(r.substr(0, r.size() - keep));
  p.Consume(r.size() - keep);
  return false;
}

// Inside a call's body: skips what is not one of the tags the body may hold.
bool SkipJunk(MarkupParser& p, std::span<const std::string_view> tags) {
  const std::string_view r = p.Rest();
  for (std::string_view tag : tags) {
    if (MayBecome(r, tag)) return false;
  }
  const size_t next = r.find('<', 1);
  p.Consume(next == std::string_view::npos ? r.size() : next);
  return true;
}

class Qwen3CoderParser final : public MarkupParser {
 public:
  explicit Qwen3CoderParser(std::vector<ToolSpec> tools) : tools_(std::move(tools)) {}

 private:
  enum class State { kText, kOpen, kFunctionName, kBody, kParameterName, kValue, kClose };

  bool Step(bool eof) override {
    switch (state_) {
      case State::kText: {
        // <function= alone too: the model sometimes leaves <tool_call> out.
        static constexpr std::string_view kMarkers[] = {kToolCallOpen, kFunctionOpen};
        const int m = ScanText(kMarkers, eof);
        if (m < 0) return false;
        BeginTentative(kMarkers[m].size());
        Consume(kMarkers[m].size());
        state_ = m == 0 ? State::kOpen : State::kFunctionName;
        return true;
      }
      case State::kOpen: {
        SkipWhitespace();
        const std::string_view r = Rest();
        if (r.starts_with(kFunctionOpen)) {
          Consume(kFunctionOpen.size());
          state_ = State::kFunctionName;
          return true;
        }
        if (r.empty() || MayBecome(r, kFunctionOpen)) return false;
        Malformed();
        return true;
      }
      case State::kFunctionName: {
        const std::string_view r = Rest();
        const size_t end = r.find('>');
        const std::string_view name = Trim(r.substr(0, end));
        if (name.find_first_of("\n<") != std::string_view::npos || name.size() > kMaxNameBytes ||
            (end != std::string_view::npos && name.empty())) {
          Malformed();
          return true;
        }
        if (end == std::string_view::npos) return false;
        std::string n(name);
        Consume(end + 1);
        args_ = TypedArgs(&tools_, n);
        StartCall(std::move(n));
        state_ = State::kBody;
        return true;
      }
      case State::kBody: {
        SkipWhitespace();
        const std::string_view r = Rest();
        if (r.empty()) return false;
        if (r.starts_with(kParameterOpen)) {
          Consume(kParameterOpen.size());
          state_ = State::kParameterName;
          return true;
        }
        if (r.starts_with(kFunctionClose)) {
          Consume(kFunctionClose.size());
          EmitArgs(args_.Close());
          state_ = State::kClose;
          return true;
        }
        if (r.starts_with(kToolCallClose)) {  // </function> left out
          Consume(kToolCallClose.size());
          EmitArgs(args_.Close());
          EndCall();
          state_ = State::kText;
          return true;
        }
        static constexpr std::string_view kTags[] = {kParameterOpen, kFunctionClose,
                                                     kToolCallClose};
        return SkipJunk(*this, kTags);
      }
      case State::kParameterName: {
        const std::string_view r = Rest();
        const size_t end = r.find('>');
        if (end == std::string_view::npos) return false;
        const std::string parameter(Trim(r.substr(0, end)));
        Consume(end + 1);
        EmitArgs(args_.BeginValue(parameter));
        state_ = State::kValue;
        return true;
      }
      case State::kValue: {
        // </parameter>, or a model that left it out: the next parameter or the function's end.
        static constexpr std::string_view kEnds[] = {kParameterClose, kParameterOpen,
                                                     kFunctionClose, kToolCallClose};
        bool done = false;
        std::string text;
        const bool progress = StepValue(*this, kEnds, &text, &done);
        EmitArgs(args_.FeedValue(text));
        if (done) {
          EmitArgs(args_.EndValue());
          state_ = State::kBody;
        }
        return progress;
      }
      case State::kClose: {
        if (!TakeMarker(*this, kToolCallClose, eof)) return false;
        EndCall();
        state_ = State::kText;
        return true;
      }
    }
    return false;
  }

  void OnMalformed() override { state_ = State::kText; }
  void EndAtEof() override {
    if (state_ == State::kValue) {
      EmitArgs(args_.FeedValue(Rest()));
      EmitArgs(args_.EndValue());
    }
    if (state_ == State::kBody || state_ == State::kParameterName || state_ == State::kValue) {
      EmitArgs(args_.Close());
    }
  }

  std::vector<ToolSpec> tools_;
  State state_ = State::kText;
  TypedArgs args_{nullptr, ""};
};

class Glm45Parser final : public MarkupParser {
 public:
  explicit Glm45Parser(std::vector<ToolSpec> tools) : tools_(std::move(tools)) {}

 private:
  enum class State { kText, kName, kBody, kKey, kValueOpen, kValue };

  bool Step(bool eof) override {
    switch (state_) {
      case State::kText: {
        static constexpr std::string_view kMarkers[] = {kToolCallOpen};
        if (ScanText(kMarkers, eof) < 0) return false;
        BeginTentative(kToolCallOpen.size());
        Consume(kToolCallOpen.size());
        state_ = State::kName;
        return true;
      }
      case State::kName: {  // NAME, up to the line's end or the first tag
        SkipWhitespace();
        const std::string_view r = Rest();
        const size_t end = r.find_first_of("\n<");
        const std::string_view name = Trim(r.substr(0, end));
        if (name.size() > kMaxNameBytes || name.starts_with('{') ||
            (end != std::string_view::npos && name.empty())) {
          Malformed();
          return true;
        }
        if (end == std::string_view::npos) return false;
        std::string n(name);
        Consume(end);
        args_ = TypedArgs(&tools_, n);
        StartCall(std::move(n));
        state_ = State::kBody;
        return true;
      }
      case State::kBody: {
        SkipWhitespace();
        const std::string_view r = Rest();
        if (r.empty()) return false;
        if (r.starts_with(kArgKeyOpen)) {
          Consume(kArgKeyOpen.size());
          key_.clear();
          state_ = State::kKey;
          return true;
        }
        if (r.starts_with(kToolCallClose)) {
          Consume(kToolCallClose.size());
          EmitArgs(args_.Close());
          EndCall();
          state_ = State::kText;
          return true;
        }
        static constexpr std::string_view kTags[] = {kArgKeyOpen, kToolCallClose};
        return SkipJunk(*this, kTags);
      }
      case State::kKey: {
        static constexpr std::string_view kEnds[] = {kArgKeyClose};
        bool done = false;
        const bool progress = StepValue(*this, kEnds, &key_, &done);
        if (done) state_ = State::kValueOpen;
        return progress;
      }
      case State::kValueOpen: {
        SkipWhitespace();
        const std::string_view r = Rest();
        if (r.starts_with(kArgValueOpen)) {
          Consume(kArgValueOpen.size());
          EmitArgs(args_.BeginValue(Trim(key_)));
          state_ = State::kValue;
          return true;
        }
        if (!eof && (r.empty() || MayBecome(r, kArgValueOpen))) return false;
        state_ = State::kBody;  // a key without a value: dropped
        return true;
      }
      case State::kValue: {
        static constexpr std::string_view kEnds[] = {kArgValueClose, kArgKeyOpen, kToolCallClose};
        bool done = false;
        std::string text;
        const bool progress = StepValue(*this, kEnds, &text, &done);
        EmitArgs(args_.FeedValue(text));
        if (done) {
          EmitArgs(args_.EndValue());
          state_ = State::kBody;
        }
        return progress;
      }
    }
    return false;
  }
  void OnMalformed() override { state_ = State::kText; }
  void EndAtEof() override {
    if (state_ == State::kValue) {
      EmitArgs(args_.FeedValue(Rest()));
      EmitArgs(args_.EndValue());
    }
    if (state_ != State::kText && state_ != State::kName) EmitArgs(args_.Close());
  }

  std::vector<ToolSpec> tools_;
  State state_ = State::kText;
  TypedArgs args_{nullptr, ""};
  std::string key_;
};

}  // namespace

std::unique_ptr<ToolCallParser> MakeQwen3CoderParser(std::vector<ToolSpec> tools) {
  return std::make_unique<Qwen3CoderParser>(std::move(tools));
}
std::unique_ptr<ToolCallParser> MakeGlm45Parser(std::vector<ToolSpec> tools) {
  return std::make_unique<Glm45Parser>(std::move(tools));
}

}  // namespace loom::tool_parser_internal
