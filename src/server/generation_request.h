// GenerationRequest: one validated API request (OpenAI chat / completions / responses or
// Anthropic messages), typed, before templating and tokenization. The parsers
// (openai_request.h, anthropic_request.h, responses_request.h) are pure functions from the JSON
// body to this struct.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/ids.h"
#include "engine/reasoning_budget.h"
#include "grammar/grammar_cache.h"
#include "sample/sampling_params.h"

namespace loom {

enum class ApiKind { kChatCompletions, kCompletions, kMessages, kResponses };

// What the request lets the model do with its tools (OpenAI tool_choice / Anthropic tool_choice).
enum class ToolChoiceMode {
  kAuto,      // free text or tool calls (the default when tools are given)
  kNone,      // no tool calls: the tools are not shown to the template and nothing is parsed
  kRequired,  // at least one call (OpenAI "required", Anthropic "any")
  kNamed,     // a call of `tool_choice_name`
};

// Server-wide defaults (CLI flags) for fields a request omits.
struct RequestDefaults {
  int max_tokens = 0;  // 0 = until the context is full
  // > 0: no request generates more than this many tokens (--max-output-tokens); a larger
  // max_tokens is cut to it, as llama-server's -n caps every request.
  int max_output_tokens = 0;
  float temperature = 0.7f;
  float top_p = 1.0f;
  int top_k = 0;
  std::optional<bool> enable_thinking;  // --thinking; unset = the template's own default
  // --reasoning-budget: the reasoning tokens a reply may write before its section is closed
  // (reasoning_budget.h) when the request sets none; -1 = unlimited.
  int reasoning_budget = -1;
  int max_n = 128;
  int max_stop_strings = 16;
  int vocab_size = 0;  // > 0: logit_bias / stop_token_ids are checked against it
};

struct GenerationRequest {
  ApiKind kind = ApiKind::kChatCompletions;
  std::string model;   // as sent (informational; one model is served)
  std::string log_id;  // the HTTP request's id (x-request-id), for the logs

  // Chat / messages: normalized [{"role": system|user|assistant|tool, "content": string, ...}]
  // (assistant turns may carry "tool_calls" and "reasoning_content", tool results carry
  // "tool_call_id" and "name": the shapes of tool_request.h).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // Tools, normalized as chat templates read them (tool_request.h); empty = none.
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  ToolChoiceMode tool_choice = ToolChoiceMode::kAuto;
  std::string tool_choice_name;     // kNamed
  bool parallel_tool_calls = true;  // false: at most one call per choice (later ones dropped)

  // Grammar-constrained output (grammar_request.h; a forced tool call): the spec, the field it
  // came from (its compile errors name it), and the grammar compiled by the route, which
  // Generation gives each choice a fresh state of. An optional grammar (tool_choice auto's lazy
  // one) that does not compile is dropped instead of failing the request.
  std::optional<GrammarSpec> grammar;
  std::string grammar_field;
  bool grammar_optional = false;
  std::shared_ptr<const CompiledGrammar> compiled_grammar;
  // Completions: the prompt as text, or as token ids when the request sent ids.
  std::string prompt_text;
  std::vector<TokenId> prompt_ids;
  bool prompt_is_ids = false;
  // Extra chat-template variables (chat_template_kwargs, enable_thinking from reasoning_effort /
  // Anthropic thinking / --thinking).
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;
  // Anthropic thinking.budget_tokens / OpenAI thinking_token_budget: the reasoning tokens the
  // reply may write before its section is closed (>= 0); unset = --reasoning-budget. The route
  // turns it into the engine's budget (output_parsing.h ResolveReasoningBudget) when the model's
  // reasoning parser is on and the prompt leaves a section open.
  std::optional<int> reasoning_budget;
  std::string reasoning_budget_field;  // the field it came from
  std::optional<ReasoningBudget> engine_reasoning_budget;

  SamplingParams params;        // max_tokens == 0: fill up to the context (see max_tokens_set)
  bool max_tokens_set = false;  // the request (or --max-tokens) chose max_tokens
  // max_tokens is an upper bound, cut to what the context leaves (Anthropic, whose clients send
  // their own model's limit, e.g. Claude Code's 128000), instead of a 400 when it does not fit.
  bool max_tokens_is_cap = false;
  std::vector<std::string> stop;  // stop strings, never emitted
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // chat: logprobs; completions: logprobs != null
  int top_logprobs = 0;        // alternatives per position
  bool echo = false;           // completions: prepend the prompt
  // Detokenize without special tokens (the default). Off when a tool-call format's markers are
  // special tokens ([TOOL_CALLS], <|python_tag|>): the parser must see them.
  bool skip_special_tokens = true;
  std::string user;  // informational
};

}  // namespace loom
