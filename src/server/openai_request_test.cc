// Table-driven tests of the OpenAI / Anthropic request parsers: good requests parse into the
// expected fields; every bad input is rejected with InvalidArgument, the right `param`, and a
// message naming the field.
#include "server/openai_request.h"

#include <gtest/gtest.h>

#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace loom {
namespace {

enum class Route { kChat, kCompletions, kMessages };

StatusOr<GenerationRequest> Parse(Route route, const std::string& body, std::string* param) {
  RequestDefaults d;
  d.vocab_size = 512;
  switch (route) {
    case Route::kChat:
      return ParseChatCompletionsRequest(body, d, param);
    case Route::kCompletions:
      return ParseCompletionsRequest(body, d, param);
    case Route::kMessages:
      return ParseMessagesRequest(body, d, param);
  }
  return InternalError("unreachable");
}

struct BadCase {
  const char* name;
  Route route;
  std::string body;
  std::string param;      // expected ApiError param ("" = none)
  std::string substring;  // expected in the message
};

const std::string kMsgs = R"("messages":[{"role":"user","content":"hi"}])";
const std::string kAMsgs = R"("max_tokens":8,"messages":[{"role":"user","content":"hi"}])";

std::string Chat(const std::string& extra) { return "{" + kMsgs + "," + extra + "}"; }
std::string Comp(const std::string& extra) { return R"({"prompt":"hi",)" + extra + "}"; }
std::string Msg(const std::string& extra) { return "{" + kAMsgs + "," + extra + "}"; }

std::vector<BadCase> BadCases() {
  using R = Route;
  return {
      // Body-level.
      {"empty_body", R::kChat, "", "", "empty"},
      {"malformed_json", R::kChat, "{\"messages\": [", "", "not valid JSON"},
      {"trailing_garbage", R::kChat, Chat("\"n\":1") + "x", "", "not valid JSON"},
      {"array_body", R::kChat, "[1,2]", "", "must be a JSON object"},
      {"string_body", R::kCompletions, "\"hello\"", "", "must be a JSON object"},
      {"invalid_utf8", R::kChat, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}",
       "", "UTF-8"},
      // Messages.
      {"missing_messages", R::kChat, "{}", "messages", "messages is required"},
      {"messages_not_array", R::kChat, R"({"messages":"hi"})", "messages", "must be an array"},
      {"messages_empty", R::kChat, R"({"messages":[]})", "messages", "must not be empty"},
      {"message_not_object", R::kChat, R"({"messages":[1]})", "messages[0]", "must be an object"},
      {"missing_role", R::kChat, R"({"messages":[{"content":"x"}]})", "messages[0].role",
       "role is required"},
      {"role_not_string", R::kChat, R"({"messages":[{"role":3,"content":"x"}]})",
       "messages[0].role", "must be a string"},
      {"unknown_role", R::kChat, R"({"messages":[{"role":"wizard","content":"x"}]})",
       "messages[0].role", "\"wizard\" is unknown"},
      {"tool_role_without_id", R::kChat, R"({"messages":[{"role":"tool","content":"x"}]})",
       "messages[0].tool_call_id", "tool_call_id is required"},
      {"missing_content", R::kChat, R"({"messages":[{"role":"user"}]})", "messages[0].content",
       "content is required"},
      {"empty_content", R::kChat, R"({"messages":[{"role":"user","content":""}]})",
       "messages[0].content", "must not be empty"},
      {"content_wrong_type", R::kChat, R"({"messages":[{"role":"user","content":5}]})",
       "messages[0].content", "must be a string or an array"},
      {"content_part_no_type", R::kChat,
       R"({"messages":[{"role":"user","content":[{"text":"a"}]}]})", "messages[0].content[0]",
       "\"type\""},
      {"content_part_text_missing", R::kChat,
       R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})",
       "messages[0].content[0].text", "must be a string"},
      {"image_part", R::kChat,
       R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})",
       "messages[0].content[0]", "not supported yet"},
      {"unknown_part_type", R::kChat,
       R"({"messages":[{"role":"user","content":[{"type":"video"}]}]})",
       "messages[0].content[0].type", "unknown"},
      {"second_message_bad", R::kChat,
       R"({"messages":[{"role":"user","content":"a"},{"role":"bot","content":"b"}]})",
       "messages[1].role", "messages[1].role"},
      {"assistant_tool_call_without_function", R::kChat,
       R"({"messages":[{"role":"assistant","content":"a","tool_calls":[{"type":"function"}]}]})",
       "messages[0].tool_calls[0].function", "function is required"},
      // Sampling ranges and types.
      {"temperature_negative", R::kChat, Chat(R"("temperature":-1)"), "temperature",
       "temperature must be in [0, 2]"},
      {"temperature_too_high", R::kChat, Chat(R"("temperature":2.5)"), "temperature",
       "temperature"},
      {"temperature_string", R::kChat, Chat(R"("temperature":"hot")"), "temperature",
       "must be a number"},
      {"top_p_two", R::kChat, Chat(R"("top_p":2)"), "top_p", "top_p must be in"},
      {"top_p_zero", R::kChat, Chat(R"("top_p":0)"), "top_p", "(0, 1]"},
      {"top_k_fraction", R::kChat, Chat(R"("top_k":1.5)"), "top_k", "must be an integer"},
      {"top_k_too_negative", R::kChat, Chat(R"("top_k":-5)"), "top_k", "top_k must be in"},
      {"min_p_big", R::kChat, Chat(R"("min_p":1.5)"), "min_p", "min_p"},
      {"xtc_probability_negative", R::kChat, Chat(R"("xtc_probability":-0.1)"), "xtc_probability",
       "xtc_probability"},
      {"repetition_penalty_zero", R::kChat, Chat(R"("repetition_penalty":0)"), "repetition_penalty",
       "> 0"},
      {"presence_penalty_big", R::kChat, Chat(R"("presence_penalty":3)"), "presence_penalty",
       "presence_penalty"},
      {"frequency_penalty_small", R::kChat, Chat(R"("frequency_penalty":-2.5)"),
       "frequency_penalty", "frequency_penalty"},
      {"logit_bias_not_object", R::kChat, Chat(R"("logit_bias":[1])"), "logit_bias",
       "must be an object"},
      {"logit_bias_bad_key", R::kChat, Chat(R"("logit_bias":{"abc":1})"), "logit_bias",
       "token ids"},
      {"logit_bias_out_of_vocab", R::kChat, Chat(R"("logit_bias":{"100000":1})"), "logit_bias",
       "out of the vocabulary"},
      {"logit_bias_value_range", R::kChat, Chat(R"("logit_bias":{"5":1000})"), "logit_bias",
       "[-100, 100]"},
      {"logit_bias_value_type", R::kChat, Chat(R"("logit_bias":{"5":"x"})"), "logit_bias",
       "must be a number"},
      {"seed_string", R::kChat, Chat(R"("seed":"1")"), "seed", "seed must be an integer"},
      {"seed_float", R::kChat, Chat(R"("seed":1.5)"), "seed", "seed must be an integer"},
      // Lengths and counts.
      {"max_tokens_negative", R::kChat, Chat(R"("max_tokens":-1)"), "max_tokens",
       "max_tokens must be in"},
      {"max_tokens_zero", R::kChat, Chat(R"("max_tokens":0)"), "max_tokens", "max_tokens"},
      {"max_tokens_huge", R::kChat, Chat(R"("max_tokens":1e12)"), "max_tokens", "max_tokens"},
      {"max_tokens_string", R::kChat, Chat(R"("max_tokens":"10")"), "max_tokens",
       "must be an integer"},
      {"max_completion_tokens_negative", R::kChat, Chat(R"("max_completion_tokens":-3)"),
       "max_completion_tokens", "max_completion_tokens"},
      {"min_tokens_over_max", R::kChat, Chat(R"("max_tokens":4,"min_tokens":8)"), "min_tokens",
       "must not exceed max_tokens"},
      {"n_zero", R::kChat, Chat(R"("n":0)"), "n", "n must be in [1, 128]"},
      {"n_thousand", R::kChat, Chat(R"("n":1000)"), "n", "n must be in"},
      {"stop_number", R::kChat, Chat(R"("stop":5)"), "stop", "string or an array"},
      {"stop_entry_number", R::kChat, Chat(R"("stop":["a",3])"), "stop[1]", "must be a string"},
      {"stop_entry_empty", R::kChat, Chat(R"("stop":["a",""])"), "stop[1]", "must not be empty"},
      {"stop_too_many", R::kChat,
       Chat(
           R"("stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"])"),
       "stop", "at most 16"},
      {"stop_token_ids_out_of_vocab", R::kChat, Chat(R"("stop_token_ids":[600])"), "stop_token_ids",
       "stop_token_ids"},
      {"stream_string", R::kChat, Chat(R"("stream":"yes")"), "stream", "must be a boolean"},
      {"stream_options_without_stream", R::kChat,
       Chat(R"("stream_options":{"include_usage":true})"), "stream_options",
       "only allowed when stream is true"},
      {"include_usage_type", R::kChat,
       Chat(R"("stream":true,"stream_options":{"include_usage":1})"),
       "stream_options.include_usage", "include_usage must be a boolean"},
      {"logprobs_type", R::kChat, Chat(R"("logprobs":1)"), "logprobs", "must be a boolean"},
      {"top_logprobs_without_logprobs", R::kChat, Chat(R"("top_logprobs":3)"), "top_logprobs",
       "requires logprobs"},
      {"top_logprobs_range", R::kChat, Chat(R"("logprobs":true,"top_logprobs":21)"), "top_logprobs",
       "top_logprobs must be in [0, 20]"},
      {"model_type", R::kChat, Chat(R"("model":7)"), "model", "model must be a string"},
      // Not supported yet: clear 400, never ignored.
      {"response_format_type", R::kChat, Chat(R"("response_format":{"type":"yaml"})"),
       "response_format.type", "\"yaml\" is unknown"},
      {"response_format_not_object", R::kChat, Chat(R"("response_format":"json")"),
       "response_format", "must be an object"},
      {"response_format_schema_missing", R::kChat,
       Chat(R"("response_format":{"type":"json_schema"})"), "response_format.json_schema",
       "is required"},
      {"response_format_schema_type", R::kChat,
       Chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":3}})"),
       "response_format.json_schema.schema", "must be a JSON Schema object"},
      {"guided_json_bad_text", R::kChat, Chat(R"("guided_json":"{not json")"), "guided_json",
       "must be a JSON Schema"},
      {"guided_regex_type", R::kChat, Chat(R"("guided_regex":5)"), "guided_regex",
       "non-empty string"},
      {"guided_choice_empty", R::kChat, Chat(R"("guided_choice":[])"), "guided_choice",
       "non-empty array"},
      {"guided_choice_item", R::kChat, Chat(R"("guided_choice":["a",1])"), "guided_choice[1]",
       "must be a string"},
      {"two_grammars", R::kChat,
       Chat(R"("response_format":{"type":"json_object"},"guided_regex":"a+")"), "guided_regex",
       "both constrain the output"},
      {"structured_outputs_unknown", R::kChat, Chat(R"("structured_outputs":{"xml":"x"})"),
       "structured_outputs.xml", "not supported"},
      {"completions_grammar_type", R::kCompletions, Comp(R"("grammar":["root"])"), "grammar",
       "non-empty string"},
      {"chat_template_kwargs_type", R::kChat, Chat(R"("chat_template_kwargs":[1])"),
       "chat_template_kwargs", "must be an object"},
      {"reasoning_effort_unknown", R::kChat, Chat(R"("reasoning_effort":"extreme")"),
       "reasoning_effort", "reasoning_effort must be one of"},
      {"thinking_token_budget_negative", R::kChat, Chat(R"("thinking_token_budget":-1)"),
       "thinking_token_budget", "thinking_token_budget must be in [0, "},
      {"thinking_token_budget_fraction", R::kChat, Chat(R"("thinking_token_budget":2.5)"),
       "thinking_token_budget", "must be an integer"},
      {"anthropic_budget_tokens_type", R::kMessages,
       Msg(R"("thinking":{"type":"enabled","budget_tokens":"4"})"), "thinking.budget_tokens",
       "thinking.budget_tokens must be an integer"},
      {"anthropic_budget_tokens_zero", R::kMessages,
       Msg(R"("thinking":{"type":"enabled","budget_tokens":0})"), "thinking.budget_tokens",
       "must be >= 1"},
      {"anthropic_budget_tokens_max", R::kMessages,
       Msg(R"("thinking":{"type":"enabled","budget_tokens":8})"), "thinking.budget_tokens",
       "must be less than max_tokens (8)"},
      // Completions.
      {"completions_missing_prompt", R::kCompletions, "{}", "prompt", "prompt is required"},
      {"completions_prompt_empty", R::kCompletions, R"({"prompt":""})", "prompt",
       "must not be empty"},
      {"completions_prompt_object", R::kCompletions, R"({"prompt":{"a":1}})", "prompt",
       "must be a string or an array"},
      {"completions_prompt_bad_ids", R::kCompletions, R"({"prompt":[1,-2]})", "prompt",
       "token ids must be in"},
      {"completions_prompt_out_of_vocab", R::kCompletions, R"({"prompt":[1,9999]})", "prompt",
       "token ids must be in [0, 512)"},
      {"completions_batch", R::kCompletions, R"({"prompt":["a","b"]})", "prompt",
       "not supported yet"},
      {"completions_suffix", R::kCompletions, Comp(R"("suffix":"end")"), "suffix",
       "suffix (fill-in-the-middle) is not supported yet"},
      {"completions_logprobs_range", R::kCompletions, Comp(R"("logprobs":50)"), "logprobs",
       "logprobs must be in [0, 20]"},
      {"completions_echo_type", R::kCompletions, Comp(R"("echo":"yes")"), "echo",
       "must be a boolean"},
      {"completions_best_of", R::kCompletions, Comp(R"("best_of":3)"), "best_of", "not supported"},
      {"completions_temperature", R::kCompletions, Comp(R"("temperature":-0.5)"), "temperature",
       "temperature"},
      // Anthropic messages.
      {"anthropic_missing_max_tokens", R::kMessages,
       R"({"messages":[{"role":"user","content":"hi"}]})", "max_tokens", "max_tokens is required"},
      {"anthropic_missing_messages", R::kMessages, R"({"max_tokens":5})", "messages",
       "messages is required"},
      {"anthropic_tool_role", R::kMessages,
       R"({"max_tokens":5,"messages":[{"role":"tool","content":"hi"}]})", "messages[0].role",
       "expected user, assistant or system"},
      {"anthropic_temperature_range", R::kMessages, Msg(R"("temperature":1.5)"), "temperature",
       "temperature must be in [0, 1]"},
      {"anthropic_max_tokens_zero", R::kMessages,
       R"({"max_tokens":0,"messages":[{"role":"user","content":"hi"}]})", "max_tokens",
       "max_tokens must be in"},
      {"anthropic_image_block", R::kMessages,
       R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})",
       "messages[0].content[0]", "not supported yet"},
      {"anthropic_tool_result_without_id", R::kMessages,
       R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]})",
       "messages[0].content[0].tool_use_id", "tool_use_id is required"},
      {"anthropic_tool_without_schema", R::kMessages, Msg(R"("tools":[{"name":"x"}])"),
       "tools[0].input_schema", "input_schema is required"},
      {"anthropic_stop_sequences_type", R::kMessages, Msg(R"("stop_sequences":"END")"),
       "stop_sequences", "must be an array"},
      {"anthropic_system_type", R::kMessages, Msg(R"("system":42)"), "system",
       "must be a string or an array"},
      {"anthropic_thinking_type", R::kMessages, Msg(R"("thinking":{"type":"maybe"})"),
       "thinking.type", "enabled"},
      {"anthropic_empty_user_content", R::kMessages,
       R"({"max_tokens":5,"messages":[{"role":"user","content":""}]})", "messages[0].content",
       "must not be empty"},
      // Numbers beyond a double (the JSON parser's range error) and beyond the fields' types.
      {"max_tokens_overflows_double", R::kChat, Chat(R"("max_tokens":1e999)"), "max_tokens",
       "max_tokens: the number 1e999 is out of range"},
      {"temperature_overflows_negative", R::kCompletions, Comp(R"("temperature":-1e999)"),
       "temperature", "temperature: the number -1e999 is out of range"},
      {"nested_overflow", R::kChat,
       R"({"stream":true,"stream_options":{"include_usage":1E400},)" + kMsgs + "}",
       "stream_options.include_usage", "stream_options.include_usage: the number 1E400"},
      {"overflow_in_array", R::kCompletions, R"({"prompt":[1,2,3e999]})", "prompt[2]",
       "prompt[2]: the number 3e999"},
      {"overflow_after_nested_values", R::kChat,
       R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},)"
       R"({"role":"user","content":"b","x":[1,{"y":2}],"z":-1e999}]})",
       "messages[1].z", "messages[1].z: the number -1e999"},
      {"logit_bias_overflows", R::kChat, Chat(R"("logit_bias":{"5":1e999})"), R"(logit_bias["5"])",
       R"(logit_bias["5"]: the number 1e999)"},
      {"anthropic_max_tokens_overflows", R::kMessages,
       R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":1e999})", "max_tokens",
       "max_tokens: the number 1e999 is out of range"},
      {"anthropic_top_p_overflows", R::kMessages, Msg(R"("top_p":-1e999)"), "top_p",
       "top_p: the number -1e999"},
      {"max_tokens_huge_integer", R::kCompletions, Comp(R"("max_tokens":12345678901234567890123)"),
       "max_tokens", "max_tokens must be in [1, 16777216]"},
      {"n_huge_integer", R::kChat, Chat(R"("n":12345678901234567890123)"), "n", "n must be in"},
      {"seed_huge_integer", R::kChat, Chat(R"("seed":12345678901234567890123)"), "seed",
       "seed must be an integer in [-2^63, 2^64)"},
      {"prompt_id_huge_integer", R::kCompletions, R"({"prompt":[1,12345678901234567890123]})",
       "prompt", "token ids must be in"},
      {"anthropic_max_tokens_huge_integer", R::kMessages,
       R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":12345678901234567890123})",
       "max_tokens", "max_tokens must be in"},
  };
}

class BadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInputTest, RejectedWithFieldNamed) {
  const BadCase& c = GetParam();
  std::string param;
  StatusOr<GenerationRequest> r = Parse(c.route, c.body, &param);
  ASSERT_FALSE(r.ok()) << c.name << " was accepted";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  EXPECT_EQ(param, c.param) << r.status().message();
  EXPECT_NE(std::string(r.status().message()).find(c.substring), std::string::npos)
      << "message: " << r.status().message();
  ApiError e = ApiError::FromStatus(r.status(), param);
  EXPECT_EQ(e.http_status, 400);
  auto j = e.ToJson(ApiFlavor::kOpenAi);
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  if (!c.param.empty()) {
    EXPECT_EQ(j["error"]["param"], c.param);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, BadInputTest, ::testing::ValuesIn(BadCases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(BadInputTableTest, HasAtLeastFiftyCases) { EXPECT_GE(BadCases().size(), 50u); }

TEST(OpenAiRequestTest, ChatFieldsParsed) {
  std::string param;
  auto r = ParseChatCompletionsRequest(
      R"({"model":"m","messages":[{"role":"developer","content":"be brief"},
          {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
          "temperature":0,"top_p":0.5,"top_k":-1,"min_p":0.1,"seed":7,"max_completion_tokens":9,
          "max_tokens":100,"n":2,"stop":"END","stream":true,
          "stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":3,
          "logit_bias":{"5":-100},"reasoning_effort":"none","unknown_field":{"x":1},
          "response_format":{"type":"text"},"tools":[],"tool_choice":"none"})",
      RequestDefaults{}, &param);
  ASSERT_TRUE(r.ok()) << r.status().message() << " param " << param;
  EXPECT_EQ(r->model, "m");
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[0]["role"], "system");
  EXPECT_EQ(r->messages[1]["content"], "a\nb");
  EXPECT_EQ(r->params.temperature, 0.0f);
  EXPECT_EQ(r->params.top_p, 0.5f);
  EXPECT_EQ(r->params.top_k, 0);
  EXPECT_FLOAT_EQ(r->params.min_p, 0.1f);
  EXPECT_EQ(r->params.seed, 7u);
  EXPECT_EQ(r->params.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_TRUE(r->max_tokens_set);
  EXPECT_EQ(r->n, 2);
  EXPECT_EQ(r->stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_TRUE(r->logprobs);
  EXPECT_EQ(r->params.num_logprobs, 3);
  ASSERT_EQ(r->params.logit_bias.size(), 1u);
  EXPECT_EQ(r->params.logit_bias[0].first, 5);
  EXPECT_EQ(r->template_kwargs["enable_thinking"], false);
}

TEST(OpenAiRequestTest, DefaultsApplyWhenOmitted) {
  RequestDefaults d;
  d.temperature = 0.3f;
  d.top_k = 40;
  d.max_tokens = 0;
  d.enable_thinking = true;
  std::string param;
  auto r = ParseChatCompletionsRequest(
      R"({"messages":[{"role":"user","content":"x"}],"temperature":null})", d, &param);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FLOAT_EQ(r->params.temperature, 0.3f);
  EXPECT_EQ(r->params.top_k, 40);
  EXPECT_FALSE(r->max_tokens_set);
  EXPECT_EQ(r->params.num_logprobs, -1);
  EXPECT_EQ(r->template_kwargs["enable_thinking"], true);
  // chat_template_kwargs beats reasoning_effort beats --thinking.
  auto r2 = ParseChatCompletionsRequest(
      R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high",
          "chat_template_kwargs":{"enable_thinking":false,"foo":"bar"}})",
      d, &param);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->template_kwargs["enable_thinking"], false);
  EXPECT_EQ(r2->template_kwargs["foo"], "bar");
  EXPECT_FALSE(r2->reasoning_budget.has_value());  // reasoning_effort sets no budget
  auto r3 = ParseChatCompletionsRequest(
      R"({"messages":[{"role":"user","content":"x"}],"thinking_token_budget":0})", d, &param);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->reasoning_budget, 0);
}

