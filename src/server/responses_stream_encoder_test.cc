// The Responses API stream encoder: a sequence of choice events → the exact sequence of typed
// SSE events (each `event:` name equal to its data's type, sequence_number 0, 1, 2, ...), the
// items they open and close, and the final response object the SDKs read.
#include "server/responses_stream_encoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace loom {
namespace {

using nlohmann::ordered_json;

struct Parsed {
  std::vector<std::string> events;  // "type" or "type:detail"
  std::vector<ordered_json> data;
};

// Splits SSE text into events; checks framing and sequence numbers; describes each event by its
// type plus what identifies it (output_index, item type, delta text).
Parsed ParseSse(const std::string& sse, int* next_seq) {
  Parsed p;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event at " << pos;
    if (end == std::string::npos) break;
    const std::string block = sse.substr(pos, end - pos);
    pos = end + 2;
    if (block.rfind(":", 0) == 0) continue;  // a comment
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    const size_t nl = block.find('\n');
    const std::string name = block.substr(7, nl - 7);
    EXPECT_EQ(block.substr(nl + 1, 6), "data: ");
    ordered_json d = ordered_json::parse(block.substr(nl + 7));
    EXPECT_EQ(d["type"], name);
    EXPECT_EQ(d["sequence_number"], (*next_seq)++) << name;
    std::string desc = name;
    if (d.contains("item")) {
      desc += ":" + std::to_string(d["output_index"].get<int>()) + " " +
              d["item"]["type"].get<std::string>();
    } else if (d.contains("delta")) {
      desc +=
          ":" + std::to_string(d["output_index"].get<int>()) + " " + d["delta"].get<std::string>();
    } else if (d.contains("part")) {
      desc += ":" + std::to_string(d["output_index"].get<int>()) + " " +
              d["part"]["type"].get<std::string>();
    } else if (d.contains("output_index")) {
      desc += ":" + std::to_string(d["output_index"].get<int>());
    }
    p.events.push_back(desc);
    p.data.push_back(std::move(d));
  }
  return p;
}

struct EncodedRun {
  Parsed parsed;
  ordered_json done_response;
  std::vector<ResponsesOutputItem> done_output;
  int done_calls = 0;
};

EncodedRun Encode(const std::vector<ChoiceEvent>& events, bool fail = false) {
  EncodedRun run;
  ordered_json echo{{"instructions", nullptr}, {"store", true}};
  ResponsesStreamEncoder enc(
      ResponseMeta{"resp_1", "m", 100}, echo, {{"spawn", "agents"}},
      [](const std::string& s) { return static_cast<int>(s.size()); },
      [&run](const ordered_json& r, const std::vector<ResponsesOutputItem>& out) {
        run.done_response = r;
        run.done_output = out;
        ++run.done_calls;
      });
  const Usage usage{5, 9, 2, {}};
  std::string sse = enc.Start(usage);
  for (const ChoiceEvent& e : events) sse += enc.Encode(e);
  sse += enc.KeepAlive();
  if (fail) {
    sse += enc.Error(ApiError::FromStatus(UnavailableError("shutting down")));
  } else {
    sse += enc.Finish(usage);
  }
  EXPECT_TRUE(enc.ended());
  int seq = 0;
  run.parsed = ParseSse(sse, &seq);
  return run;
}

