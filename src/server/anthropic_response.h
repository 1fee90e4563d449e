// Anthropic Messages API response bodies and stream events.
//   message_start → content_block_start → ping → content_block_delta* → content_block_stop →
//   message_delta (stop_reason, usage.output_tokens) → message_stop
// usage.input_tokens excludes prompt tokens read from the prefix cache
// (cache_read_input_tokens), as Anthropic counts them.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/openai_response.h"

namespace loom {

// "end_turn" (EOS / stop token), "stop_sequence", "max_tokens".
std::string AnthropicStopReason(const std::string& finish_reason,
                                const std::optional<std::string>& stop_string);

nlohmann::ordered_json AnthropicUsageJson(const Usage& usage);
nlohmann::ordered_json AnthropicMessageJson(const ResponseMeta& meta, const std::string& text,
                                            const std::string& stop_reason,
                                            const std::optional<std::string>& stop_sequence,
                                            const Usage& usage);
// message_start: the message with empty content and output_tokens 0.
nlohmann::ordered_json MessageStartJson(const ResponseMeta& meta, const Usage& usage);
nlohmann::ordered_json TextDeltaJson(const std::string& text);
nlohmann::ordered_json MessageDeltaJson(const std::string& stop_reason,
                                        const std::optional<std::string>& stop_sequence,
                                        const Usage& usage);

}  // namespace loom
