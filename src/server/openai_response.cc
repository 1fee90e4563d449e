#include "server/openai_response.h"

#include "base/check.h"

namespace loom {

using nlohmann::ordered_json;

namespace {

// The fields every body and chunk starts with.
ordered_json Envelope(const ResponseMeta& meta, const char* object, ordered_json choices) {
  return ordered_json{{"id", meta.id},
                      {"object", object},
                      {"created", meta.created},
                      {"model", meta.model},
                      {"system_fingerprint", nullptr},
                      {"choices", std::move(choices)}};
}

ordered_json ResponseJson(const ResponseMeta& meta, const char* object, ordered_json choices,
                          const Usage& usage) {
  ordered_json body = Envelope(meta, object, std::move(choices));
  body["usage"] = OpenAiUsageJson(usage);
  return body;
}

// A stream chunk carrying one choice.
ordered_json ChunkJson(const ResponseMeta& meta, const char* object, ordered_json choice,
                       bool with_usage_null) {
  ordered_json chunk = Envelope(meta, object, ordered_json::array({std::move(choice)}));
  if (with_usage_null) chunk["usage"] = nullptr;
  return chunk;
}

ordered_json ChatMessageJson(const CollectedChoice& c) {
  // Like OpenAI: a message that only calls tools has "content": null.
  ordered_json message{
      {"role", "assistant"},
      {"content", c.text.empty() && !c.tool_calls.empty() ? ordered_json() : ordered_json(c.text)},
      {"refusal", nullptr}};
  if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
  if (!c.tool_calls.empty()) {
    ordered_json calls = ordered_json::array();
    for (const CollectedToolCall& t : c.tool_calls) {
      calls.push_back(
          ordered_json{{"id", t.id},
                       {"type", "function"},
                       {"function", ordered_json{{"name", t.name}, {"arguments", t.arguments}}}});
    }
    message["tool_calls"] = std::move(calls);
  }
  return message;
}

}  // namespace

ordered_json BytesJson(const std::string& s) {
  ordered_json a = ordered_json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

ordered_json OpenAiUsageJson(const Usage& u) {
  ordered_json j{{"prompt_tokens", u.prompt_tokens},
                 {"completion_tokens", u.completion_tokens},
                 {"total_tokens", u.prompt_tokens + u.completion_tokens},
                 {"prompt_tokens_details", ordered_json{{"cached_tokens", u.cached_tokens}}}};
  if (u.speculation.has_value()) j["speculation"] = SpeculationJson(*u.speculation);
  return j;
}

ordered_json SpeculationJson(const Usage::Speculation& s) {
  return ordered_json{{"drafted", s.drafted}, {"accepted", s.accepted}};
}

ordered_json ChatLogprobsJson(const std::vector<LogprobEntry>& entries) {
  ordered_json content = ordered_json::array();
  for (const LogprobEntry& e : entries) {
    ordered_json top = ordered_json::array();
    for (const auto& [text, lp] : e.top) {
      top.push_back(ordered_json{{"token", text}, {"logprob", lp}, {"bytes", BytesJson(text)}});
    }
    content.push_back(ordered_json{{"token", e.text},
                                   {"logprob", e.logprob},
                                   {"bytes", BytesJson(e.text)},
                                   {"top_logprobs", std::move(top)}});
  }
  return ordered_json{{"content", std::move(content)}, {"refusal", nullptr}};
}

ordered_json CompletionLogprobsJson(const std::vector<LogprobEntry>& entries, size_t offset) {
  ordered_json tokens = ordered_json::array(), token_logprobs = ordered_json::array(),
               top = ordered_json::array(), offsets = ordered_json::array();
  for (const LogprobEntry& e : entries) {
    tokens.push_back(e.text);
    token_logprobs.push_back(e.logprob);
    ordered_json alts = ordered_json::object();
    for (const auto& [text, lp] : e.top) {
      if (!alts.contains(text)) alts[text] = lp;
    }
    top.push_back(std::move(alts));
    offsets.push_back(offset);
    offset += e.text.size();
  }
  return ordered_json{{"tokens", std::move(tokens)},
                      {"token_logprobs", std::move(token_logprobs)},
                      {"top_logprobs", std::move(top)},
                      {"text_offset", std::move(offsets)}};
}

const char* OpenAiFinishReason(ChoiceFinishReason reason) {
  switch (reason) {
    case ChoiceFinishReason::kStop:
    case ChoiceFinishReason::kStopString:
      return "stop";
    case ChoiceFinishReason::kLength:
      return "length";
    case ChoiceFinishReason::kToolCalls:
      return "tool_calls";
    case ChoiceFinishReason::kAbort:
    case ChoiceFinishReason::kError:
      break;
  }
  CHECK(false) << "an error finish has no OpenAI finish_reason";
  return "";
}

ordered_json ChatCompletionJson(const ResponseMeta& meta, const std::vector<CollectedChoice>& cs,
                                bool with_logprobs, const Usage& usage) {
  ordered_json choices = ordered_json::array();
  for (size_t i = 0; i < cs.size(); ++i) {
    choices.push_back(ordered_json{
        {"index", i},
        {"message", ChatMessageJson(cs[i])},
        {"logprobs", with_logprobs ? ChatLogprobsJson(cs[i].logprobs) : ordered_json()},
        {"finish_reason", OpenAiFinishReason(cs[i].finish_reason)}});
  }
  return ResponseJson(meta, "chat.completion", std::move(choices), usage);
}

ordered_json CompletionJson(const ResponseMeta& meta, const std::vector<CollectedChoice>& cs,
                            bool with_logprobs, const Usage& usage) {
  ordered_json choices = ordered_json::array();
  for (size_t i = 0; i < cs.size(); ++i) {
    choices.push_back(ordered_json{
        {"index", i},
        {"text", cs[i].text},
        {"logprobs", with_logprobs ? CompletionLogprobsJson(cs[i].logprobs, 0) : ordered_json()},
        {"finish_reason", OpenAiFinishReason(cs[i].finish_reason)}});
  }
  return ResponseJson(meta, "text_completion", std::move(choices), usage);
}

ordered_json ChatChunkJson(const ResponseMeta& meta, int index, const std::string* content,
                           bool role_chunk, const std::vector<LogprobEntry>* logprobs,
                           const std::string* finish_reason, bool with_usage_null) {
  ordered_json delta = ordered_json::object();
  if (role_chunk) delta["role"] = "assistant";
  if (content != nullptr) delta["content"] = *content;
  return ChatDeltaChunkJson(meta, index, std::move(delta), logprobs, finish_reason,
                            with_usage_null);
}

ordered_json ChatDeltaChunkJson(const ResponseMeta& meta, int index, ordered_json delta,
                                const std::vector<LogprobEntry>* logprobs,
                                const std::string* finish_reason, bool with_usage_null) {
  ordered_json choice{
      {"index", index},
      {"delta", std::move(delta)},
      {"logprobs", logprobs != nullptr ? ChatLogprobsJson(*logprobs) : ordered_json()},
      {"finish_reason", finish_reason != nullptr ? ordered_json(*finish_reason) : ordered_json()}};
  return ChunkJson(meta, "chat.completion.chunk", std::move(choice), with_usage_null);
}

ordered_json CompletionChunkJson(const ResponseMeta& meta, int index, const std::string& text,
                                 const std::vector<LogprobEntry>* logprobs, size_t text_offset,
                                 const std::string* finish_reason, bool with_usage_null) {
  ordered_json choice{
      {"index", index},
      {"text", text},
      {"logprobs",
       logprobs != nullptr ? CompletionLogprobsJson(*logprobs, text_offset) : ordered_json()},
      {"finish_reason", finish_reason != nullptr ? ordered_json(*finish_reason) : ordered_json()}};
  return ChunkJson(meta, "text_completion", std::move(choice), with_usage_null);
}

ordered_json UsageChunkJson(const ResponseMeta& meta, const char* object, const Usage& usage) {
  return ResponseJson(meta, object, ordered_json::array(), usage);
}

}  // namespace loom
