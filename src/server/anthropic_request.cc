#include "server/anthropic_request.h"

#include <algorithm>

#include "server/grammar_request.h"
#include "server/json_fields.h"
#include "server/tool_request.h"

namespace loom {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Text of Anthropic content: a string or an array of blocks.
Status BlocksText(const json& content, const std::string& name, std::string* param,
                  std::string* text) {
  return ForEachContentPart(
      content, name, "content blocks", param, text,
      [&](const json& b, const std::string& bname, const std::string& type) -> Status {
        if (type == "text") {
          if (!b.contains("text") || !b["text"].is_string()) {
            return FieldError(param, bname + ".text", bname + ".text must be a string");
          }
          text->append(b["text"].get<std::string>());
        } else if (type == "image" || type == "document") {
          return UnsupportedFieldError(param, bname, "\"" + type + "\" content blocks");
        } else if (type == "tool_use" || type == "tool_result" || type == "server_tool_use") {
          return FieldError(
              param, bname,
              bname + ": a \"" + type + "\" block is only allowed in a message's content");
        } else if (type != "thinking" && type != "redacted_thinking") {
          // (earlier turns' reasoning is dropped, as templates do)
          return FieldError(param, bname + ".type", bname + ".type \"" + type + "\" is unknown");
        }
        return OkStatus();
      });
}

// One Anthropic message → normalized messages (tool_request.h): an assistant turn's text,
// thinking and tool_use blocks become one assistant message with tool_calls; a user turn's
// tool_result blocks become tool messages and its text blocks user messages, in block order.
Status AppendMessage(const json& m, const std::string& name, GenerationRequest* out,
                     std::string* param) {
  const std::string role = m["role"].get<std::string>();
  const json& content = m["content"];
  if (content.is_string() || role == "system") {
    std::string text;
    RETURN_IF_ERROR(BlocksText(content, name + ".content", param, &text));
    if (text.empty() && role != "assistant") {
      return FieldError(param, name + ".content", name + ".content must not be empty");
    }
    out->messages.push_back(ordered_json{{"role", role}, {"content", text}});
    return OkStatus();
  }
  if (!content.is_array()) {
    return FieldError(param, name + ".content",
                      name + ".content must be a string or an array of content blocks, got " +
                          JsonTypeName(content));
  }
  ordered_json assistant{{"role", "assistant"}, {"content", ""}};
  std::string reasoning;
  ordered_json calls = ordered_json::array();
  std::string user_text;
  bool has_user_text = false;
  auto flush_user = [&] {
    if (has_user_text)
      out->messages.push_back(ordered_json{{"role", "user"}, {"content", user_text}});
    user_text.clear();
    has_user_text = false;
  };
  for (size_t j = 0; j < content.size(); ++j) {
    const json& b = content[j];
    const std::string bname = name + ".content[" + std::to_string(j) + "]";
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) {
      return FieldError(param, bname, bname + " must be an object with a string \"type\"");
    }
    const std::string type = b["type"].get<std::string>();
    if (type == "tool_use") {
      if (role != "assistant") {
        return FieldError(param, bname, bname + ": tool_use blocks belong to assistant messages");
      }
      if (!b.contains("id") || !b["id"].is_string()) {
        return FieldError(param, bname + ".id", bname + ".id is required and must be a string");
      }
      if (!b.contains("name") || !b["name"].is_string()) {
        return FieldError(param, bname + ".name", bname + ".name is required and must be a string");
      }
      const json input = b.contains("input") ? b["input"] : json::object();
      if (!input.is_object()) {
        return FieldError(param, bname + ".input", bname + ".input must be an object");
      }
      calls.push_back(
          TemplateToolCall(b["id"].get<std::string>(), b["name"].get<std::string>(), input));
    } else if (type == "tool_result") {
      if (role != "user") {
        return FieldError(param, bname, bname + ": tool_result blocks belong to user messages");
      }
      if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string()) {
        return FieldError(param, bname + ".tool_use_id",
                          bname + ".tool_use_id is required and must be a string");
      }
      const std::string id = b["tool_use_id"].get<std::string>();
      const std::string fn = ToolNameForCallId(out->messages, id);
      if (fn.empty()) {
        return FieldError(param, bname + ".tool_use_id",
                          bname + ".tool_use_id \"" + id +
                              "\" answers no tool_use block of an earlier assistant message");
      }
      std::string text;
      if (b.contains("content") && !b["content"].is_null()) {
        RETURN_IF_ERROR(BlocksText(b["content"], bname + ".content", param, &text));
      }
      flush_user();
      out->messages.push_back(
          ordered_json{{"role", "tool"}, {"content", text}, {"tool_call_id", id}, {"name", fn}});
    } else if ((type == "thinking" || type == "redacted_thinking") && role == "assistant") {
      if (type == "thinking" && b.contains("thinking") && b["thinking"].is_string()) {
        reasoning += b["thinking"].get<std::string>();
      }
    } else {
      std::string text;
      RETURN_IF_ERROR(BlocksText(json::array({b}), name + ".content", param, &text));
      if (type != "text") continue;  // thinking in a user turn: nothing to render
      if (role == "assistant") {
        assistant["content"] = assistant["content"].get<std::string>() + text;
      } else {
        user_text += text;
        has_user_text = true;
      }
    }
  }
  if (role == "assistant") {
    if (!calls.empty()) assistant["tool_calls"] = std::move(calls);
    if (!reasoning.empty()) assistant["reasoning_content"] = reasoning;
    out->messages.push_back(std::move(assistant));
    return OkStatus();
  }
  const size_t before = out->messages.size();
  flush_user();
  if (out->messages.size() == before &&
      (out->messages.empty() || out->messages.back()["role"] != "tool")) {
    return FieldError(param, name + ".content", name + ".content must not be empty");
  }
  return OkStatus();
}

