// Response / SSE shapes: the exact JSON the OpenAI and Anthropic SDKs parse.
#include <gtest/gtest.h>

#include "server/anthropic_response.h"
#include "server/openai_response.h"
#include "server/responses_response.h"
#include "server/sse.h"

namespace loom {
namespace {

const ResponseMeta kMeta{"chatcmpl-1", "stories", 1700000000};

TEST(OpenAiResponseTest, ChatCompletionShape) {
  CollectedChoice c;
  c.text = "Hi";
  c.finish_reason = ChoiceFinishReason::kStop;
  auto j = ChatCompletionJson(kMeta, {c}, /*with_logprobs=*/false, Usage{5, 2, 4, {}});
  EXPECT_EQ(j.dump(),
            R"({"id":"chatcmpl-1","object":"chat.completion","created":1700000000,)"
            R"("model":"stories","system_fingerprint":null,"choices":[{"index":0,"message":)"
            R"({"role":"assistant","content":"Hi","refusal":null},"logprobs":null,)"
            R"("finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,)"
            R"("total_tokens":7,"prompt_tokens_details":{"cached_tokens":4}}})");
}

TEST(OpenAiResponseTest, UsageNamesSpeculationWhenTheServerSpeculates) {
  EXPECT_FALSE(OpenAiUsageJson(Usage{5, 2, 0, {}}).contains("speculation"));
  EXPECT_EQ(OpenAiUsageJson(Usage{5, 9, 0, Usage::Speculation{12, 7}})["speculation"].dump(),
            R"({"drafted":12,"accepted":7})");
  EXPECT_EQ(ResponsesUsageJson(Usage{5, 9, 0, Usage::Speculation{3, 0}}, 0)["speculation"].dump(),
            R"({"drafted":3,"accepted":0})");
}

TEST(OpenAiResponseTest, ChatLogprobsShape) {
  LogprobEntry e{7, "é", -0.5f, {{"é", -0.5f}, {"a", -1.0f}}};
  auto j = ChatLogprobsJson({e});
  EXPECT_EQ(j.dump(),
            R"({"content":[{"token":"é","logprob":-0.5,"bytes":[195,169],"top_logprobs":[)"
            R"({"token":"é","logprob":-0.5,"bytes":[195,169]},{"token":"a","logprob":-1.0,)"
            R"("bytes":[97]}]}],"refusal":null})");
}

TEST(OpenAiResponseTest, CompletionLogprobsShape) {
  LogprobEntry a{1, " Once", -0.25f, {{" Once", -0.25f}}};
  LogprobEntry b{2, " upon", -1.5f, {{" upon", -1.5f}, {" a", -2.0f}}};
  auto j = CompletionLogprobsJson({a, b}, 3);
  EXPECT_EQ(j.dump(),
            R"({"tokens":[" Once"," upon"],"token_logprobs":[-0.25,-1.5],"top_logprobs":[)"
            R"({" Once":-0.25},{" upon":-1.5," a":-2.0}],"text_offset":[3,8]})");
}

TEST(OpenAiResponseTest, StreamChunks) {
  std::string empty;
  auto role = ChatChunkJson(kMeta, 0, &empty, true, nullptr, nullptr, false);
  EXPECT_EQ(role["choices"][0]["delta"].dump(), R"({"role":"assistant","content":""})");
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(role.contains("usage"));
  std::string fr = "length";
  auto fin = ChatChunkJson(kMeta, 1, nullptr, false, nullptr, &fr, true);
  EXPECT_EQ(fin["choices"][0]["delta"].dump(), "{}");
  EXPECT_EQ(fin["choices"][0]["index"], 1);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(fin["usage"].is_null());
  auto usage = UsageChunkJson(kMeta, "chat.completion.chunk", Usage{3, 4, 0, {}});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 7);
  auto comp = CompletionChunkJson(kMeta, 0, "abc", nullptr, 0, nullptr, false);
  EXPECT_EQ(comp["object"], "text_completion");
  EXPECT_EQ(comp["choices"][0]["text"], "abc");
  EXPECT_EQ(SseData(nlohmann::ordered_json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(std::string(kSseDone), "data: [DONE]\n\n");
}

TEST(OpenAiResponseTest, InvalidUtf8IsReplacedNotThrown) {
  std::string bad = "a\xff";
  std::string out = SseData(nlohmann::ordered_json{{"t", bad}});
  EXPECT_EQ(out, "data: {\"t\":\"a\xEF\xBF\xBD\"}\n\n");
}

TEST(AnthropicResponseTest, MessageAndEvents) {
  ResponseMeta meta{"msg_1", "stories", 0};
  CollectedChoice c;
  c.text = "Hi";
  c.finish_reason = ChoiceFinishReason::kStopString;
  c.stop_string = "END";
  auto m = AnthropicMessageJson(meta, c, Usage{10, 3, 8, {}});
  EXPECT_EQ(m.dump(),
            R"({"id":"msg_1","type":"message","role":"assistant","model":"stories",)"
            R"("content":[{"type":"text","text":"Hi"}],"stop_reason":"stop_sequence",)"
            R"("stop_sequence":"END","usage":{"input_tokens":2,"cache_creation_input_tokens":0,)"
            R"("cache_read_input_tokens":8,"output_tokens":3}})");
  auto start = MessageStartJson(meta, Usage{10, 3, 0, {}});
  EXPECT_EQ(start["type"], "message_start");
  EXPECT_EQ(start["message"]["usage"]["output_tokens"], 0);
  EXPECT_TRUE(start["message"]["content"].empty());
  EXPECT_EQ(ContentBlockDeltaJson(1, {{"type", "text_delta"}, {"text", "x"}}).dump(),
            R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}})");
  EXPECT_EQ(SseEvent("ping", nlohmann::ordered_json{{"type", "ping"}}),
            "event: ping\ndata: {\"type\":\"ping\"}\n\n");
  auto d = MessageDeltaJson("end_turn", std::nullopt, Usage{1, 5, 0, {}});
  EXPECT_EQ(d.dump(), R"({"type":"message_delta","delta":{"stop_reason":"end_turn",)"
                      R"("stop_sequence":null},"usage":{"output_tokens":5}})");
}

TEST(ResponseShapeTest, ReasoningAndToolCallsOnlyWhenPresent) {
  CollectedChoice c;
  c.text = "";
  c.reasoning = "think";
  c.tool_calls.push_back(CollectedToolCall{"call_1", "f", R"({"a":1})"});
  c.finish_reason = ChoiceFinishReason::kToolCalls;
  auto chat = ChatCompletionJson(kMeta, {c}, false, Usage{});
  EXPECT_EQ(chat["choices"][0]["message"].dump(),
            R"({"role":"assistant","content":null,"refusal":null,"reasoning_content":"think",)"
            R"("tool_calls":[{"id":"call_1","type":"function","function":{"name":"f",)"
            R"("arguments":"{\"a\":1}"}}]})");
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "tool_calls");
  auto msg = AnthropicMessageJson(ResponseMeta{"msg_1", "m", 0}, c, Usage{});
  EXPECT_EQ(msg["content"].dump(),
            R"([{"type":"thinking","thinking":"think","signature":""},)"
            R"({"type":"tool_use","id":"call_1","name":"f","input":{"a":1}}])");
  EXPECT_EQ(msg["stop_reason"], "tool_use");
}

}  // namespace
}  // namespace loom
