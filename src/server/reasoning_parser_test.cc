// ReasoningSplitter on model-shaped outputs: every output split into chunks at every possible
// boundary (and byte by byte) gives the same reasoning and text as the whole output fed at once,
// and that is the expected split. ReasoningSource: kText events become kReasoning / kText per
// choice, logprobs stay on text events, the held tail is flushed before kFinish.
#include "server/reasoning_parser.h"

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "server/choice_event_testing.h"
#include "server/output_parsing.h"
#include "server/text_codec.h"

namespace loom {
namespace {

struct Case {
  const char* name;
  bool starts_in_reasoning;
  std::string output;
  std::string reasoning, text;  // expected
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"qwen3 thinking", false, "<think>\nThe user greets.\n</think>\n\nHello!",
       "\nThe user greets.\n", "\n\nHello!"},
      {"leading whitespace before the open marker", false, "\n <think>x</think>y", "x", "y"},
      {"no reasoning", false, "Hello <think> is not a section here", "",
       "Hello <think> is not a section here"},
      {"whitespace then text", false, "\n\nHi", "", "\n\nHi"},
      {"template-opened (deepseek-r1)", true, "Let me think.\n</think>\n\nAnswer: 4",
       "Let me think.\n", "\n\nAnswer: 4"},
      {"ends inside reasoning (max_tokens)", false, "<think>still thinking </thi",
       "still thinking </thi", ""},
      {"template-opened, never closed", true, "only thoughts", "only thoughts", ""},
      {"later markers are text", false, "<think>a</think>b<think>c</think>", "a",
       "b<think>c</think>"},
      {"a partial close that is not one", false, "<think>a </th ink> b</think>c", "a </th ink> b",
       "c"},
      {"a partial open that is not one", false, "<thin k>", "", "<thin k>"},
      {"empty section", false, "<think></think>Answer", "", "Answer"},
      {"stray close without an open", false, "text</think>more", "", "text</think>more"},
      {"multi-byte utf-8 around markers", false, "<think>é→😀</think>ü", "é→😀", "ü"},
      {"empty output", false, "", "", ""},
      {"only whitespace", false, " \n", "", " \n"},
  };
  return cases;
}

ReasoningSplitter::Pieces Split(const Case& c, const std::vector<size_t>& cuts) {
  ReasoningSplitter s({}, c.starts_in_reasoning);
  ReasoningSplitter::Pieces all;
  size_t at = 0;
  auto add = [&](ReasoningSplitter::Pieces p) {
    all.reasoning += p.reasoning;
    all.text += p.text;
  };
  for (size_t cut : cuts) {
    add(s.Feed(std::string_view(c.output).substr(at, cut - at)));
    at = cut;
  }
  add(s.Feed(std::string_view(c.output).substr(at)));
  add(s.Flush());
  return all;
}

TEST(ReasoningSplitterTest, WholeOutput) {
  for (const Case& c : Cases()) {
    const ReasoningSplitter::Pieces p = Split(c, {});
    EXPECT_EQ(p.reasoning, c.reasoning) << c.name;
    EXPECT_EQ(p.text, c.text) << c.name;
  }
}

TEST(ReasoningSplitterTest, EveryChunkBoundaryGivesTheSameSplit) {
  for (const Case& c : Cases()) {
    const size_t n = c.output.size();
    for (size_t i = 0; i <= n; ++i) {  // one cut
      const ReasoningSplitter::Pieces p = Split(c, {i});
      ASSERT_EQ(p.reasoning, c.reasoning) << c.name << " cut at " << i;
      ASSERT_EQ(p.text, c.text) << c.name << " cut at " << i;
      for (size_t j = i; j <= n; ++j) {  // two cuts
        const ReasoningSplitter::Pieces q = Split(c, {i, j});
        ASSERT_EQ(q.reasoning, c.reasoning) << c.name << " cuts at " << i << ", " << j;
        ASSERT_EQ(q.text, c.text) << c.name << " cuts at " << i << ", " << j;
      }
    }
    std::vector<size_t> bytes;  // byte by byte
    for (size_t i = 1; i < n; ++i) bytes.push_back(i);
    const ReasoningSplitter::Pieces b = Split(c, bytes);
    EXPECT_EQ(b.reasoning, c.reasoning) << c.name << " byte by byte";
    EXPECT_EQ(b.text, c.text) << c.name << " byte by byte";
  }
}

// Nothing decided is held back: once the close marker is complete, the text after it comes out
// of the same Feed; reasoning streams out as it arrives except a possible marker prefix.
TEST(ReasoningSplitterTest, HoldsBackOnlyAPossibleMarker) {
  ReasoningSplitter s;
  EXPECT_EQ(s.Feed("<thi").reasoning, "");
  EXPECT_EQ(s.Feed("nk>abc").reasoning, "abc");
  EXPECT_TRUE(s.in_reasoning());
  EXPECT_EQ(s.Feed("d</").reasoning, "d");
  const ReasoningSplitter::Pieces p = s.Feed("think>ok");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.text, "ok");
  EXPECT_FALSE(s.in_reasoning());
  const ReasoningSplitter::Pieces q = s.Feed("</think>");  // text now: nothing held
  EXPECT_EQ(q.text, "</think>");
}

