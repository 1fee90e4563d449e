// Parser for the OpenAI Responses API's POST /v1/responses body: JSON text → ResponsesRequest,
// a GenerationRequest (the same messages / tools / grammar spec the chat routes produce) plus
// what only this API has. `input` (a string, or items: messages, function_call,
// function_call_output, reasoning) becomes normalized chat messages (tool_request.h):
// function_call items join the assistant message before them as its tool_calls, reasoning items
// become the next assistant message's reasoning_content, function_call_output items become tool
// messages. `instructions` is a leading system message; `previous_response_id` prepends the
// stored response's conversation. Errors are InvalidArgument naming the field in *param, and
// NotFound (a 404) for an unknown previous_response_id.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "server/generation_request.h"
#include "server/response_store.h"

namespace loom {

struct ResponsesRequest {
  // messages = [instructions as a system message] + conversation.
  GenerationRequest gen;
  std::string previous_response_id;  // "" = none
  bool store = true;                 // keep the response (ResponseStore)
  // The previous response's conversation + this request's input, as normalized messages: what
  // this response's stored entry continues (StoredResponse::conversation).
  nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
  // The namespace of each function declared inside a `namespace` tool, by function name: its
  // calls carry it back (function_call.namespace).
  std::map<std::string, std::string> tool_namespaces;
  // The request fields a response object repeats (instructions, max_output_tokens, metadata,
  // parallel_tool_calls, previous_response_id, reasoning, store, temperature, text, tool_choice,
  // tools, top_p, truncation, user), with OpenAI's defaults for the omitted ones.
  nlohmann::ordered_json echo = nlohmann::ordered_json::object();
};

// `store` (may be null: nothing is stored, so any previous_response_id is unknown) is read for
// previous_response_id.
StatusOr<ResponsesRequest> ParseResponsesRequest(const std::string& body,
                                                 const RequestDefaults& defaults,
                                                 ResponseStore* store, std::string* param);

}  // namespace loom