TEST(OpenAiRequestTest, CompletionsPromptForms) {
  std::string param;
  RequestDefaults d;
  auto text = ParseCompletionsRequest(R"({"prompt":"Once","echo":true,"logprobs":2})", d, &param);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->prompt_text, "Once");
  EXPECT_TRUE(text->echo);
  EXPECT_TRUE(text->logprobs);
  EXPECT_EQ(text->params.num_logprobs, 2);
  auto ids = ParseCompletionsRequest(R"({"prompt":[1,2,3]})", d, &param);
  ASSERT_TRUE(ids.ok());
  EXPECT_TRUE(ids->prompt_is_ids);
  EXPECT_EQ(ids->prompt_ids, (std::vector<TokenId>{1, 2, 3}));
  auto nested = ParseCompletionsRequest(R"({"prompt":[[4,5]],"suffix":""})", d, &param);
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(nested->prompt_ids, (std::vector<TokenId>{4, 5}));
  auto single = ParseCompletionsRequest(R"({"prompt":["x"]})", d, &param);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->prompt_text, "x");
}

TEST(AnthropicRequestTest, MessagesParsed) {
  std::string param;
  auto r = ParseMessagesRequest(
      R"({"model":"claude","max_tokens":20,"system":[{"type":"text","text":"sys"}],
          "messages":[{"role":"user","content":[{"type":"text","text":"hello"}]},
                      {"role":"assistant","content":"Once"}],
          "stop_sequences":["\n\n"],"temperature":0.5,"top_k":5,"stream":true,
          "thinking":{"type":"enabled","budget_tokens":10},"metadata":{"user_id":"u"}})",
      RequestDefaults{}, &param);
  ASSERT_TRUE(r.ok()) << r.status().message() << " " << param;
  ASSERT_EQ(r->messages.size(), 3u);
  EXPECT_EQ(r->messages[0]["role"], "system");
  EXPECT_EQ(r->messages[0]["content"], "sys");
  EXPECT_EQ(r->params.max_tokens, 20);
  EXPECT_EQ(r->stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(r->params.top_k, 5);
  EXPECT_TRUE(r->stream);
  EXPECT_FALSE(r->add_generation_prompt);  // assistant prefill
  EXPECT_EQ(r->template_kwargs["enable_thinking"], true);
  EXPECT_EQ(r->reasoning_budget, 10);
  // count_tokens bodies have no max_tokens.
  auto c = ParseMessagesRequest(R"({"messages":[{"role":"user","content":"hi"}]})",
                                RequestDefaults{}, &param, /*for_count_tokens=*/true);
  ASSERT_TRUE(c.ok());
}

