#include "server/responses_request.h"

#include "server/grammar_request.h"
#include "server/json_fields.h"
#include "server/openai_request.h"
#include "server/tool_request.h"

namespace loom {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr int64_t kMaxOutputTokensCap = int64_t{1} << 24;

const json* Member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// Text of a message's content (or a function_call_output's output): a string, or content parts
// input_text / output_text / text (and refusal) joined by newlines.
Status PartsText(const json& content, const std::string& name, std::string* param,
                 std::string* text) {
  return ForEachContentPart(
      content, name, "content parts", param, text,
      [&](const json& part, const std::string& pname, const std::string& type) -> Status {
        const char* key = type == "refusal" ? "refusal" : "text";
        if (type == "input_text" || type == "output_text" || type == "text" || type == "refusal") {
          if (!part.contains(key) || !part[key].is_string()) {
            return FieldError(param, pname + "." + key, pname + "." + key + " must be a string");
          }
          if (!text->empty()) text->push_back('\n');
          text->append(part[key].get<std::string>());
          return OkStatus();
        }
        if (type == "input_image" || type == "input_file" || type == "input_audio") {
          return UnsupportedFieldError(param, pname,
                                       "content part type \"" + type + "\" (images/audio/files)");
        }
        return FieldError(param, pname + ".type",
                          pname + ".type \"" + type +
                              "\" is unknown; expected input_text, output_text or refusal");
      });
}

Status RequiredString(const json& item, const char* key, const std::string& name,
                      std::string* param, std::string* out) {
  const json* v = Member(item, key);
  if (v == nullptr || !v->is_string() || v->get<std::string>().empty()) {
    return FieldError(param, name + "." + key,
                      name + "." + key + " is required and must be a non-empty string");
  }
  *out = v->get<std::string>();
  return OkStatus();
}

// Turns `input` items into normalized messages, appended to *messages (which may already hold a
// previous response's conversation: function_call_output items may answer its calls).
class InputReader {
 public:
  InputReader(ordered_json* messages, std::string* param) : messages_(messages), param_(param) {}

  Status Read(const json& input) {
    if (input.is_string()) {
      messages_->push_back(ordered_json{{"role", "user"}, {"content", input.get<std::string>()}});
      return OkStatus();
    }
    if (!input.is_array()) {
      return FieldError(param_, "input",
                        "input must be a string or an array of items, got " + JsonTypeName(input));
    }
    for (size_t i = 0; i < input.size(); ++i) {
      RETURN_IF_ERROR(Item(input[i], "input[" + std::to_string(i) + "]"));
    }
    return OkStatus();
  }

 private:
  Status Item(const json& item, const std::string& name) {
    if (!item.is_object()) {
      return FieldError(param_, name, name + " must be an object, got " + JsonTypeName(item));
    }
    std::string type = "message";  // EasyInputMessage: {role, content} without a type
    if (const json* t = Member(item, "type")) {
      if (!t->is_string())
        return FieldError(param_, name + ".type", name + ".type must be a string");
      type = t->get<std::string>();
    }
    if (type == "message") return Message(item, name);
    if (type == "function_call") return FunctionCall(item, name);
    if (type == "function_call_output") return FunctionCallOutput(item, name);
    if (type == "reasoning") return Reasoning(item, name);
    if (type == "item_reference") {
      return UnsupportedFieldError(
          param_, name + ".type", "item_reference (send the item itself, or previous_response_id)");
    }
    if (type.find("_call") != std::string::npos) {
      return UnsupportedFieldError(
          param_, name + ".type",
          "input item type \"" + type + "\" (loom runs function tools only)");
    }
    return FieldError(param_, name + ".type",
                      name + ".type \"" + type +
                          "\" is unknown; expected message, function_call, function_call_output "
                          "or reasoning");
  }

