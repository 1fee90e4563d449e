#include "grammar/grammar.h"

#include <gtest/gtest.h>

#include "grammar/gbnf.h"
#include "grammar/grammar_test_util.h"
#include "grammar/matcher.h"

namespace loom {
namespace {

using grammar_test::ExpectError;
using grammar_test::GrammarCase;
using grammar_test::Matches;
using grammar_test::MustCompile;
using grammar_test::RunCases;

TEST(ByteSetTest, RangesAndToString) {
  ByteSet s = ByteSet::Range('a', 'c');
  s.Add('x');
  EXPECT_TRUE(s.Contains('b'));
  EXPECT_FALSE(s.Contains('d'));
  EXPECT_EQ(s.ToString(), "[a-cx]");
  EXPECT_EQ(ByteSet::Single(0xFF).ToString(), "[\\xFF]");
  EXPECT_TRUE(ByteSet().empty());
}

TEST(Utf8SequencesTest, SplitsByEncodedLength) {
  // [a-z] is one byte range; U+00E9 is C3 A9; U+0080-U+07FF is [C2-DF][80-BF].
  auto seqs = Utf8Sequences({{'a', 'z'}});
  ASSERT_EQ(seqs.size(), 1u);
  EXPECT_EQ(seqs[0][0].ToString(), "[a-z]");
  seqs = Utf8Sequences({{0xE9, 0xE9}});
  ASSERT_EQ(seqs.size(), 1u);
  ASSERT_EQ(seqs[0].size(), 2u);
  EXPECT_EQ(seqs[0][0].ToString(), "[\\xC3]");
  EXPECT_EQ(seqs[0][1].ToString(), "[\\xA9]");
  seqs = Utf8Sequences({{0x80, 0x7FF}});
  ASSERT_EQ(seqs.size(), 1u);
  EXPECT_EQ(seqs[0][0].ToString(), "[\\xC2-\\xDF]");
  EXPECT_EQ(seqs[0][1].ToString(), "[\\x80-\\xBF]");
  // The whole code space: 1 + 1 + 3 (E0, E1-EC+EE-EF, ED without surrogates) + 3 four-byte.
  seqs = Utf8Sequences({{0, 0x10FFFF}});
  EXPECT_EQ(seqs.size(), 9u);
}

TEST(NormalizeRangesTest, MergesNegatesAndDropsSurrogates) {
  auto r = NormalizeRanges({{'c', 'd'}, {'a', 'b'}, {'x', 'x'}}, false);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], (CodePointRange{'a', 'd'}));
  r = NormalizeRanges({{0, 0x10FFFF}}, true);
  EXPECT_TRUE(r.empty());
  r = NormalizeRanges({{0xD000, 0xE000}}, false);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].second, 0xD7FFu);
  EXPECT_EQ(r[1].first, 0xE000u);
}

StatusOr<Grammar> Gbnf(const std::string& s) { return CompileGbnf(s); }