TEST(OpenAiRequestTest, StructuredOutputFields) {
  std::string param;
  RequestDefaults d;
  auto schema = ParseChatCompletionsRequest(
      Chat(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,
              "schema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{}}}}})"),
      d, &param);
  ASSERT_TRUE(schema.ok()) << schema.status().message();
  ASSERT_TRUE(schema->grammar.has_value());
  EXPECT_EQ(schema->grammar->kind, GrammarKind::kJsonSchema);
  // The declaration order survives (the grammar writes properties in it).
  EXPECT_EQ(schema->grammar->text,
            R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{}}})");
  EXPECT_EQ(schema->grammar_field, "response_format.json_schema.schema");
  struct Want {
    std::string extra;
    GrammarKind kind;
    std::string text, field;
  };
  for (const Want& w : std::vector<Want>{
           {R"("response_format":{"type":"json_object"})", GrammarKind::kJsonSchema,
            R"({"type":"object"})", "response_format"},
           {R"("guided_json":"{\"type\":\"integer\"}")", GrammarKind::kJsonSchema,
            R"({"type":"integer"})", "guided_json"},
           {R"("json_schema":{"type":"boolean"})", GrammarKind::kJsonSchema,
            R"({"type":"boolean"})", "json_schema"},
           {R"("guided_regex":"[a-z]+")", GrammarKind::kRegex, "^(?:[a-z]+)$", "guided_regex"},
           {R"("guided_regex":"^a|b$")", GrammarKind::kRegex, "^(?:a|b)$", "guided_regex"},
           {R"("guided_regex":"a\\$")", GrammarKind::kRegex, "^(?:a\\$)$", "guided_regex"},
           {R"("guided_choice":["yes","no"])", GrammarKind::kChoice, R"(["yes","no"])",
            "guided_choice"},
           {R"("grammar":"root ::= \"x\"")", GrammarKind::kGbnf, R"(root ::= "x")", "grammar"},
           {R"("structured_outputs":{"regex":"a"})", GrammarKind::kRegex, "^(?:a)$",
            "structured_outputs.regex"},
       }) {
    auto r = ParseChatCompletionsRequest(Chat(w.extra), d, &param);
    ASSERT_TRUE(r.ok()) << w.extra << ": " << r.status().message();
    ASSERT_TRUE(r->grammar.has_value()) << w.extra;
    EXPECT_EQ(r->grammar->kind, w.kind) << w.extra;
    EXPECT_EQ(r->grammar->text, w.text) << w.extra;
    EXPECT_EQ(r->grammar_field, w.field) << w.extra;
  }
  auto text = ParseChatCompletionsRequest(Chat(R"("response_format":{"type":"text"})"), d, &param);
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(text->grammar.has_value());
  auto completions = ParseCompletionsRequest(Comp(R"("guided_regex":"[0-9]+")"), d, &param);
  ASSERT_TRUE(completions.ok());
  EXPECT_EQ(completions->grammar->text, "^(?:[0-9]+)$");
}

