// Which parsers and grammars a request gets (output_parsing.h): harmony's channels are split on
// every chat reply, tools or not; Gemma 4's thought channel is its reasoning; forced calls in the
// literal and harmony formats get their grammar, and a schema the literal syntax cannot write is
// a 400 naming tool_choice.
#include "server/output_parsing.h"

#include <gtest/gtest.h>

#include "grammar/matcher.h"
#include "server/choice_event_testing.h"
#include "server/text_codec.h"

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

// A codec that only shows a chat template's source.
class TemplateOnlyCodec : public TextCodec {
 public:
  explicit TemplateOnlyCodec(std::string source) : source_(std::move(source)) {}
  StatusOr<std::vector<TokenId>> Encode(std::string_view, bool) const override {
    return std::vector<TokenId>{};
  }
  std::string Decode(std::span<const TokenId>, bool) const override { return ""; }
  int vocab_size() const override { return 0; }
  bool has_chat_template() const override { return true; }
  StatusOr<std::string> RenderChat(const ordered_json&) const override { return std::string(); }
  std::string chat_template_source(bool) const override { return source_; }

 private:
  std::string source_;
};

// Gemma 4: its template's <|channel>thought\n ... <channel|> is the reasoning section (special
// tokens, kept in the text), and a forced call's grammar starts after it.
TEST(OutputParsingTest, Gemma4ThoughtChannelIsReasoning) {
  const TemplateOnlyCodec codec(
      "{{- '<|channel>thought\\n' + thinking_text + '\\n<channel|>' -}}"
      "{{- '<|tool_call>call:' + function['name'] + '{' -}}");
  StatusOr<OutputParsers> parsers = ResolveOutputParsers("auto", "auto", &codec);
  ASSERT_TRUE(parsers.ok()) << parsers.status().ToString();
  EXPECT_EQ(parsers->tool_format, ToolCallFormat::kGemma4);
  ASSERT_TRUE(parsers->reasoning.has_value());
  EXPECT_EQ(parsers->reasoning->open, "<|channel>thought\n");
  EXPECT_EQ(parsers->reasoning->close, "<channel|>");

  GenerationRequest req;
  req.tools = Tools(R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
  req.tool_choice = ToolChoiceMode::kRequired;
  std::string param;
  ASSERT_TRUE(PrepareOutputParsing(*parsers, &req, &param).ok());
  EXPECT_FALSE(req.skip_special_tokens);
  // A byte-level vocabulary (token i = byte i) and an EOS token.
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.push_back("</s>");
  const TokenVocabulary vocab(bytes, {}, {256});
  GrammarCache cache(4);
  const std::string call = "<|tool_call>call:f{a:1}<tool_call|>";
  // Thinking on (the prompt leaves the channel to the model): a thought may come first.
  GenerationRequest on = req;
  ASSERT_TRUE(CompileRequestGrammar(*parsers, &cache, &vocab, "<|turn>model\n", &on, &param).ok());
  GrammarMatcher m(on.compiled_grammar);
  EXPECT_TRUE(m.AcceptBytes("<|channel>thought\nHm.<channel|>" + call) && m.IsAccepting());
  // Thinking off (the prompt closed an empty channel): the call at once.
  GenerationRequest off = req;
  ASSERT_TRUE(CompileRequestGrammar(*parsers, &cache, &vocab,
                                    "<|turn>model\n<|channel>thought\n<channel|>", &off, &param)
                  .ok());
  GrammarMatcher m2(off.compiled_grammar);
  EXPECT_FALSE(m2.AcceptBytes("<|channel>thought\n"));

  // The reply's thought comes out as reasoning.
  std::deque<std::vector<ChoiceEvent>> script = {
      {ChoiceEvent::Text(0, "<|channel>thought\nThe user wants <b>.<channel|>Done.")},
      {ChoiceEvent::Finish(0, ChoiceFinishReason::kStop)}};
  GenerationRequest plain;
  auto src =
      WrapOutputParsers(*parsers, plain, "<|turn>model\n",
                        std::make_unique<ScriptedSource>(std::move(script)), ApiFlavor::kOpenAi);
  EXPECT_EQ(Drain(src.get()), "0R[The user wants <b>.] 0T[Done.] 0F[] ");
}

}  // namespace
}  // namespace loom