  Status Message(const json& item, const std::string& name) {
    const json* role_v = Member(item, "role");
    if (role_v == nullptr || !role_v->is_string()) {
      return FieldError(param_, name + ".role", name + ".role is required and must be a string");
    }
    std::string role = role_v->get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant") {
      return FieldError(param_, name + ".role",
                        name + ".role \"" + role_v->get<std::string>() +
                            "\" is unknown; expected user, assistant, system or developer");
    }
    std::string text;
    RETURN_IF_ERROR(RequiredText(item, "content", name, &text));
    ordered_json m{{"role", role}, {"content", text}};
    if (role == "assistant") TakeReasoning(&m);
    messages_->push_back(std::move(m));
    return OkStatus();
  }

  // The text of item[key] (a string or text parts), which must be present.
  Status RequiredText(const json& item, const std::string& key, const std::string& name,
                      std::string* text) {
    const json* v = Member(item, key.c_str());
    if (v == nullptr)
      return FieldError(param_, name + "." + key, name + "." + key + " is required");
    return PartsText(*v, name + "." + key, param_, text);
  }

  Status FunctionCall(const json& item, const std::string& name) {
    std::string call_id, fn;
    RETURN_IF_ERROR(RequiredString(item, "call_id", name, param_, &call_id));
    RETURN_IF_ERROR(RequiredString(item, "name", name, param_, &fn));
    json args = "{}";
    if (const json* a = Member(item, "arguments")) {
      if (!a->is_string()) {
        return FieldError(param_, name + ".arguments",
                          name + ".arguments must be a string of JSON, got " + JsonTypeName(*a));
      }
      args = *a;
    }
    // The calls of one turn follow its message: they become that assistant message's tool_calls.
    if (messages_->empty() || (*messages_).back()["role"] != "assistant" ||
        !pending_reasoning_.empty()) {
      ordered_json m{{"role", "assistant"}, {"content", ""}};
      TakeReasoning(&m);
      messages_->push_back(std::move(m));
    }
    ordered_json& m = messages_->back();
    if (!m.contains("tool_calls")) m["tool_calls"] = ordered_json::array();
    m["tool_calls"].push_back(TemplateToolCall(call_id, fn, args));
    return OkStatus();
  }

  Status FunctionCallOutput(const json& item, const std::string& name) {
    std::string call_id;
    RETURN_IF_ERROR(RequiredString(item, "call_id", name, param_, &call_id));
    const std::string fn = ToolNameForCallId(*messages_, call_id);
    if (fn.empty()) {
      return FieldError(param_, name + ".call_id",
                        name + ".call_id \"" + call_id +
                            "\" answers no function_call item before it (in input or the "
                            "previous response)");
    }
    std::string text;
    RETURN_IF_ERROR(RequiredText(item, "output", name, &text));
    messages_->push_back(
        ordered_json{{"role", "tool"}, {"content", text}, {"tool_call_id", call_id}, {"name", fn}});
    return OkStatus();
  }

  // A reasoning item: its text (content, else summary) goes to the next assistant message.
  // encrypted_content is not ours to read and is dropped.
  Status Reasoning(const json& item, const std::string& name) {
    std::string text;
    for (const char* key : {"content", "summary"}) {
      const json* parts = Member(item, key);
      if (parts == nullptr) continue;
      if (!parts->is_array()) {
        return FieldError(param_, name + "." + key, name + "." + key + " must be an array");
      }
      for (size_t j = 0; j < parts->size(); ++j) {
        const json& p = (*parts)[j];
        if (!p.is_object() || !p.contains("text") || !p["text"].is_string()) {
          const std::string pname = name + "." + key + "[" + std::to_string(j) + "]";
          return FieldError(param_, pname, pname + " must be an object with a string \"text\"");
        }
        if (!text.empty()) text.push_back('\n');
        text += p["text"].get<std::string>();
      }
      if (!text.empty()) break;
    }
    if (!pending_reasoning_.empty() && !text.empty()) pending_reasoning_.push_back('\n');
    pending_reasoning_ += text;
    return OkStatus();
  }

  void TakeReasoning(ordered_json* assistant) {
    if (!pending_reasoning_.empty()) (*assistant)["reasoning_content"] = pending_reasoning_;
    pending_reasoning_.clear();
  }

