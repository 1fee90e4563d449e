#include "server/anthropic_response.h"

#include "base/check.h"

namespace loom {

using nlohmann::ordered_json;

const char* AnthropicStopReason(ChoiceFinishReason reason) {
  switch (reason) {
    case ChoiceFinishReason::kStop:
      return "end_turn";
    case ChoiceFinishReason::kStopString:
      return "stop_sequence";
    case ChoiceFinishReason::kLength:
      return "max_tokens";
    case ChoiceFinishReason::kToolCalls:
      return "tool_use";
    case ChoiceFinishReason::kAbort:
    case ChoiceFinishReason::kError:
      break;
  }
  CHECK(false) << "an error finish has no Anthropic stop_reason";
  return "";
}

ordered_json AnthropicUsageJson(const Usage& u) {
  return ordered_json{{"input_tokens", u.prompt_tokens - u.cached_tokens},
                      {"cache_creation_input_tokens", 0},
                      {"cache_read_input_tokens", u.cached_tokens},
                      {"output_tokens", u.completion_tokens}};
}

ordered_json AnthropicMessageJson(const ResponseMeta& meta, const CollectedChoice& choice,
                                  const Usage& usage) {
  ordered_json content = ordered_json::array();
  if (!choice.reasoning.empty()) {
    // No signature: loom's thinking is not signed (clients send it back; loom ignores it).
    content.push_back(
        ordered_json{{"type", "thinking"}, {"thinking", choice.reasoning}, {"signature", ""}});
  }
  if (!choice.text.empty() || choice.tool_calls.empty()) {
    content.push_back(ordered_json{{"type", "text"}, {"text", choice.text}});
  }
  for (const CollectedToolCall& t : choice.tool_calls) {
    // The arguments are the model's JSON text; unparseable ones are passed on as a string.
    ordered_json input = ordered_json::parse(t.arguments, nullptr, /*allow_exceptions=*/false);
    if (input.is_discarded()) input = t.arguments;
    content.push_back(ordered_json{
        {"type", "tool_use"}, {"id", t.id}, {"name", t.name}, {"input", std::move(input)}});
  }
  return ordered_json{
      {"id", meta.id},
      {"type", "message"},
      {"role", "assistant"},
      {"model", meta.model},
      {"content", std::move(content)},
      {"stop_reason", AnthropicStopReason(choice.finish_reason)},
      {"stop_sequence", choice.stop_string ? ordered_json(*choice.stop_string) : ordered_json()},
      {"usage", AnthropicUsageJson(usage)}};
}

ordered_json MessageStartJson(const ResponseMeta& meta, const Usage& usage) {
  Usage u = usage;
  u.completion_tokens = 0;
  return ordered_json{{"type", "message_start"},
                      {"message", ordered_json{{"id", meta.id},
                                               {"type", "message"},
                                               {"role", "assistant"},
                                               {"model", meta.model},
                                               {"content", ordered_json::array()},
                                               {"stop_reason", nullptr},
                                               {"stop_sequence", nullptr},
                                               {"usage", AnthropicUsageJson(u)}}}};
}

ordered_json ContentBlockStartJson(int index, ordered_json content_block) {
  return ordered_json{{"type", "content_block_start"},
                      {"index", index},
                      {"content_block", std::move(content_block)}};
}

ordered_json ContentBlockDeltaJson(int index, ordered_json delta) {
  return ordered_json{
      {"type", "content_block_delta"}, {"index", index}, {"delta", std::move(delta)}};
}

ordered_json ContentBlockStopJson(int index) {
  return ordered_json{{"type", "content_block_stop"}, {"index", index}};
}

ordered_json MessageDeltaJson(const std::string& stop_reason,
                              const std::optional<std::string>& stop_sequence, const Usage& usage) {
  return ordered_json{
      {"type", "message_delta"},
      {"delta", ordered_json{{"stop_reason", stop_reason},
                             {"stop_sequence",
                              stop_sequence ? ordered_json(*stop_sequence) : ordered_json()}}},
      {"usage", ordered_json{{"output_tokens", usage.completion_tokens}}}};
}

}  // namespace loom
