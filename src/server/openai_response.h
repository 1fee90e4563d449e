// OpenAI response bodies and stream chunks, in the exact shapes of the OpenAI API:
// chat.completion / chat.completion.chunk and text_completion, usage with
// prompt_tokens_details.cached_tokens, and logprobs (chat: {"content": [{token, logprob, bytes,
// top_logprobs}]}; completions: {tokens, token_logprobs, top_logprobs, text_offset}).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/choice_collector.h"
#include "server/choice_event.h"

namespace loom {

struct ResponseMeta {
  std::string id;  // "chatcmpl-…" / "cmpl-…" / "msg_…"
  std::string model;
  int64_t created = 0;  // unix seconds
};

nlohmann::ordered_json OpenAiUsageJson(const Usage& usage);
// usage.speculation (OpenAI chat / completions and Responses): {drafted, accepted}.
nlohmann::ordered_json SpeculationJson(const Usage::Speculation& speculation);
// Chat logprobs object for `entries` ({"content": [...]}).
nlohmann::ordered_json ChatLogprobsJson(const std::vector<LogprobEntry>& entries);
// Completions logprobs object; `text_offset` starts at `offset` (bytes of text before).
nlohmann::ordered_json CompletionLogprobsJson(const std::vector<LogprobEntry>& entries,
                                              size_t offset);

// "stop", "length", "tool_calls". `reason` must not be an error finish (kAbort / kError): those
// are answered with an error, not a finish_reason.
const char* OpenAiFinishReason(ChoiceFinishReason reason);

// Non-streaming bodies. `with_logprobs`: the request asked for logprobs (else "logprobs": null).
// A choice's reasoning becomes message.reasoning_content and its tool calls message.tool_calls,
// each only when present.
nlohmann::ordered_json ChatCompletionJson(const ResponseMeta& meta,
                                          const std::vector<CollectedChoice>& choices,
                                          bool with_logprobs, const Usage& usage);
nlohmann::ordered_json CompletionJson(const ResponseMeta& meta,
                                      const std::vector<CollectedChoice>& choices,
                                      bool with_logprobs, const Usage& usage);

// Stream chunks. `content` is the choice's new text (nullptr: no "content" key); role_chunk: the
// first chunk ({"role": "assistant", "content": ""}). `with_usage_null`: include_usage streams
// carry "usage": null on every chunk but the last.
nlohmann::ordered_json ChatChunkJson(const ResponseMeta& meta, int index,
                                     const std::string* content, bool role_chunk,
                                     const std::vector<LogprobEntry>* logprobs,
                                     const std::string* finish_reason, bool with_usage_null);
// A chat chunk with an arbitrary `delta` object (reasoning_content, tool_calls ...).
nlohmann::ordered_json ChatDeltaChunkJson(const ResponseMeta& meta, int index,
                                          nlohmann::ordered_json delta,
                                          const std::vector<LogprobEntry>* logprobs,
                                          const std::string* finish_reason, bool with_usage_null);
nlohmann::ordered_json CompletionChunkJson(const ResponseMeta& meta, int index,
                                           const std::string& text,
                                           const std::vector<LogprobEntry>* logprobs,
                                           size_t text_offset, const std::string* finish_reason,
                                           bool with_usage_null);
// The include_usage chunk: empty choices + usage.
nlohmann::ordered_json UsageChunkJson(const ResponseMeta& meta, const char* object,
                                      const Usage& usage);

// Bytes of a UTF-8 string as the list of ints OpenAI returns.
nlohmann::ordered_json BytesJson(const std::string& s);

}  // namespace loom