  ordered_json* messages_;
  std::string* param_;
  std::string pending_reasoning_;
};

Status ParseReasoning(const JsonFields& f, const RequestDefaults& d, ResponsesRequest* out) {
  GenerationRequest& g = out->gen;
  ordered_json echo{{"effort", nullptr}, {"summary", nullptr}};
  if (const json* v = f.Find("reasoning")) {
    if (!v->is_object()) {
      return f.Error("reasoning", "reasoning must be an object, got " + JsonTypeName(*v));
    }
    if (const json* e = Member(*v, "effort")) {
      static const char* kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
      bool known = false;
      for (const char* k : kEfforts) known = known || (e->is_string() && *e == k);
      if (!known) {
        return f.Error("reasoning.effort",
                       "reasoning.effort must be one of none, minimal, low, medium, high, xhigh");
      }
      const std::string effort = e->get<std::string>();
      g.template_kwargs["enable_thinking"] = effort != "none";
      g.template_kwargs["reasoning_effort"] = effort;
      echo["effort"] = effort;
    }
    if (const json* s = Member(*v, "summary")) {
      if (!s->is_string())
        return f.Error("reasoning.summary", "reasoning.summary must be a string");
      echo["summary"] = *s;
    }
  }
  if (!g.template_kwargs.contains("enable_thinking") && d.enable_thinking.has_value()) {
    g.template_kwargs["enable_thinking"] = *d.enable_thinking;
  }
  out->echo["reasoning"] = std::move(echo);
  return OkStatus();
}

Status ParseMetadata(const JsonFields& f, ResponsesRequest* out) {
  out->echo["metadata"] = ordered_json::object();
  const json* v = f.Find("metadata");
  if (v == nullptr) return OkStatus();
  if (!v->is_object()) {
    return f.Error("metadata", "metadata must be an object of strings, got " + JsonTypeName(*v));
  }
  if (v->size() > 16) return f.Error("metadata", "metadata has more than 16 keys");
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it->is_string()) {
      return f.Error("metadata." + it.key(), "metadata." + it.key() + " must be a string");
    }
  }
  out->echo["metadata"] = *v;
  return OkStatus();
}

// A float sampling parameter as the number it was written as (0.7, not 0.699999988...).
double EchoNumber(float v) { return std::stod(std::to_string(v)); }

