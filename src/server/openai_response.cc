#include "server/openai_response.h"

namespace loom {

using nlohmann::ordered_json;

ordered_json BytesJson(const std::string& s) {
  ordered_json a = ordered_json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

ordered_json OpenAiUsageJson(const Usage& u) {
  return ordered_json{{"prompt_tokens", u.prompt_tokens},
                      {"completion_tokens", u.completion_tokens},
                      {"total_tokens", u.prompt_tokens + u.completion_tokens},
                      {"prompt_tokens_details", ordered_json{{"cached_tokens", u.cached_tokens}}}};
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

ordered_json ChatCompletionJson(const ResponseMeta& meta, const std::vector<FinishedChoice>& cs,
                                const Usage& usage) {
  ordered_json choices = ordered_json::array();
  for (size_t i = 0; i < cs.size(); ++i) {
    choices.push_back(ordered_json{
        {"index", i},
        {"message", ordered_json{{"role", "assistant"}, {"content", cs[i].text},
                                 {"refusal", nullptr}}},
        {"logprobs", cs[i].has_logprobs ? ChatLogprobsJson(cs[i].logprobs) : ordered_json()},
        {"finish_reason", cs[i].finish_reason}});
  }
  return ordered_json{{"id", meta.id},
                      {"object", "chat.completion"},
                      {"created", meta.created},
                      {"model", meta.model},
                      {"system_fingerprint", nullptr},
                      {"choices", std::move(choices)},
                      {"usage", OpenAiUsageJson(usage)}};
}

ordered_json CompletionJson(const ResponseMeta& meta, const std::vector<FinishedChoice>& cs,
                            const Usage& usage) {
  ordered_json choices = ordered_json::array();
  for (size_t i = 0; i < cs.size(); ++i) {
    choices.push_back(ordered_json{
        {"index", i},
        {"text", cs[i].text},
        {"logprobs", cs[i].has_logprobs ? CompletionLogprobsJson(cs[i].logprobs, 0)
                                        : ordered_json()},
        {"finish_reason", cs[i].finish_reason}});
  }
  return ordered_json{{"id", meta.id},
                      {"object", "text_completion"},
                      {"created", meta.created},
                      {"model", meta.model},
                      {"system_fingerprint", nullptr},
                      {"choices", std::move(choices)},
                      {"usage", OpenAiUsageJson(usage)}};
}

ordered_json ChatChunkJson(const ResponseMeta& meta, int index, const std::string* content,
                           bool role_chunk, const std::vector<LogprobEntry>* logprobs,
                           const std::string* finish_reason, bool with_usage_null) {
  ordered_json delta = ordered_json::object();
  if (role_chunk) delta["role"] = "assistant";
  if (content != nullptr) delta["content"] = *content;
  ordered_json choice{{"index", index},
                      {"delta", std::move(delta)},
                      {"logprobs", logprobs != nullptr ? ChatLogprobsJson(*logprobs)
                                                       : ordered_json()},
                      {"finish_reason", finish_reason != nullptr ? ordered_json(*finish_reason)
                                                                 : ordered_json()}};
  ordered_json chunk{{"id", meta.id},
                     {"object", "chat.completion.chunk"},
                     {"created", meta.created},
                     {"model", meta.model},
                     {"system_fingerprint", nullptr},
                     {"choices", ordered_json::array({std::move(choice)})}};
  if (with_usage_null) chunk["usage"] = nullptr;
  return chunk;
}

ordered_json CompletionChunkJson(const ResponseMeta& meta, int index, const std::string& text,
                                 const std::vector<LogprobEntry>* logprobs, size_t text_offset,
                                 const std::string* finish_reason, bool with_usage_null) {
  ordered_json choice{
      {"index", index},
      {"text", text},
      {"logprobs", logprobs != nullptr ? CompletionLogprobsJson(*logprobs, text_offset)
                                       : ordered_json()},
      {"finish_reason",
       finish_reason != nullptr ? ordered_json(*finish_reason) : ordered_json()}};
  ordered_json chunk{{"id", meta.id},
                     {"object", "text_completion"},
                     {"created", meta.created},
                     {"model", meta.model},
                     {"system_fingerprint", nullptr},
                     {"choices", ordered_json::array({std::move(choice)})}};
  if (with_usage_null) chunk["usage"] = nullptr;
  return chunk;
}

ordered_json UsageChunkJson(const ResponseMeta& meta, const char* object, const Usage& usage) {
  return ordered_json{{"id", meta.id},
                      {"object", object},
                      {"created", meta.created},
                      {"model", meta.model},
                      {"system_fingerprint", nullptr},
                      {"choices", ordered_json::array()},
                      {"usage", OpenAiUsageJson(usage)}};
}

}  // namespace loom
