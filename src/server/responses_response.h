// Responses API bodies: the response object (`object: "response"`), its output items and usage,
// in the shapes of OpenAI's API. Both the stream encoder (responses_stream_encoder.h) and the
// non-streaming route build them from the same ResponsesOutputItem list.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/choice_collector.h"
#include "server/openai_response.h"

namespace loom {

// One entry of a response's `output`.
struct ResponsesOutputItem {
  enum class Kind { kReasoning, kMessage, kFunctionCall };
  Kind kind = Kind::kMessage;
  std::string id;    // "rs_…", "msg_…", "fc_…"
  std::string text;  // kReasoning: the reasoning text; kMessage: the output text
  // kFunctionCall: the call (arguments: JSON text) and the namespace of its tool ("" = none).
  std::string call_id;
  std::string name;
  std::string arguments;
  std::string name_space;
};

// The status a finished choice gives its response: "completed", or "incomplete" for a length
// finish (incomplete_details.reason "max_output_tokens"). Not for error finishes.
const char* ResponsesStatus(ChoiceFinishReason reason);

// One output item. `status`: "in_progress" (output_item.added) or "completed".
nlohmann::ordered_json OutputItemJson(const ResponsesOutputItem& item, const char* status);

// usage: input_tokens (+ input_tokens_details.cached_tokens), output_tokens (+
// output_tokens_details.reasoning_tokens), total_tokens.
nlohmann::ordered_json ResponsesUsageJson(const Usage& usage, int reasoning_tokens);

// The response object. `echo`: the request fields it repeats (ResponsesRequest::echo);
// `status`: in_progress, completed, incomplete or failed; `usage`: null while in progress;
// `error`: set for failed.
nlohmann::ordered_json ResponseObjectJson(const ResponseMeta& meta,
                                          const nlohmann::ordered_json& echo,
                                          const std::string& status,
                                          const std::vector<ResponsesOutputItem>& output,
                                          const nlohmann::ordered_json& usage,
                                          const ApiError* error = nullptr);

// A non-streaming choice as output items: reasoning, then the message (unless the choice only
// called functions), then one function_call per call, tagged with the namespaces of their tools.
std::vector<ResponsesOutputItem> OutputItemsOf(
    const CollectedChoice& choice, const std::map<std::string, std::string>& tool_namespaces);

// The output as the normalized assistant message a stored conversation continues with (the
// message's text, reasoning_content, tool_calls).
nlohmann::ordered_json OutputAsMessage(const std::vector<ResponsesOutputItem>& output);

}  // namespace loom