StatusOr<ResponsesRequest> Parse(const std::string& body, const RequestDefaults& d,
                                 ResponseStore* store, std::string* param) {
  ASSIGN_OR_RETURN(json j, ParseJsonObject(body, param));
  ResponsesRequest out;
  GenerationRequest& g = out.gen;
  g.kind = ApiKind::kResponses;
  JsonFields f(j, param);
  // Fields of this API that ask for what loom does not have.
  for (const char* key : {"background", "conversation", "prompt"}) {
    const json* v = f.Find(key);
    if (v != nullptr && !(v->is_boolean() && !v->get<bool>())) {
      return UnsupportedFieldError(param, key, std::string("\"") + key + "\"");
    }
  }
  RETURN_IF_ERROR(ParseOpenAiSampling(j, d, &g, param));
  if (g.n != 1) return f.Error("n", "n must be 1: a response has one output");
  bool has_max = false;
  int max_output = 0;
  RETURN_IF_ERROR(f.Int("max_output_tokens", 1, kMaxOutputTokensCap, &max_output, &has_max));
  if (has_max) g.params.max_tokens = max_output;
  g.max_tokens_set = g.params.max_tokens > 0;
  // An upper bound, cut to what the context leaves, as OpenAI treats it.
  g.max_tokens_is_cap = true;
  RETURN_IF_ERROR(f.Bool("store", &out.store));
  RETURN_IF_ERROR(f.Bool("parallel_tool_calls", &g.parallel_tool_calls));
  if (const json* v = f.Find("include")) {
    if (!v->is_array()) return f.Error("include", "include must be an array of strings");
  }
  if (const json* v = f.Find("truncation")) {
    if (!v->is_string() || (*v != "auto" && *v != "disabled")) {
      return f.Error("truncation", "truncation must be \"auto\" or \"disabled\"");
    }
  }
  RETURN_IF_ERROR(ParseMetadata(f, &out));
  RETURN_IF_ERROR(ParseReasoning(f, d, &out));

  // Tools (flat function tools; namespaces flattened; web_search skipped), tool_choice.
  const ordered_json ordered = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (const json* v = f.Find("tools")) {
    const ordered_json* ordered_tools =
        ordered.is_object() && ordered.contains("tools") ? &ordered["tools"] : nullptr;
    RETURN_IF_ERROR(ParseResponsesTools(*v, ordered_tools, &g, &out.tool_namespaces, param));
  }
  if (const json* v = f.Find("tool_choice")) {
    RETURN_IF_ERROR(ParseResponsesToolChoice(*v, &g, param));
  }
  if (const json* v = f.Find("text"))
    RETURN_IF_ERROR(ParseResponsesTextFormat(*v, body, &g, param));

  // The conversation: the previous response's, then this input.
  RETURN_IF_ERROR(f.String("previous_response_id", &out.previous_response_id));
  if (!out.previous_response_id.empty()) {
    std::shared_ptr<const StoredResponse> prev =
        store != nullptr ? store->Get(out.previous_response_id) : nullptr;
    if (prev == nullptr) {
      *param = "previous_response_id";
      return NotFoundError("previous_response_id: no stored response has the id \"" +
                           out.previous_response_id +
                           "\" (it was stored with store: false, evicted from the last "
                           "--responses-store responses, or never existed)");
    }
    out.conversation = prev->conversation;
  }
  const json* input = f.Find("input");
  if (input == nullptr && out.conversation.empty()) return f.Error("input", "input is required");
  if (input != nullptr) {
    const size_t before = out.conversation.size();
    InputReader reader(&out.conversation, param);
    RETURN_IF_ERROR(reader.Read(*input));
    if (out.conversation.size() == before && before == 0) {
      return f.Error("input", "input must not be empty");
    }
  }
  std::string instructions;
  RETURN_IF_ERROR(f.String("instructions", &instructions));
  if (!instructions.empty()) {
    g.messages.push_back(ordered_json{{"role", "system"}, {"content", instructions}});
  }
  for (const ordered_json& m : out.conversation) g.messages.push_back(m);

  // What the response object repeats.
  ordered_json& e = out.echo;
  e["instructions"] = instructions.empty() ? ordered_json() : ordered_json(instructions);
  e["max_output_tokens"] = has_max ? ordered_json(max_output) : ordered_json();
  e["parallel_tool_calls"] = g.parallel_tool_calls;
  e["previous_response_id"] =
      out.previous_response_id.empty() ? ordered_json() : ordered_json(out.previous_response_id);
  e["store"] = out.store;
  e["temperature"] = EchoNumber(g.params.temperature);
  e["text"] = ordered_json{{"format", {{"type", "text"}}}};
  if (ordered.is_object() && ordered.contains("text") && ordered["text"].is_object() &&
      ordered["text"].contains("format") && ordered["text"]["format"].is_object()) {
    e["text"] = ordered_json{{"format", ordered["text"]["format"]}};
  }
  e["tool_choice"] = "auto";
  if (ordered.is_object() && ordered.contains("tool_choice") && !ordered["tool_choice"].is_null()) {
    e["tool_choice"] = ordered["tool_choice"];
  }
  e["tools"] = ordered.is_object() && ordered.contains("tools") && ordered["tools"].is_array()
                   ? ordered["tools"]
                   : ordered_json::array();
  e["top_p"] = EchoNumber(g.params.top_p);
  e["truncation"] = "disabled";
  e["user"] = g.user.empty() ? ordered_json() : ordered_json(g.user);
  return out;
}

}  // namespace

StatusOr<ResponsesRequest> ParseResponsesRequest(const std::string& body,
                                                 const RequestDefaults& defaults,
                                                 ResponseStore* store, std::string* param) {
  return CatchJsonErrors([&] { return Parse(body, defaults, store, param); });
}

}  // namespace loom