TEST(ApiErrorTest, StatusMapping) {
  EXPECT_EQ(ApiError::FromStatus(OutOfRangeError("x")).http_status, 400);
  EXPECT_EQ(ApiError::FromStatus(OutOfRangeError("x")).code, "context_length_exceeded");
  EXPECT_EQ(ApiError::FromStatus(ResourceExhaustedError("x")).code, "memory_admission");
  EXPECT_EQ(ApiError::FromStatus(ResourceExhaustedError("x")).http_status, 400);
  EXPECT_EQ(ApiError::FromStatus(FailedPreconditionError("x")).http_status, 503);
  EXPECT_EQ(ApiError::FromStatus(InternalError("x")).http_status, 500);
  ApiError e = ApiError::FromStatus(InvalidArgumentError("bad top_p"), "top_p");
  auto a = e.ToJson(ApiFlavor::kAnthropic);
  EXPECT_EQ(a["type"], "error");
  EXPECT_EQ(a["error"]["type"], "invalid_request_error");
  EXPECT_EQ(a["error"]["message"], "bad top_p");
  auto o = e.ToJson(ApiFlavor::kOpenAi);
  EXPECT_EQ(o.dump(), R"({"error":{"message":"bad top_p","type":"invalid_request_error",)"
                      R"("param":"top_p","code":null}})");
}