TEST(ReasoningSplitterTest, OtherMarkers) {
  ReasoningSplitter s(ReasoningMarkers{"<|channel|>analysis<|message|>", "<|end|>"});
  ReasoningSplitter::Pieces p = s.Feed("<|channel|>analysis<|message|>plan<|end|>final");
  EXPECT_EQ(p.reasoning, "plan");
  EXPECT_EQ(p.text, "final");
}

// Returns one scripted batch per Poll.
using testing::Describe;
using testing::ScriptedSource;

TEST(ReasoningSourceTest, SplitsEachChoiceAndFlushesBeforeFinish) {
  LogprobEntry lp;
  lp.text = "x";
  ChoiceEvent with_lp = ChoiceEvent::Text(0, "<think>a");
  with_lp.logprobs = {lp};
  std::deque<std::vector<ChoiceEvent>> script = {
      {with_lp, ChoiceEvent::Text(1, "plain")},
      {ChoiceEvent::Text(0, "b</thi"), ChoiceEvent::Text(1, " <think>")},
      {ChoiceEvent::Text(0, "nk>c"), ChoiceEvent::Finish(1, ChoiceFinishReason::kLength)},
      {ChoiceEvent::Text(0, "</"), ChoiceEvent::Finish(0, ChoiceFinishReason::kStop)},
  };
  ReasoningSource src(std::make_unique<ScriptedSource>(std::move(script)), {}, false);
  std::string got;
  while (!src.done()) got += Describe(src.Poll(std::chrono::milliseconds(0))) + "| ";
  EXPECT_EQ(got, "0R[a] 0T[]+lp 1T[plain] | 0R[b] 1T[ <think>] | 0T[c] 1F[] | 0T[</] 0F[] | ");
  EXPECT_EQ(src.usage().completion_tokens, 5);
}

// A byte-level codec in which "<think>" and "</think>" are single tokens (300 and 301), as the
// added tokens of Qwen3's vocabulary.
class ThinkCodec final : public TextCodec {
 public:
  StatusOr<std::vector<TokenId>> Encode(std::string_view text, bool) const override {
    std::vector<TokenId> ids;
    for (size_t i = 0; i < text.size();) {
      if (text.substr(i).starts_with("<think>")) {
        ids.push_back(300);
        i += 7;
      } else if (text.substr(i).starts_with("</think>")) {
        ids.push_back(301);
        i += 8;
      } else {
        ids.push_back(static_cast<unsigned char>(text[i++]));
      }
    }
    return ids;
  }
  std::string Decode(std::span<const TokenId>, bool) const override { return ""; }
  int vocab_size() const override { return 302; }
  bool has_chat_template() const override { return true; }
  StatusOr<std::string> RenderChat(const nlohmann::ordered_json&) const override {
    return std::string();
  }
};

// The engine's budget from the request's (else the server's) number and the rendered prompt: the
// markers as token ids, the forced "\n</think>\n\n", where the section starts; none when the
// prompt closed the section, for completions, or without the reasoning parser.
TEST(ResolveReasoningBudgetTest, FromTheRequestAndThePrompt) {
  const ThinkCodec codec;
  OutputParsers parsers;
  parsers.reasoning = ReasoningMarkers{};
  GenerationRequest req;
  req.reasoning_budget = 5;
  ResolveReasoningBudget(parsers, &codec, "<|im_start|>assistant\n<think>\n", 3, &req);
  ASSERT_TRUE(req.engine_reasoning_budget.has_value());
  const ReasoningBudget& b = *req.engine_reasoning_budget;
  EXPECT_EQ(b.max_tokens, 5);
  EXPECT_TRUE(b.starts_open);
  EXPECT_EQ(b.open, std::vector<TokenId>{300});
  EXPECT_EQ(b.close, std::vector<TokenId>{301});
  EXPECT_EQ(b.forced, (std::vector<TokenId>{'\n', 301, '\n', '\n'}));
  EXPECT_TRUE(b.Validate(codec.vocab_size()).ok());

  // The server default when the request sets none; a prompt that leaves the section to the model.
  req.reasoning_budget.reset();
  ResolveReasoningBudget(parsers, &codec, "<|im_start|>assistant\n", 3, &req);
  ASSERT_TRUE(req.engine_reasoning_budget.has_value());
  EXPECT_EQ(req.engine_reasoning_budget->max_tokens, 3);
  EXPECT_FALSE(req.engine_reasoning_budget->starts_open);

  // No budget: unlimited, thinking off in the prompt, completions, no reasoning parser.
  ResolveReasoningBudget(parsers, &codec, "<think>\n", -1, &req);
  EXPECT_FALSE(req.engine_reasoning_budget.has_value());
  req.reasoning_budget = 0;
  ResolveReasoningBudget(parsers, &codec, "assistant\n<think>\n\n</think>\n\n", -1, &req);
  EXPECT_FALSE(req.engine_reasoning_budget.has_value());
  ResolveReasoningBudget(parsers, &codec, "<think>\n", -1, &req);
  EXPECT_EQ(req.engine_reasoning_budget->max_tokens, 0);
  req.kind = ApiKind::kCompletions;
  ResolveReasoningBudget(parsers, &codec, "<think>\n", -1, &req);
  EXPECT_FALSE(req.engine_reasoning_budget.has_value());
  req.kind = ApiKind::kMessages;
  ResolveReasoningBudget(OutputParsers{}, &codec, "<think>\n", -1, &req);
  EXPECT_FALSE(req.engine_reasoning_budget.has_value());
}

}  // namespace
}  // namespace loom
