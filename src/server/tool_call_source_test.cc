// ToolCallSource: a choice's parsed tool calls become kToolCallStart / kToolCallArgs events with
// per-choice indexes and fresh ids, text around them stays in order with its logprobs, a choice
// that called a tool finishes with kToolCalls, and parallel_tool_calls=false keeps the first
// call only. The parser here is a scripted one: "@name(args)" is a call, so the source's own
// logic is what is tested (the real formats are tool_parser_test's).
#include "server/tool_call_source.h"

#include <gtest/gtest.h>

#include "server/choice_event_testing.h"

namespace loom {
namespace {

using testing::Describe;
using testing::ScriptedSource;

// "@name(args)": a call named `name` with arguments `args`; everything else is text. Chunks
// never cut a call in these tests, so no holding back is needed.
class AtCallParser : public ToolCallParser {
 public:
  void Feed(std::string_view chunk, std::vector<ToolParseEvent>* out) override {
    std::string s(chunk);
    size_t i = 0;
    while (i < s.size()) {
      size_t at = s.find('@', i);
      if (at == std::string::npos) at = s.size();
      if (at > i) out->push_back({ToolParseEvent::Kind::kText, s.substr(i, at - i)});
      if (at == s.size()) break;
      const size_t open = s.find('(', at), close = s.find(')', at);
      out->push_back({ToolParseEvent::Kind::kCallStart, s.substr(at + 1, open - at - 1)});
      out->push_back({ToolParseEvent::Kind::kCallArgs, s.substr(open + 1, close - open - 1)});
      i = close + 1;
    }
  }
  void Flush(std::vector<ToolParseEvent>* out) override {
    out->push_back({ToolParseEvent::Kind::kText, "<flushed>"});
  }
};

std::unique_ptr<ToolCallSource> Make(std::deque<std::vector<ChoiceEvent>> script, bool parallel,
                                     const std::string& prefix = "call_") {
  return std::make_unique<ToolCallSource>(
      std::make_unique<ScriptedSource>(std::move(script)),
      [] { return std::make_unique<AtCallParser>(); }, prefix, parallel);
}

std::string Drain(ToolCallSource* src, std::vector<ChoiceEvent>* all = nullptr) {
  std::string got;
  while (!src->done()) {
    std::vector<ChoiceEvent> batch = src->Poll(std::chrono::milliseconds(0));
    got += Describe(batch) + "| ";
    if (all != nullptr) all->insert(all->end(), batch.begin(), batch.end());
  }
  return got;
}

TEST(ToolCallSourceTest, CallsBecomeEventsPerChoice) {
  LogprobEntry lp;
  ChoiceEvent first = ChoiceEvent::Text(0, "hi @f({})");
  first.logprobs = {lp};
  ChoiceEvent reasoning = ChoiceEvent::Reasoning(1, "think");
  std::deque<std::vector<ChoiceEvent>> script = {
      {first, reasoning, ChoiceEvent::Text(1, "plain")},
      {ChoiceEvent::Text(0, "@g({\"a\":1})"), ChoiceEvent::Finish(1, ChoiceFinishReason::kStop)},
      {ChoiceEvent::Finish(0, ChoiceFinishReason::kStop)},
  };
  auto src = Make(std::move(script), /*parallel=*/true);
  std::vector<ChoiceEvent> all;
  EXPECT_EQ(Drain(src.get(), &all),
            "0T[hi ] 0S[0:f] 0A[0:{}] 0T[]+lp 1R[think] 1T[plain] | 0S[1:g] 0A[1:{\"a\":1}] "
            "1T[<flushed>] 1F[] | 0T[<flushed>] 0F[] | ");
  std::vector<std::string> ids;
  for (const ChoiceEvent& e : all) {
    if (e.kind == ChoiceEventKind::kToolCallStart) ids.push_back(e.tool_call_id);
    if (e.kind == ChoiceEventKind::kFinish) {
      // Choice 0 called tools: "tool_calls"; choice 1 did not.
      EXPECT_EQ(e.finish_reason,
                e.choice_idx == 0 ? ChoiceFinishReason::kToolCalls : ChoiceFinishReason::kStop);
    }
  }
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_NE(ids[0], ids[1]);
  for (const std::string& id : ids) {
    EXPECT_EQ(id.rfind("call_", 0), 0u) << id;
    EXPECT_EQ(id.size(), 5u + 24u) << id;
  }
}

TEST(ToolCallSourceTest, LengthFinishIsKeptAndAnthropicIdsArePrefixed) {
  std::deque<std::vector<ChoiceEvent>> script = {
      {ChoiceEvent::Text(0, "@f(1)"), ChoiceEvent::Finish(0, ChoiceFinishReason::kLength)}};
  auto src = Make(std::move(script), true, "toolu_");
  std::vector<ChoiceEvent> all;
  Drain(src.get(), &all);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].tool_call_id.rfind("toolu_", 0), 0u);
  EXPECT_EQ(all.back().finish_reason, ChoiceFinishReason::kLength);  // cut short: not a call
}

TEST(ToolCallSourceTest, WithoutParallelCallsOnlyTheFirstIsKept) {
  std::deque<std::vector<ChoiceEvent>> script = {
      {ChoiceEvent::Text(0, "a @f(1) b @g(2) c"),
       ChoiceEvent::Finish(0, ChoiceFinishReason::kStop)}};
  auto src = Make(std::move(script), /*parallel=*/false);
  EXPECT_EQ(Drain(src.get()), "0T[a ] 0S[0:f] 0A[0:1] 0F[] | ");
}

// A parser that reads a chunk starting with '!' as reasoning (as harmony's analysis channel
// comes out of its parser) and "@name" as a call without arguments.
class BangReasoningParser : public ToolCallParser {
 public:
  void Feed(std::string_view chunk, std::vector<ToolParseEvent>* out) override {
    if (chunk.starts_with('!')) {
      out->push_back({ToolParseEvent::Kind::kReasoning, std::string(chunk.substr(1))});
    } else if (chunk.starts_with('@')) {
      out->push_back({ToolParseEvent::Kind::kCallStart, std::string(chunk.substr(1))});
      out->push_back({ToolParseEvent::Kind::kCallArgs, "{}"});
    } else {
      out->push_back({ToolParseEvent::Kind::kText, std::string(chunk)});
    }
  }
  void Flush(std::vector<ToolParseEvent>*) override {}
};

TEST(ToolCallSourceTest, ParserReasoningBecomesReasoningEvents) {
  auto make = [](bool parallel) {
    std::deque<std::vector<ChoiceEvent>> script = {
        {ChoiceEvent::Text(0, "!think"), ChoiceEvent::Text(0, "answer"), ChoiceEvent::Text(0, "@f"),
         ChoiceEvent::Text(0, "!more"), ChoiceEvent::Text(0, "@g"),
         ChoiceEvent::Finish(0, ChoiceFinishReason::kStop)}};
    return std::make_unique<ToolCallSource>(
        std::make_unique<ScriptedSource>(std::move(script)),
        [] { return std::make_unique<BangReasoningParser>(); }, "call_", parallel);
  };
  EXPECT_EQ(Drain(make(true).get()),
            "0R[think] 0T[answer] 0S[0:f] 0A[0:{}] 0R[more] 0S[1:g] 0A[1:{}] 0F[] | ");
  // Without parallel calls, what follows the first call is dropped, reasoning too.
  EXPECT_EQ(Drain(make(false).get()), "0R[think] 0T[answer] 0S[0:f] 0A[0:{}] 0F[] | ");
}

}  // namespace
}  // namespace loom