TEST(ResponsesStreamEncoder, ReasoningTextAndCallInOrder) {
  ChoiceEvent fin = ChoiceEvent::Finish(0, ChoiceFinishReason::kToolCalls);
  EncodedRun run = Encode(
      {ChoiceEvent::Reasoning(0, "hm"), ChoiceEvent::Reasoning(0, "m"), ChoiceEvent::Text(0, "Hi"),
       ChoiceEvent::Text(0, ""), ChoiceEvent::Text(0, " there"),
       ChoiceEvent::ToolCallStart(0, 0, "call_a", "spawn"),
       ChoiceEvent::ToolCallArgs(0, 0, "{\"x\":"), ChoiceEvent::ToolCallArgs(0, 0, "1}"), fin});
  const std::vector<std::string> want = {
      "response.created",
      "response.in_progress",
      "response.output_item.added:0 reasoning",
      "response.content_part.added:0 reasoning_text",
      "response.reasoning_text.delta:0 hm",
      "response.reasoning_text.delta:0 m",
      "response.reasoning_text.done:0",
      "response.content_part.done:0 reasoning_text",
      "response.output_item.done:0 reasoning",
      "response.output_item.added:1 message",
      "response.content_part.added:1 output_text",
      "response.output_text.delta:1 Hi",
      "response.output_text.delta:1  there",
      "response.output_text.done:1",
      "response.content_part.done:1 output_text",
      "response.output_item.done:1 message",
      "response.output_item.added:2 function_call",
      "response.function_call_arguments.delta:2 {\"x\":",
      "response.function_call_arguments.delta:2 1}",
      "response.function_call_arguments.done:2",
      "response.output_item.done:2 function_call",
      "response.completed",
  };
  EXPECT_EQ(run.parsed.events, want);
  const std::vector<ordered_json>& d = run.parsed.data;
  // The opening response: in progress, no output, no usage.
  EXPECT_EQ(d[0]["response"]["id"], "resp_1");
  EXPECT_EQ(d[0]["response"]["object"], "response");
  EXPECT_EQ(d[0]["response"]["status"], "in_progress");
  EXPECT_EQ(d[0]["response"]["output"].size(), 0u);
  EXPECT_TRUE(d[0]["response"]["usage"].is_null());
  // Items: added in progress and empty, done completed and whole; deltas name their item.
  EXPECT_EQ(d[9]["item"]["status"], "in_progress");
  EXPECT_EQ(d[9]["item"]["content"].size(), 0u);
  EXPECT_EQ(d[11]["item_id"], d[9]["item"]["id"]);
  EXPECT_EQ(d[11]["content_index"], 0);
  EXPECT_EQ(d[13]["text"], "Hi there");
  EXPECT_EQ(d[15]["item"]["content"][0]["text"], "Hi there");
  EXPECT_EQ(d[15]["item"]["status"], "completed");
  EXPECT_EQ(d[16]["item"]["call_id"], "call_a");
  EXPECT_EQ(d[16]["item"]["name"], "spawn");
  EXPECT_EQ(d[16]["item"]["namespace"], "agents");
  EXPECT_EQ(d[16]["item"]["arguments"], "");
  EXPECT_EQ(d[19]["arguments"], "{\"x\":1}");
  EXPECT_EQ(d[20]["item"]["arguments"], "{\"x\":1}");
  EXPECT_EQ(d[8]["item"]["content"][0].dump(), R"({"type":"reasoning_text","text":"hmm"})");
  // The final response: every item, usage (reasoning tokens from the counter: 3 bytes).
  const ordered_json& r = d.back()["response"];
  EXPECT_EQ(r["status"], "completed");
  ASSERT_EQ(r["output"].size(), 3u);
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Hi there");
  EXPECT_EQ(r["output"][2]["arguments"], "{\"x\":1}");
  EXPECT_EQ(r["usage"].dump(),
            R"({"input_tokens":5,"input_tokens_details":{"cached_tokens":2},"output_tokens":9,)"
            R"("output_tokens_details":{"reasoning_tokens":3},"total_tokens":14})");
  EXPECT_EQ(run.done_calls, 1);
  EXPECT_EQ(run.done_response, r);
  ASSERT_EQ(run.done_output.size(), 3u);
  EXPECT_EQ(run.done_output[2].arguments, "{\"x\":1}");
}

TEST(ResponsesStreamEncoder, EmptyOutputGetsAMessageAndLengthIsIncomplete) {
  EncodedRun run = Encode({ChoiceEvent::Finish(0, ChoiceFinishReason::kLength)});
  const std::vector<std::string> want = {
      "response.created",
      "response.in_progress",
      "response.output_item.added:0 message",
      "response.content_part.added:0 output_text",
      "response.output_text.done:0",
      "response.content_part.done:0 output_text",
      "response.output_item.done:0 message",
      "response.incomplete",
  };
  EXPECT_EQ(run.parsed.events, want);
  const ordered_json& r = run.parsed.data.back()["response"];
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"].dump(), R"({"reason":"max_output_tokens"})");
}

TEST(ResponsesStreamEncoder, FailureEndsWithResponseFailed) {
  EncodedRun run = Encode({ChoiceEvent::Text(0, "par")}, /*fail=*/true);
  ASSERT_FALSE(run.parsed.events.empty());
  EXPECT_EQ(run.parsed.events.back(), "response.failed");
  const ordered_json& r = run.parsed.data.back()["response"];
  EXPECT_EQ(r["status"], "failed");
  EXPECT_EQ(r["error"]["message"], "shutting down");
  EXPECT_EQ(run.done_calls, 0);  // a failed response is not stored
}

TEST(ResponsesResponse, NonStreamingItemsFromACollectedChoice) {
  CollectedChoice c;
  c.reasoning = "r";
  c.tool_calls.push_back({"call_1", "spawn", "{}"});
  std::vector<ResponsesOutputItem> items = OutputItemsOf(c, {{"spawn", "agents"}});
  ASSERT_EQ(items.size(), 2u);  // no text and a call: no message item
  EXPECT_EQ(items[0].kind, ResponsesOutputItem::Kind::kReasoning);
  EXPECT_EQ(items[1].name_space, "agents");
  EXPECT_EQ(items[0].id.rfind("rs_", 0), 0u);
  EXPECT_EQ(items[1].id.rfind("fc_", 0), 0u);
  EXPECT_EQ(OutputAsMessage(items).dump(),
            R"({"role":"assistant","content":"","reasoning_content":"r","tool_calls":[)"
            R"({"id":"call_1","type":"function","function":{"name":"spawn","arguments":{}}}]})");
  CollectedChoice empty;
  ASSERT_EQ(OutputItemsOf(empty, {}).size(), 1u);
  EXPECT_EQ(OutputItemsOf(empty, {})[0].kind, ResponsesOutputItem::Kind::kMessage);
  EXPECT_STREQ(ResponsesStatus(ChoiceFinishReason::kStopString), "completed");
  EXPECT_STREQ(ResponsesStatus(ChoiceFinishReason::kLength), "incomplete");
}

}  // namespace
}  // namespace loom