// The safety net behind the field checks: a throwing nlohmann accessor becomes a 400.
TEST(JsonFieldsTest, CatchJsonErrorsTurnsThrowsIntoInvalidArgument) {
  StatusOr<int> r = CatchJsonErrors(
      []() -> StatusOr<int> { return nlohmann::json::parse(R"({"a":"x"})")["a"].get<int>(); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("could not be read"), std::string::npos);
  EXPECT_EQ(*CatchJsonErrors([]() -> StatusOr<int> { return 3; }), 3);
}

TEST(JsonFieldsTest, ParseJsonObjectNamesTheOverflowingValue) {
  std::string param;
  StatusOr<nlohmann::json> r = ParseJsonObject(R"({"a":{"b c":[0,{"d":1e999}]}})", &param);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(param, R"(a["b c"][1].d)");
  EXPECT_EQ(
      std::string(r.status().message()).rfind(param + ": the number 1e999 is out of range", 0), 0u)
      << r.status().message();
  r = ParseJsonObject("-1e999", &param);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(param, "");
  EXPECT_NE(std::string(r.status().message()).find("the request body: the number -1e999"),
            std::string::npos);
  // Well-formed bodies still parse, big integers as doubles.
  r = ParseJsonObject(R"({"n":12345678901234567890123})", &param);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)["n"].is_number_float());
}

}  // namespace
}  // namespace loom
