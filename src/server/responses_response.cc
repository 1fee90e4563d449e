#include "server/responses_response.h"

#include "base/check.h"
#include "server/openai_response.h"
#include "server/response_id.h"
#include "server/tool_request.h"

namespace loom {

using nlohmann::ordered_json;
using Kind = ResponsesOutputItem::Kind;

const char* ResponsesStatus(ChoiceFinishReason reason) {
  switch (reason) {
    case ChoiceFinishReason::kStop:
    case ChoiceFinishReason::kStopString:
    case ChoiceFinishReason::kToolCalls:
      return "completed";
    case ChoiceFinishReason::kLength:
      return "incomplete";
    case ChoiceFinishReason::kAbort:
    case ChoiceFinishReason::kError:
      break;
  }
  CHECK(false) << "an error finish has no Responses status";
  return "";
}

ordered_json OutputItemJson(const ResponsesOutputItem& item, const char* status) {
  const bool done = std::string(status) == "completed";
  switch (item.kind) {
    case Kind::kReasoning: {
      // The <think> text is the reasoning's content (reasoning_text); loom writes no summaries.
      ordered_json content = ordered_json::array();
      if (done) content.push_back(ordered_json{{"type", "reasoning_text"}, {"text", item.text}});
      return ordered_json{{"id", item.id},
                          {"type", "reasoning"},
                          {"summary", ordered_json::array()},
                          {"content", std::move(content)},
                          {"status", status}};
    }
    case Kind::kMessage: {
      ordered_json content = ordered_json::array();
      if (done) {
        content.push_back(ordered_json{{"type", "output_text"},
                                       {"text", item.text},
                                       {"annotations", ordered_json::array()},
                                       {"logprobs", ordered_json::array()}});
      }
      return ordered_json{{"id", item.id},
                          {"type", "message"},
                          {"status", status},
                          {"role", "assistant"},
                          {"content", std::move(content)}};
    }
    case Kind::kFunctionCall: {
      ordered_json j{{"id", item.id},     {"type", "function_call"},
                     {"status", status},  {"call_id", item.call_id},
                     {"name", item.name}, {"arguments", done ? item.arguments : ""}};
      if (!item.name_space.empty()) j["namespace"] = item.name_space;
      return j;
    }
  }
  return ordered_json();
}

ordered_json ResponsesUsageJson(const Usage& u, int reasoning_tokens) {
  ordered_json j{{"input_tokens", u.prompt_tokens},
                 {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
                 {"output_tokens", u.completion_tokens},
                 {"output_tokens_details",
                  {{"reasoning_tokens", std::min(reasoning_tokens, u.completion_tokens)}}},
                 {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  if (u.speculation.has_value()) j["speculation"] = SpeculationJson(*u.speculation);
  return j;
}

ordered_json ResponseObjectJson(const ResponseMeta& meta, const ordered_json& echo,
                                const std::string& status,
                                const std::vector<ResponsesOutputItem>& output,
                                const ordered_json& usage, const ApiError* error) {
  ordered_json items = ordered_json::array();
  const char* item_status = status == "in_progress" ? "in_progress" : "completed";
  if (status == "incomplete") item_status = "incomplete";
  for (const ResponsesOutputItem& item : output) {
    ordered_json j = OutputItemJson(item, "completed");
    j["status"] = item_status;
    items.push_back(std::move(j));
  }
  ordered_json r{{"id", meta.id},    {"object", "response"}, {"created_at", meta.created},
                 {"status", status}, {"error", nullptr},     {"incomplete_details", nullptr}};
  if (error != nullptr) {
    r["error"] = ordered_json{{"code", error->code.empty() ? "server_error" : error->code},
                              {"message", error->message}};
  }
  if (status == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  r["instructions"] = echo.value("instructions", ordered_json());
  r["max_output_tokens"] = echo.value("max_output_tokens", ordered_json());
  r["model"] = meta.model;
  r["output"] = std::move(items);
  for (auto it = echo.begin(); it != echo.end(); ++it) {
    if (!r.contains(it.key())) r[it.key()] = it.value();
  }
  r["usage"] = usage;
  return r;
}

std::vector<ResponsesOutputItem> OutputItemsOf(
    const CollectedChoice& choice, const std::map<std::string, std::string>& tool_namespaces) {
  std::vector<ResponsesOutputItem> out;
  if (!choice.reasoning.empty()) {
    out.push_back({Kind::kReasoning, NewResponseId("rs_"), choice.reasoning, "", "", "", ""});
  }
  if (!choice.text.empty() || choice.tool_calls.empty()) {
    out.push_back({Kind::kMessage, NewResponseId("msg_"), choice.text, "", "", "", ""});
  }
  for (const CollectedToolCall& t : choice.tool_calls) {
    auto ns = tool_namespaces.find(t.name);
    out.push_back({Kind::kFunctionCall, NewResponseId("fc_"), "", t.id, t.name, t.arguments,
                   ns == tool_namespaces.end() ? "" : ns->second});
  }
  return out;
}

ordered_json OutputAsMessage(const std::vector<ResponsesOutputItem>& output) {
  ordered_json m{{"role", "assistant"}, {"content", ""}};
  std::string text, reasoning;
  ordered_json calls = ordered_json::array();
  for (const ResponsesOutputItem& item : output) {
    switch (item.kind) {
      case Kind::kReasoning:
        reasoning += item.text;
        break;
      case Kind::kMessage:
        text += item.text;
        break;
      case Kind::kFunctionCall:
        calls.push_back(TemplateToolCall(item.call_id, item.name, item.arguments));
        break;
    }
  }
  m["content"] = text;
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  return m;
}

}  // namespace loom
