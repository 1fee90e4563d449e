#include "server/anthropic_response.h"

namespace loom {

using nlohmann::ordered_json;

std::string AnthropicStopReason(const std::string& finish_reason,
                                const std::optional<std::string>& stop_string) {
  if (finish_reason == "length") return "max_tokens";
  if (stop_string.has_value()) return "stop_sequence";
  return "end_turn";
}

ordered_json AnthropicUsageJson(const Usage& u) {
  return ordered_json{{"input_tokens", u.prompt_tokens - u.cached_tokens},
                      {"cache_creation_input_tokens", 0},
                      {"cache_read_input_tokens", u.cached_tokens},
                      {"output_tokens", u.completion_tokens}};
}

ordered_json AnthropicMessageJson(const ResponseMeta& meta, const std::string& text,
                                  const std::string& stop_reason,
                                  const std::optional<std::string>& stop_sequence,
                                  const Usage& usage) {
  ordered_json content = ordered_json::array();
  content.push_back(ordered_json{{"type", "text"}, {"text", text}});
  return ordered_json{{"id", meta.id},
                      {"type", "message"},
                      {"role", "assistant"},
                      {"model", meta.model},
                      {"content", std::move(content)},
                      {"stop_reason", stop_reason},
                      {"stop_sequence", stop_sequence ? ordered_json(*stop_sequence)
                                                      : ordered_json()},
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

ordered_json TextDeltaJson(const std::string& text) {
  return ordered_json{{"type", "content_block_delta"},
                      {"index", 0},
                      {"delta", ordered_json{{"type", "text_delta"}, {"text", text}}}};
}

ordered_json MessageDeltaJson(const std::string& stop_reason,
                              const std::optional<std::string>& stop_sequence,
                              const Usage& usage) {
  return ordered_json{
      {"type", "message_delta"},
      {"delta", ordered_json{{"stop_reason", stop_reason},
                             {"stop_sequence",
                              stop_sequence ? ordered_json(*stop_sequence) : ordered_json()}}},
      {"usage", ordered_json{{"output_tokens", usage.completion_tokens}}}};
}

}  // namespace loom
