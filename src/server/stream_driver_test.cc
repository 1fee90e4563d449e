// StreamDriver over a scripted ChoiceEventSource: the order of Start / events / Finish, error
// events, keep-alives, and a client that goes away (the source is aborted, the disconnect
// counted). Also ChoiceCollector, the non-streaming aggregation of the same events.
#include "server/stream_driver.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "server/anthropic_stream_encoder.h"
#include "server/choice_collector.h"
#include "server/openai_stream_encoder.h"

namespace loom {
namespace {

using R = ChoiceFinishReason;
using Step = StreamDriver::Step;

// Returns one scripted batch of events per Poll; done() once the script is used up.
class ScriptedSource : public ChoiceEventSource {
 public:
  ScriptedSource(std::deque<std::vector<ChoiceEvent>> script, bool* aborted)
      : script_(std::move(script)), aborted_(aborted) {}
  std::vector<ChoiceEvent> Poll(std::chrono::milliseconds) override {
    if (script_.empty()) return {};
    std::vector<ChoiceEvent> batch = std::move(script_.front());
    script_.pop_front();
    return batch;
  }
  bool done() const override { return script_.empty() || *aborted_; }
  void Abort() override {
    if (!script_.empty()) *aborted_ = true;
  }
  Usage usage() const override { return Usage{4, 2, 0, {}}; }

