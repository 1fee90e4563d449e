// Framed, Triggered and AfterReasoning: the wrapped grammar applies exactly between the frame,
// after each trigger, and only after the reasoning section (whose free text may hold anything but
// the close marker, including prefixes of it and marker-like text that restarts it).
#include "grammar/grammar_compose.h"

#include <gtest/gtest.h>

#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"

namespace loom {
namespace {

using grammar_test::Matches;
using grammar_test::MustCompile;

Grammar Schema(const char* text) {
  StatusOr<Grammar> g = CompileJsonSchemaText(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return *std::move(g);
}

TEST(GrammarComposeTest, FramedToolCall) {
  auto g = MustCompile(Framed(
      Schema(R"({"type":"object","properties":{"name":{"const":"f"},"arguments":{"type":"object",
                 "properties":{"n":{"type":"integer"}},"required":["n"]}},
                 "required":["name","arguments"]})"),
      "<tool_call>\n", "\n</tool_call>"));
  EXPECT_TRUE(Matches(g, "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"n\":3}}\n</tool_call>"));
  EXPECT_FALSE(Matches(g, "{\"name\":\"f\",\"arguments\":{\"n\":3}}"));
  EXPECT_FALSE(Matches(g, "<tool_call>\n{\"name\":\"g\",\"arguments\":{\"n\":3}}\n</tool_call>"));
  EXPECT_FALSE(Matches(g, "<tool_call>\n{\"name\":\"f\",\"arguments\":{}}\n</tool_call>"));
  EXPECT_FALSE(Matches(g, "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"n\":3}}\n</tool_call>x"));
}

// tool_choice auto's lazy grammar: anything until `<tool_call>`, then exactly a valid call, then
// free text again (more calls with repeat; none without).
TEST(GrammarComposeTest, TriggeredToolCalls) {
  const char* call = R"({"type":"object","properties":{"name":{"const":"f"},"arguments":{
      "type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
      "required":["name","arguments"]})";
  const std::string one = "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"n\":3}}\n</tool_call>";
  auto many = MustCompile(Triggered(Framed(Schema(call), "\n", "\n</tool_call>"), "<tool_call>",
                                    /*repeat=*/true));
  auto single = MustCompile(
      Triggered(Framed(Schema(call), "\n", "\n</tool_call>"), "<tool_call>", /*repeat=*/false));
  for (const auto& g : {many, single}) {
    for (const std::string& ok :
         {std::string(""), std::string("plain text, no call"), "Let me check.\n" + one,
          one + "\nDone.", std::string("a <tool_ b <tool_cal <<tool_call"), "<<" + one,
          "\xe2\x9c\x93 " + one}) {
      EXPECT_TRUE(Matches(g, ok)) << ok;
    }
    for (const std::string& bad :
         {std::string("<tool_call>\n{\"name\":\"g\",\"arguments\":{\"n\":3}}\n</tool_call>"),
          std::string("text <tool_call>"), std::string("<tool_call>{\"name\":\"f\"}"),
          "x<tool_call>" + one.substr(11, 20)}) {
      EXPECT_FALSE(Matches(g, bad)) << bad;
    }
  }
  EXPECT_TRUE(Matches(many, one + "\n" + one + " ok"));
  EXPECT_FALSE(Matches(single, one + "\n" + one));
  EXPECT_FALSE(Matches(single, one + "then <tool_call>"));
  EXPECT_TRUE(Matches(single, one + "then <tool_cal"));
}

TEST(GrammarComposeTest, AfterAnOpenReasoningSection) {
  auto g = MustCompile(AfterReasoning(Schema(R"({"type":"integer"})"), "<think>", "</think>",
                                      /*already_open=*/true));
  for (const char* ok : {"</think>7", "hmm</think>\n\n42", "a </thi <//think> < /think></think>1",
                         "<think></think>5", "</</think>8", "\xe2\x9c\x93 ok</think>-3"}) {
    EXPECT_TRUE(Matches(g, ok)) << ok;
  }
  for (const char* bad :
       {"7", "hmm", "</think>x", "</think>1</think>", "hmm</think>", "</thinK>1"}) {
    EXPECT_FALSE(Matches(g, bad)) << bad;
  }
}

TEST(GrammarComposeTest, OptionalReasoningSection) {
  auto g = MustCompile(AfterReasoning(Schema(R"({"enum":["yes","no"]})"), "<think>", "</think>",
                                      /*already_open=*/false));
  for (const char* ok :
       {"\"yes\"", "\n\"no\"", "<think>x</think>\"no\"", "\n<think>\nwhy\n</think>\n\n\"yes\""}) {
    EXPECT_TRUE(Matches(g, ok)) << ok;
  }
  for (const char* bad : {"yes", "x<think></think>\"yes\"", "<think>\"yes\"", "</think>\"yes\""}) {
    EXPECT_FALSE(Matches(g, bad)) << bad;
  }
}

}  // namespace
}  // namespace loom