TEST(GbnfTest, AcceptsAndRejects) {
  const std::vector<GrammarCase> cases = {
      {R"(root ::= "abc")", {"abc"}, {"", "ab", "abcd", "abd", "ABC"}},
      {R"(root ::= "a" | "bc" | "")", {"a", "bc", ""}, {"b", "abc", "c"}},
      {R"(root ::= [a-z]+)", {"a", "xyz", "hello"}, {"", "A", "a1", "hello world"}},
      {R"(root ::= [^a-z]*)", {"", "ABC", "123", "é", "\xF0\x9F\x98\x80"}, {"a", "Az", "\xFF"}},
      {R"(root ::= [a-cx-z0-9_])", {"a", "b", "y", "5", "_"}, {"d", "w", "-", ""}},
      {R"(root ::= .)",
       {"a", "\n", "é", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"},
       {"", "ab", "\xC3", "\x80", "\xED\xA0\x80"}},
      {R"(root ::= "a"? "b")", {"b", "ab"}, {"", "a", "aab"}},
      {R"(root ::= "a"* "b")", {"b", "ab", "aaaab"}, {"", "ba", "aaa"}},
      {R"(root ::= ("ab")+)", {"ab", "abab", "ababab"}, {"", "a", "aba", "ba"}},
      {R"(root ::= "x"{3})", {"xxx"}, {"xx", "xxxx", ""}},
      {R"(root ::= "x"{2,})", {"xx", "xxx", "xxxxxxxxxx"}, {"", "x"}},
      {R"(root ::= "x"{1,3})", {"x", "xx", "xxx"}, {"", "xxxx"}},
      {R"(root ::= "x"{0,2} "y")", {"y", "xy", "xxy"}, {"xxxy", "x"}},
      {R"(root ::= ("a" | "b"){2} "c")", {"aac", "abc", "bbc"}, {"ac", "abac", "c"}},
      {"root ::= \"\\n\\t\\\\\\\"\"", {"\n\t\\\""}, {"\\n"}},
      {R"(root ::= "\x41\u00e9\U0001F600")", {"A\xC3\xA9\xF0\x9F\x98\x80"}, {"A", "Aé"}},
      {R"(root ::= [\x00-\x1f])", {std::string(1, '\0'), "\x1f", "\n"}, {" ", "a"}},
      {R"(root ::= [\]\[\-])", {"]", "[", "-"}, {"\\", "a"}},
      {R"(root ::= [é-ë])", {"é", "ê", "ë"}, {"e", "è", "ì"}},
      // Rules referencing each other, defined after use, names with dashes and digits.
      {R"(root ::= greeting-1 " " name
greeting-1 ::= "hi" | "hello"
name ::= [A-Z] [a-z]*)",
       {"hi Bob", "hello X", "hi Alice"},
       {"hi bob", "hey Bob", "hi  Bob", "hello"}},
      // Right recursion, nesting and comments.
      {R"g(# balanced parentheses
root ::= pair*   # zero or more
pair ::= "(" root ")")g",
       {"", "()", "(())", "()()", "(()())((()))"},
       {"(", ")", "(()", "())", ")("}},
      // Alternatives continued on the next line.
      {R"(root ::= "a"
  | "b"
  | "c" "d")",
       {"a", "b", "cd"},
       {"c", "d", "ab"}},
      // A JSON-ish grammar.
      {R"(root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \t\n]*)",
       {"{}", "[]", "{\"a\": [1, 2.5, -3]}", "\"x\\\"y\"", "true", "[{}, [null]]",
        "{ \"k\" : \"v\" , \"n\" : false }"},
       {"{", "[1,]", "{\"a\"}", "tru", "01a", "\"unterminated", "{\"a\":1,}", "[1 2]"}},
      // Nullable repetition bodies (tail cycles through nullable rules are fine).
      {R"(root ::= ("a"?)* "b")", {"b", "ab", "aaab"}, {"", "ba"}},
      {R"(root ::= (opt opt)* "z"
opt ::= "x"?)",
       {"z", "xz", "xxxz"},
       {"", "y"}},
  };
  EXPECT_EQ(RunCases(cases, Gbnf), 158);  // accept + reject strings checked
}

TEST(GbnfTest, Errors) {
  ExpectError(CompileGbnf("").status(), "empty grammar");
  ExpectError(CompileGbnf("foo ::= \"a\"").status(), "no rule named \"root\"");
  ExpectError(CompileGbnf("root ::= missing").status(), "\"missing\" is used but not defined");
  ExpectError(CompileGbnf("root ::= \"abc").status(), "unterminated string literal");
  ExpectError(CompileGbnf("root ::= [abc").status(), "unterminated character class");
  ExpectError(CompileGbnf("root ::= (\"a\"").status(), "expected `)`");
  ExpectError(CompileGbnf("root ::= \"a\" )").status(), "line 1, column 14");
  ExpectError(CompileGbnf("root ::= * \"a\"").status(), "nothing to repeat");
  ExpectError(CompileGbnf("root ::= \"a\"{3,1}").status(), "n < m");
  ExpectError(CompileGbnf("root ::= \"a\"{99999}").status(), "larger than 10000");
  ExpectError(CompileGbnf("root ::= \"\\q\"").status(), "unknown escape `\\q`");
  ExpectError(CompileGbnf("root ::= [z-a]").status(), "out of order");
  ExpectError(CompileGbnf("root ::= \"a\"\nroot ::= \"b\"").status(), "defined twice");
  ExpectError(CompileGbnf("root ::= \"a\" @").status(), "unexpected character `@`");
  ExpectError(CompileGbnf("root ::= \"a\"\n  @").status(), "line 2, column 3");
  // Left recursion, direct and through a nullable prefix or another rule.
  ExpectError(CompileGbnf("root ::= root \"a\" | \"b\"").status(),
              "rule \"root\" is left-recursive");
  ExpectError(
      CompileGbnf("root ::= expr\nexpr ::= term | expr \"+\" term\nterm ::= [0-9]").status(),
      "rule \"expr\" is left-recursive");
  ExpectError(CompileGbnf("root ::= a\na ::= b \"x\"\nb ::= \"y\"? a").status(), "left-recursive");
}

