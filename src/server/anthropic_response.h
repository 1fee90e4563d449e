// Anthropic Messages API response bodies and the JSON of its stream events (the stream's order
// is AnthropicMessagesEncoder's, anthropic_stream_encoder.h).
// usage.input_tokens excludes prompt tokens read from the prefix cache
// (cache_read_input_tokens), as Anthropic counts them.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/choice_collector.h"
#include "server/openai_response.h"

namespace loom {

// "end_turn" (EOS / stop token), "stop_sequence", "max_tokens", "tool_use". `reason` must not be
// an error finish (kAbort / kError): those are answered with an error event.
const char* AnthropicStopReason(ChoiceFinishReason reason);

nlohmann::ordered_json AnthropicUsageJson(const Usage& usage);
// The whole message of a non-streaming response: content blocks thinking (when the choice has
// reasoning), text (unless the choice has only tool calls), tool_use (one per tool call).
nlohmann::ordered_json AnthropicMessageJson(const ResponseMeta& meta, const CollectedChoice& choice,
                                            const Usage& usage);
// message_start: the message with empty content and output_tokens 0.
nlohmann::ordered_json MessageStartJson(const ResponseMeta& meta, const Usage& usage);
// content_block_start / content_block_delta / content_block_stop of the block at `index`.
nlohmann::ordered_json ContentBlockStartJson(int index, nlohmann::ordered_json content_block);
nlohmann::ordered_json ContentBlockDeltaJson(int index, nlohmann::ordered_json delta);
nlohmann::ordered_json ContentBlockStopJson(int index);
nlohmann::ordered_json MessageDeltaJson(const std::string& stop_reason,
                                        const std::optional<std::string>& stop_sequence,
                                        const Usage& usage);

}  // namespace loom
