// GrammarState's jump-forward: the tokens of the text a grammar forces, spelled longest token
// first, the last one left to the model.
#include "grammar/grammar_state.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"

namespace loom {
namespace {

using grammar_test::MustCompile;

// A small byte-level vocabulary: id 0 is EOS, then every printable ASCII byte alone, then a few
// longer pieces a BPE vocabulary would have.
struct Vocab {
  std::vector<std::string> bytes;
  std::unique_ptr<TokenVocabulary> vocab;
  explicit Vocab(const std::vector<std::string>& pieces) {
    bytes.push_back("");  // EOS
    for (int c = 32; c < 127; ++c) bytes.push_back(std::string(1, static_cast<char>(c)));
    for (const std::string& p : pieces) bytes.push_back(p);
    vocab =
        std::make_unique<TokenVocabulary>(bytes, std::vector<TokenId>{}, std::vector<TokenId>{0});
  }
  TokenId Id(const std::string& piece) const {
    for (size_t i = bytes.size(); i-- > 1;) {
      if (bytes[i] == piece) return static_cast<TokenId>(i);
    }
    ADD_FAILURE() << "no token " << piece;
    return -1;
  }
  std::string Text(const std::vector<TokenId>& ids) const {
    std::string s;
    for (TokenId id : ids) s += bytes[id];
    return s;
  }
};

TEST(TokenVocabularyTest, LongestTokenPrefixPrefersLongerAndTheLastOfEqualSpellings) {
  const Vocab v({"na", "name", "\":", "a"});  // "a" again: the later id wins
  EXPECT_EQ(v.vocab->LongestTokenPrefix("names"), std::make_pair(v.Id("name"), size_t{4}));
  EXPECT_EQ(v.vocab->LongestTokenPrefix("nab"), std::make_pair(v.Id("na"), size_t{2}));
  EXPECT_EQ(v.vocab->LongestTokenPrefix("a").first, static_cast<TokenId>(v.bytes.size() - 1));
  EXPECT_EQ(v.vocab->LongestTokenPrefix("\x01").first, -1);  // no token spells it
  EXPECT_EQ(v.vocab->LongestTokenPrefix("").first, -1);
}

TEST(GrammarStateTest, JumpForwardTakesTheForcedKeysOfAnObject) {
  const Vocab v({"{\"", "name", "\":\"", "\":", "age", ",\"", "\"}"});
  const auto g = MustCompile(CompileJsonSchemaText(
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
          "required":["name","age"],"additionalProperties":false})"));
  ASSERT_NE(g, nullptr);
  GrammarState s(g, v.vocab.get());
  // At the start `{"name":"` is forced: `{"`, `name` are taken, `":"` is left to the model.
  std::vector<TokenId> jumped = s.JumpForward(100);
  EXPECT_EQ(v.Text(jumped), "{\"name");
  EXPECT_EQ(jumped, (std::vector<TokenId>{v.Id("{\""), v.Id("name")}));
  EXPECT_EQ(s.num_accepted_tokens(), 2u);
  // Inside the string value nothing is forced.
  ASSERT_TRUE(s.AcceptToken(v.Id("\":\"")));
  EXPECT_TRUE(s.JumpForward(100).empty());
  ASSERT_TRUE(s.AcceptToken(v.Id("B")));
  ASSERT_TRUE(s.AcceptToken(v.Id("\"")));
  // After the value: `,"age":` is forced; `,"` `age` taken, `":` left.
  jumped = s.JumpForward(100);
  EXPECT_EQ(v.Text(jumped), ",\"age");
  // A cap takes only the first tokens.
  GrammarState capped(g, v.vocab.get());
  EXPECT_EQ(v.Text(capped.JumpForward(1)), "{\"");
  EXPECT_TRUE(capped.JumpForward(0).empty());
  // The state after the jumps is the one the bytes give: the document completes normally.
  for (const char* t : {"\":", "4", "2", "}"}) ASSERT_TRUE(s.AcceptToken(v.Id(t))) << t;
  EXPECT_TRUE(s.AcceptToken(0));
  EXPECT_TRUE(s.IsTerminated());
}

TEST(GrammarStateTest, JumpForwardStopsWhereTheDocumentMayEnd) {
  const Vocab v({"ab", "abc"});
  // After "ab" the document may end or go on with "c": EOS is a choice, so nothing is forced.
  const auto g = MustCompile(CompileGbnf(R"(root ::= "ab" "c"?)"));
  ASSERT_NE(g, nullptr);
  GrammarState s(g, v.vocab.get());
  // Forced "ab" is one token: nothing to take (the last token is the model's).
  EXPECT_TRUE(s.JumpForward(10).empty());
  ASSERT_TRUE(s.AcceptToken(v.Id("ab")));
  EXPECT_TRUE(s.JumpForward(10).empty());
  // A terminated state forces nothing.
  ASSERT_TRUE(s.AcceptToken(0));
  EXPECT_TRUE(s.JumpForward(10).empty());
}

TEST(GrammarStateTest, JumpForwardIsUndoneByRollback) {
  const Vocab v({});
  const auto g = MustCompile(CompileGbnf(R"(root ::= "hello" [0-9])"));
  ASSERT_NE(g, nullptr);
  GrammarState s(g, v.vocab.get());
  const std::vector<TokenId> jumped = s.JumpForward(10);
  EXPECT_EQ(v.Text(jumped), "hell");  // single bytes: "o" left to the model
  s.RollbackTokens(jumped.size());
  EXPECT_EQ(s.num_accepted_tokens(), 0u);
  EXPECT_EQ(v.Text(s.JumpForward(10)), "hell");
}

}  // namespace
}  // namespace loom
