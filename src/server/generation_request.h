// GenerationRequest: one validated API request (OpenAI chat / completions or Anthropic
// messages), typed, before templating and tokenization. The parsers (openai_request.h,
// anthropic_request.h) are pure functions from the JSON body to this struct.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/ids.h"
#include "sample/sampling_params.h"

namespace loom {

enum class ApiKind { kChatCompletions, kCompletions, kMessages };

// Server-wide defaults (CLI flags) for fields a request omits.
struct RequestDefaults {
  int max_tokens = 0;  // 0 = until the context is full
  float temperature = 0.7f;
  float top_p = 1.0f;
  int top_k = 0;
  std::optional<bool> enable_thinking;  // --thinking; unset = the template's own default
  int max_n = 128;
  int max_stop_strings = 16;
  int vocab_size = 0;  // > 0: logit_bias / stop_token_ids are checked against it
};

struct GenerationRequest {
  ApiKind kind = ApiKind::kChatCompletions;
  std::string model;  // as sent (informational; one model is served)

  // Chat / messages: normalized [{"role": system|user|assistant, "content": string}, ...].
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // Completions: the prompt as text, or as token ids when the request sent ids.
  std::string prompt_text;
  std::vector<TokenId> prompt_ids;
  bool prompt_is_ids = false;
  // Extra chat-template variables (chat_template_kwargs, enable_thinking from reasoning_effort /
  // Anthropic thinking / --thinking).
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;

  SamplingParams params;          // max_tokens == 0: fill up to the context (see max_tokens_set)
  bool max_tokens_set = false;    // the request (or --max-tokens) chose max_tokens
  std::vector<std::string> stop;  // stop strings, never emitted
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // chat: logprobs; completions: logprobs != null
  int top_logprobs = 0;        // alternatives per position
  bool echo = false;           // completions: prepend the prompt
  std::string user;            // informational
};

}  // namespace loom