TEST(ChoiceTest, ExactlyOneOf) {
  const auto g = MustCompile(CompileChoice({"red", "green", "blue", "gr"}));
  ASSERT_NE(g, nullptr);
  for (const char* s : {"red", "green", "blue", "gr"}) EXPECT_TRUE(Matches(g, s)) << s;
  for (const char* s : {"", "re", "gree", "redgreen", "Red", "blue "}) {
    EXPECT_FALSE(Matches(g, s)) << s;
  }
  ExpectError(CompileChoice({}).status(), "empty");
}

TEST(MatcherTest, CheckpointRollbackAndState) {
  const auto g = MustCompile(CompileGbnf(R"(root ::= "ab" "c"? )"));
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.IsAccepting());
  EXPECT_FALSE(m.IsDead());
  EXPECT_EQ(m.NextBytes().ToString(), "[a]");
  const size_t start = m.Checkpoint();
  ASSERT_TRUE(m.AcceptByte('a'));
  EXPECT_FALSE(m.AcceptByte('x'));  // rejected: state unchanged
  ASSERT_TRUE(m.AcceptByte('b'));
  EXPECT_TRUE(m.IsAccepting());
  EXPECT_TRUE(m.CanAcceptMoreBytes());
  const size_t after_ab = m.Checkpoint();
  ASSERT_TRUE(m.AcceptByte('c'));
  EXPECT_TRUE(m.IsAccepting());
  EXPECT_FALSE(m.CanAcceptMoreBytes());
  EXPECT_FALSE(m.AcceptByte('c'));
  m.Rollback(after_ab);
  EXPECT_TRUE(m.CanAcceptMoreBytes());
  m.Rollback(start);
  EXPECT_FALSE(m.IsAccepting());
  EXPECT_FALSE(m.AcceptBytes("ax"));
  EXPECT_EQ(m.Checkpoint(), start);
  EXPECT_TRUE(m.AcceptBytes("abc"));
  m.Reset();
  EXPECT_EQ(m.Checkpoint(), 1u);
  EXPECT_TRUE(m.AcceptBytes("ab"));
}

TEST(MatcherTest, ForkKeepsStateWithoutHistory) {
  const auto g = MustCompile(CompileGbnf(R"(root ::= "[" item ("," item)* "]"
item ::= "[" [0-9]+ "]" | [a-z]+)"));
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.AcceptBytes("[[1"));
  GrammarMatcher f = m.Fork();
  EXPECT_EQ(f.Checkpoint(), 1u);
  EXPECT_EQ(f.num_stacks(), m.num_stacks());
  EXPECT_TRUE(f.AcceptBytes("2],abc]"));
  EXPECT_TRUE(f.IsAccepting());
  EXPECT_TRUE(m.AcceptBytes("],x]"));  // the original is untouched
  EXPECT_TRUE(m.IsAccepting());
}

TEST(MatcherTest, LongRightRecursionRunsInConstantStacks) {
  const auto g = MustCompile(CompileGbnf(R"(root ::= "\"" [a-z]* "\"")"));
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.AcceptByte('"'));
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(m.AcceptByte('q'));
  EXPECT_LE(m.num_stacks(), 2u);
  EXPECT_TRUE(m.AcceptByte('"'));
  EXPECT_TRUE(m.IsAccepting());
}

TEST(MatcherTest, EmptyLanguageIsDead) {
  const auto g = MustCompile(CompileGbnf("root ::= [^\\x00-\\U0010FFFF]"));
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  EXPECT_TRUE(m.IsDead());
  EXPECT_FALSE(m.AcceptByte('a'));
}