// thinking.budget_tokens: an integer >= 1 (Anthropic asks >= 1024; loom takes any positive
// budget) below max_tokens (when the request has one), as Anthropic requires.
Status ParseBudgetTokens(const json& v, bool has_max, int max_tokens, GenerationRequest* out,
                         std::string* param) {
  const std::string name = "thinking.budget_tokens";
  if (!v.is_number_integer()) {
    return FieldError(param, name, name + " must be an integer, got " + v.dump());
  }
  const int64_t budget = v.get<int64_t>();
  if (budget < 1) return FieldError(param, name, name + " must be >= 1, got " + v.dump());
  if (has_max && budget >= max_tokens) {
    return FieldError(param, name,
                      name + " (" + v.dump() + ") must be less than max_tokens (" +
                          std::to_string(max_tokens) + ")");
  }
  out->reasoning_budget = static_cast<int>(std::min<int64_t>(budget, int64_t{1} << 30));
  out->reasoning_budget_field = name;
  return OkStatus();
}

StatusOr<GenerationRequest> ParseMessages(const std::string& body, const RequestDefaults& d,
                                          std::string* param, bool for_count_tokens) {
  ASSIGN_OR_RETURN(json j, ParseJsonObject(body, param));
  GenerationRequest out;
  out.kind = ApiKind::kMessages;
  JsonFields f(j, param);
  SamplingParams& p = out.params;
  RETURN_IF_ERROR(f.String("model", &out.model));
  p.temperature = d.temperature;
  p.top_p = d.top_p;
  p.top_k = d.top_k;
  RETURN_IF_ERROR(f.Number("temperature", 0.0, 1.0, &p.temperature));
  RETURN_IF_ERROR(f.Number("top_p", 0.0, 1.0, &p.top_p));
  if (p.top_p <= 0.0f) return f.Error("top_p", "top_p must be in (0, 1], got 0");
  RETURN_IF_ERROR(f.Int("top_k", 0, 1 << 20, &p.top_k));
  bool has_max = false;
  RETURN_IF_ERROR(f.Int("max_tokens", 1, int64_t{1} << 24, &p.max_tokens, &has_max));
  if (!has_max) {
    if (!for_count_tokens) return f.Error("max_tokens", "max_tokens is required");
    p.max_tokens = 1;
  }
  out.max_tokens_set = true;
  out.max_tokens_is_cap = true;
  RETURN_IF_ERROR(f.Bool("stream", &out.stream));
  if (const json* v = f.Find("stop_sequences")) {
    if (!v->is_array()) {
      return f.Error("stop_sequences",
                     "stop_sequences must be an array of strings, got " + JsonTypeName(*v));
    }
    if (static_cast<int>(v->size()) > d.max_stop_strings) {
      return f.Error("stop_sequences", "stop_sequences has too many entries (at most " +
                                           std::to_string(d.max_stop_strings) + ")");
    }
    for (size_t i = 0; i < v->size(); ++i) {
      std::string name = "stop_sequences[" + std::to_string(i) + "]";
      if (!(*v)[i].is_string() || (*v)[i].get<std::string>().empty()) {
        return f.Error(name, name + " must be a non-empty string");
      }
      out.stop.push_back((*v)[i].get<std::string>());
    }
  }
  if (const json* v = f.Find("tools")) RETURN_IF_ERROR(ParseAnthropicTools(*v, &out, param));
  RestoreToolSchemaOrder(body, &out);
  if (const json* v = f.Find("tool_choice")) {
    RETURN_IF_ERROR(ParseAnthropicToolChoice(*v, &out, param));
  }
  if (const json* v = f.Find("thinking")) {
    if (!v->is_object() || !v->contains("type") || !(*v)["type"].is_string()) {
      return f.Error("thinking", "thinking must be an object with a string \"type\"");
    }
    std::string type = (*v)["type"].get<std::string>();
    // "adaptive" lets the model decide; for a chat template that is thinking on.
    if (type != "enabled" && type != "disabled" && type != "adaptive") {
      return f.Error("thinking.type",
                     "thinking.type must be \"enabled\", \"adaptive\" or \"disabled\"");
    }
    out.template_kwargs["enable_thinking"] = type != "disabled";
    if (type == "enabled" && v->contains("budget_tokens")) {
      RETURN_IF_ERROR(ParseBudgetTokens((*v)["budget_tokens"], has_max, p.max_tokens, &out, param));
    }
  } else if (d.enable_thinking.has_value()) {
    out.template_kwargs["enable_thinking"] = *d.enable_thinking;
  }
  if (const json* v = f.Find("system")) {
    std::string text;
    RETURN_IF_ERROR(BlocksText(*v, "system", param, &text));
    if (!text.empty()) out.messages.push_back(ordered_json{{"role", "system"}, {"content", text}});
  }
  const json* msgs = f.Find("messages");
  if (msgs == nullptr) return f.Error("messages", "messages is required");
  if (!msgs->is_array()) {
    return f.Error("messages", "messages must be an array, got " + JsonTypeName(*msgs));
  }
  if (msgs->empty()) return f.Error("messages", "messages must not be empty");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    std::string name = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return FieldError(param, name, name + " must be an object");
    if (!m.contains("role") || !m["role"].is_string()) {
      return FieldError(param, name + ".role", name + ".role is required and must be a string");
    }
    std::string role = m["role"].get<std::string>();
    // "system" turns mid-conversation: Claude Code sends them (per-turn instructions).
    if (role != "user" && role != "assistant" && role != "system") {
      return FieldError(
          param, name + ".role",
          name + ".role \"" + role + "\" is unknown; expected user, assistant or system");
    }
    if (!m.contains("content") || m["content"].is_null()) {
      return FieldError(param, name + ".content", name + ".content is required");
    }
    RETURN_IF_ERROR(AppendMessage(m, name, &out, param));
  }
  // A trailing assistant message is a prefill: the reply continues it.
  if (out.messages.back()["role"] == "assistant") out.add_generation_prompt = false;
  return out;
}

}  // namespace

StatusOr<GenerationRequest> ParseMessagesRequest(const std::string& body, const RequestDefaults& d,
                                                 std::string* param, bool for_count_tokens) {
  return CatchJsonErrors([&] { return ParseMessages(body, d, param, for_count_tokens); });
}

}  // namespace loom
