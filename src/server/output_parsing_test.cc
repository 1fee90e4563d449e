// Which parsers and grammars a request gets (output_parsing.h): harmony's channels are split on
// every chat reply, tools or not; forced calls in the literal and harmony formats get their
// grammar, and a schema the literal syntax cannot write is a 400 naming tool_choice.
#include "server/output_parsing.h"

#include <gtest/gtest.h>

#include "server/choice_event_testing.h"

namespace loom {
namespace {

using nlohmann::ordered_json;
using testing::Describe;
using testing::ScriptedSource;

std::string Drain(ChoiceEventSource* src) {
  std::string got;
  while (!src->done()) got += Describe(src->Poll(std::chrono::milliseconds(0)));
  return got;
}

OutputParsers Harmony() {
  OutputParsers p;
  p.tool_format = ToolCallFormat::kHarmony;
  return p;
}

TEST(OutputParsingTest, HarmonyChannelsAreSplitWithoutTools) {
  GenerationRequest req;
  std::string param;
  ASSERT_TRUE(PrepareOutputParsing(Harmony(), &req, &param).ok());
  EXPECT_FALSE(req.skip_special_tokens);  // the channel markers reach the parser
  EXPECT_FALSE(req.grammar.has_value());
  std::deque<std::vector<ChoiceEvent>> script = {
      {ChoiceEvent::Text(0, "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant")},
      {ChoiceEvent::Text(0, "<|channel|>final<|message|>Hi there.")},
      {ChoiceEvent::Finish(0, ChoiceFinishReason::kStop)}};
  auto src =
      WrapOutputParsers(Harmony(), req, "<|start|>assistant",
                        std::make_unique<ScriptedSource>(std::move(script)), ApiFlavor::kOpenAi);
  EXPECT_EQ(Drain(src.get()), "0R[Easy.] 0T[Hi there.] 0F[] ");

  // Completions are raw text: nothing is split, special tokens stay skipped.
  GenerationRequest completion;
  completion.kind = ApiKind::kCompletions;
  ASSERT_TRUE(PrepareOutputParsing(Harmony(), &completion, &param).ok());
  EXPECT_TRUE(completion.skip_special_tokens);
}

ordered_json Tools(const char* parameters) {
  return ordered_json::array(
      {{{"type", "function"},
        {"function", {{"name", "f"}, {"parameters", ordered_json::parse(parameters)}}}}});
}

TEST(OutputParsingTest, ForcedCallsInEveryFormatGetTheirGrammar) {
  for (const ToolCallFormat format :
       {ToolCallFormat::kGemma4, ToolCallFormat::kGemmaToolCode, ToolCallFormat::kHarmony}) {
    SCOPED_TRACE(std::string(ToolCallFormatName(format)));
    OutputParsers parsers;
    parsers.tool_format = format;
    GenerationRequest req;
    req.tools = Tools(R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
    req.tool_choice = ToolChoiceMode::kRequired;
    std::string param;
    ASSERT_TRUE(PrepareOutputParsing(parsers, &req, &param).ok());
    ASSERT_TRUE(req.grammar.has_value());
    EXPECT_EQ(req.grammar_field, "tool_choice");
    EXPECT_TRUE(CompileGrammarSpec(*req.grammar).ok());
  }
}

TEST(OutputParsingTest, ForcedLiteralCallOfAnUnwritableSchemaIsA400) {
  OutputParsers parsers;
  parsers.tool_format = ToolCallFormat::kGemma4;
  GenerationRequest req;
  req.tools = Tools(R"({"type": "object", "properties": {"a": {"not": {"type": "integer"}}}})");
  req.tool_choice = ToolChoiceMode::kRequired;
  std::string param;
  const Status s = PrepareOutputParsing(parsers, &req, &param);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(param, "tool_choice");
  EXPECT_NE(s.message().find("keyword \"not\""), std::string::npos) << s.ToString();
  // Under auto the lazy grammar leaves the keyword out (looser, never a failed request).
  GenerationRequest lazy;
  lazy.tools = req.tools;
  ASSERT_TRUE(PrepareOutputParsing(parsers, &lazy, &param).ok());
  ASSERT_TRUE(lazy.grammar.has_value());
  EXPECT_TRUE(lazy.grammar_optional);
}

}  // namespace
}  // namespace loom