// Nullability flows from rules to the rules that refer to them, whatever their order (front ends
// number rules outside in, so a rule is often defined after the rules that use it).
TEST(NullableRulesTest, FollowsReferencesInAnyOrder) {
  struct Case {
    const char* gbnf;
    std::vector<std::pair<const char*, bool>> rules;  // name, matches ""
  };
  const std::vector<Case> cases = {
      {"root ::= a b\na ::= \"x\"?\nb ::= c c\nc ::= a | \"y\"",
       {{"root", true}, {"a", true}, {"b", true}, {"c", true}}},
      {"root ::= a \"z\"\na ::= b\nb ::= c\nc ::= d\nd ::= \"\" | \"q\"",
       {{"root", false}, {"a", true}, {"b", true}, {"c", true}, {"d", true}}},
      {"root ::= a\na ::= \"x\" a | \"x\"", {{"root", false}, {"a", false}}},
      {"root ::= a b\na ::= \"\"\nb ::= [^\\x00-\\U0010FFFF]", {{"root", false}, {"a", true}}},
      {"root ::= a | b\na ::= b c\nb ::= c c c\nc ::= \"w\"*", {{"root", true}, {"a", true}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.gbnf);
    const StatusOr<Grammar> g = CompileGbnf(c.gbnf);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const std::vector<uint8_t> nullable = g->NullableRules();
    ASSERT_EQ(nullable.size(), g->rules().size());
    for (const auto& [name, expect] : c.rules) {
      const int32_t r = g->FindRule(name);
      ASSERT_GE(r, 0) << name;
      EXPECT_EQ(nullable[r] != 0, expect) << name;
    }
  }
}

std::vector<int32_t> SignatureAfter(const std::shared_ptr<const CompiledGrammar>& g,
                                    std::string_view input, size_t* num_stacks = nullptr) {
  GrammarMatcher m(g);
  EXPECT_TRUE(m.AcceptBytes(input)) << input;
  std::vector<int32_t> sig;
  m.AppendStateSignature(&sig);
  if (num_stacks != nullptr) *num_stacks = m.num_stacks();
  return sig;
}

// Stacks that behave alike (positions of one closure class, frames alike) are one: after any
// character of a free string the state is one and the same, and `[^"]* "a"+ [^"]*` keeps a few
// stacks however many `a` it has read, where each `a` used to add two.
TEST(MatcherTest, StacksThatBehaveAlikeAreOne) {
  struct Case {
    const char* gbnf;
    std::vector<std::string> same_state;  // inputs that must end in one signature
    size_t max_stacks;                    // after each of them
  };
  const std::vector<Case> cases = {
      // A character class of ASCII, 2-, 3- and 4-byte alternatives, escapes.
      {R"(root ::= "\"" ([^"\\] | "\\" ["\\/bfnrt] | "\\u" [0-9a-f]{4})* "\"")",
       {"\"a", "\"\xC3\xA9", "\"\xE4\xB8\xAD", "\"\xF0\x9F\x98\x80", "\"\\n", "\"\\u00e9",
        "\"ab\xC3\xA9\\t"},
       1},
      {R"(root ::= "\"" [^"]* "a"+ [^"]* "\"")",
       {"\"aaaa", "\"aaaaaaaaaaaaaaaa", "\"xaxaaaa", "\"aaxaaaa"},
       4},
      {R"(root ::= "\"" [^"]* "a"+ [^"]* "\"")", {"\"ax", "\"aaaaaxx", "\"axaxaxax"}, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.gbnf);
    const auto g = MustCompile(CompileGbnf(c.gbnf));
    ASSERT_NE(g, nullptr);
    const std::vector<int32_t> first = SignatureAfter(g, c.same_state[0]);
    for (const std::string& input : c.same_state) {
      SCOPED_TRACE(input);
      size_t stacks = 0;
      EXPECT_EQ(SignatureAfter(g, input, &stacks), first);
      EXPECT_LE(stacks, c.max_stacks);
    }
  }
  // However long the string.
  const auto g = MustCompile(CompileGbnf(R"(root ::= "\"" [^"]* "a"+ [^"]* "\"")"));
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.AcceptByte('"'));
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE(m.AcceptByte(i % 7 == 3 ? 'x' : 'a'));
    ASSERT_LE(m.num_stacks(), 4u) << i;
  }
  EXPECT_TRUE(m.AcceptByte('"'));
  EXPECT_TRUE(m.IsAccepting());
}

}  // namespace
}  // namespace loom
