// Framed and AfterReasoning: the wrapped grammar applies exactly between the frame, and only after
// the reasoning section (whose free text may hold anything but the close marker, including
// prefixes of it and marker-like text that restarts it).
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