 private:
  std::deque<std::vector<ChoiceEvent>> script_;
  bool* aborted_;
};

ChoiceEvent Error(int choice) {
  ChoiceEvent e = ChoiceEvent::Finish(choice, R::kAbort);
  e.error = UnavailableError("the request was aborted (server shutting down)");
  return e;
}

// Pumps until the driver stops asking; returns what was written and the last step.
struct Transcript {
  std::vector<std::string> writes;
  Step last = Step::kContinue;
};
Transcript PumpAll(StreamDriver& d, int max_pumps = 100, int fail_at_write = -1) {
  Transcript run;
  for (int i = 0; i < max_pumps && run.last == Step::kContinue; ++i) {
    run.last = d.Pump([&](std::string_view s) {
      if (static_cast<int>(run.writes.size()) == fail_at_write) return false;
      run.writes.emplace_back(s);
      return true;
    });
  }
  return run;
}

const ResponseMeta kMeta{"c1", "m", 7};
const StreamDriverOptions kNoKeepAlive{std::chrono::milliseconds(0), std::chrono::hours(1)};

TEST(StreamDriverTest, OpenAiStreamRunsToDone) {
  bool aborted = false;
  ServerMetrics metrics;
  std::deque<std::vector<ChoiceEvent>> script;
  script.push_back({ChoiceEvent::Text(0, "a")});
  script.push_back({});  // an idle poll writes nothing
  script.push_back({ChoiceEvent::Text(0, "b"), ChoiceEvent::Finish(0, R::kLength)});
  StreamDriver d(std::make_unique<ScriptedSource>(std::move(script), &aborted),
                 std::make_unique<OpenAiCompletionEncoder>(kMeta, 1, false, ""), &metrics, "r1",
                 kNoKeepAlive);
  Transcript run = PumpAll(d);
  EXPECT_EQ(run.last, Step::kDone);
  EXPECT_TRUE(d.finished());
  // Start wrote nothing (no echo); then "a"; then "b" + the finish chunk; then [DONE].
  ASSERT_EQ(run.writes.size(), 3u);
  EXPECT_NE(run.writes[0].find(R"("text":"a")"), std::string::npos);
  EXPECT_NE(run.writes[1].find(R"("text":"b")"), std::string::npos);
  EXPECT_NE(run.writes[1].find(R"("finish_reason":"length")"), std::string::npos);
  EXPECT_EQ(run.writes[2], "data: [DONE]\n\n");
  d.Release();
  EXPECT_FALSE(aborted);
  EXPECT_EQ(metrics.RenderPrometheus(EngineStats{}).find("loom_client_disconnects_total 1"),
            std::string::npos);
}

TEST(StreamDriverTest, OpenAiErrorEventThenTheStreamGoesOn) {
  bool aborted = false;
  ServerMetrics metrics;
  std::deque<std::vector<ChoiceEvent>> script;
  script.push_back({Error(0), ChoiceEvent::Text(1, "x"), ChoiceEvent::Finish(1, R::kStop)});
  StreamDriver d(std::make_unique<ScriptedSource>(std::move(script), &aborted),
                 std::make_unique<OpenAiChatEncoder>(kMeta, 2, false), &metrics, "r2",
                 kNoKeepAlive);
  Transcript run = PumpAll(d);
  EXPECT_EQ(run.last, Step::kDone);
  ASSERT_EQ(run.writes.size(), 3u);  // role chunks; error + choice 1; [DONE]
  EXPECT_EQ(run.writes[1].rfind(R"(data: {"error":{"message":"the request was aborted)", 0), 0u);
  EXPECT_NE(run.writes[1].find(R"("type":"server_unavailable")"), std::string::npos);
  EXPECT_NE(run.writes[1].find(R"("content":"x")"), std::string::npos);
  EXPECT_EQ(run.writes[2], "data: [DONE]\n\n");
}

TEST(StreamDriverTest, AnthropicErrorEndsTheStream) {
  bool aborted = false;
  ServerMetrics metrics;
  std::deque<std::vector<ChoiceEvent>> script;
  script.push_back({ChoiceEvent::Text(0, "a"), Error(0), ChoiceEvent::Text(0, "never")});
  script.push_back({ChoiceEvent::Text(0, "never either")});
  StreamDriver d(std::make_unique<ScriptedSource>(std::move(script), &aborted),
                 std::make_unique<AnthropicMessagesEncoder>(kMeta), &metrics, "r3", kNoKeepAlive);
  Transcript run = PumpAll(d);
  EXPECT_EQ(run.last, Step::kDone);
  EXPECT_TRUE(d.finished());
  ASSERT_EQ(run.writes.size(), 2u);
  const std::string& last = run.writes[1];
  EXPECT_NE(last.find("event: content_block_delta"), std::string::npos);
  EXPECT_EQ(last.substr(last.find("event: error")).rfind("event: error\n", 0), 0u);
  EXPECT_EQ(last.find("never"), std::string::npos);
  EXPECT_EQ(last.find("message_stop"), std::string::npos);
}

TEST(StreamDriverTest, IdleStreamWritesKeepAlives) {
  bool aborted = false;
  ServerMetrics metrics;
  std::deque<std::vector<ChoiceEvent>> script;
  script.push_back({});
  script.push_back({ChoiceEvent::Finish(0, R::kStop)});
  StreamDriver d(std::make_unique<ScriptedSource>(std::move(script), &aborted),
                 std::make_unique<AnthropicMessagesEncoder>(kMeta), &metrics, "r4",
                 StreamDriverOptions{std::chrono::milliseconds(0), std::chrono::milliseconds(0)});
  Transcript run = PumpAll(d);
  ASSERT_EQ(run.writes.size(), 3u);  // message_start; ping; the empty text block + message_stop
  EXPECT_EQ(run.writes[1], "event: ping\ndata: {\"type\":\"ping\"}\n\n");
  EXPECT_NE(run.writes[2].find("message_stop"), std::string::npos);
}

TEST(StreamDriverTest, FailedWriteAbortsTheSourceAndCountsTheDisconnect) {
  bool aborted = false;
  ServerMetrics metrics;
  std::deque<std::vector<ChoiceEvent>> script;
  script.push_back({ChoiceEvent::Text(0, "a")});
  script.push_back({ChoiceEvent::Text(0, "b")});
  script.push_back({ChoiceEvent::Finish(0, R::kStop)});
  StreamDriver d(std::make_unique<ScriptedSource>(std::move(script), &aborted),
                 std::make_unique<OpenAiChatEncoder>(kMeta, 1, false), &metrics, "r5",
                 kNoKeepAlive);
  Transcript run = PumpAll(d, 100, /*fail_at_write=*/2);
  EXPECT_EQ(run.last, Step::kClientGone);
  EXPECT_FALSE(d.finished());
  d.Release();
  EXPECT_TRUE(aborted);
  EXPECT_NE(metrics.RenderPrometheus(EngineStats{}).find("loom_client_disconnects_total 1"),
            std::string::npos);
  d.Release();  // idempotent
}

TEST(ChoiceCollectorTest, AggregatesEventsPerChoice) {
  ChoiceCollector c(2, "echo:");
  ChoiceEvent t = ChoiceEvent::Text(1, "b");
  t.logprobs.push_back(LogprobEntry{1, "b", -1.0f, {}});
  c.Add(ChoiceEvent::Text(0, "a"));
  c.Add(t);
  c.Add(ChoiceEvent::Reasoning(0, "think"));
  ChoiceEvent call;
  call.kind = ChoiceEventKind::kToolCallStart;
  call.tool_call_id = "call_1";
  call.tool_name = "f";
  c.Add(call);
  call.kind = ChoiceEventKind::kToolCallArgs;
  call.text = "{}";
  c.Add(call);
  ChoiceEvent stop = ChoiceEvent::Finish(1, R::kStopString);
  stop.stop_string = "END";
  c.Add(stop);
  c.Add(ChoiceEvent::Finish(0, R::kToolCalls));
  EXPECT_FALSE(c.failed());
  const auto& cs = c.choices();
  EXPECT_EQ(cs[0].text, "echo:a");
  EXPECT_EQ(cs[0].reasoning, "think");
  ASSERT_EQ(cs[0].tool_calls.size(), 1u);
  EXPECT_EQ(cs[0].tool_calls[0].name, "f");
  EXPECT_EQ(cs[0].tool_calls[0].arguments, "{}");
  EXPECT_EQ(cs[0].finish_reason, R::kToolCalls);
  EXPECT_EQ(cs[1].text, "echo:b");
  EXPECT_EQ(cs[1].logprobs.size(), 1u);
  EXPECT_EQ(cs[1].finish_reason, R::kStopString);
  EXPECT_EQ(cs[1].stop_string, "END");
  EXPECT_TRUE(cs[0].finished && cs[1].finished);
}

TEST(ChoiceCollectorTest, KeepsTheFirstError) {
  ChoiceCollector c(2);
  c.Add(Error(1));
  ChoiceEvent e = ChoiceEvent::Finish(0, R::kError);
  e.error = InternalError("boom");
  c.Add(e);
  ASSERT_TRUE(c.failed());
  EXPECT_EQ(c.error().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace loom
