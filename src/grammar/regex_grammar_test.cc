#include "grammar/regex_grammar.h"

#include <gtest/gtest.h>

// GCC 12 with -fsanitize reports -Wmaybe-uninitialized inside libstdc++'s <regex> automaton
// (a false positive in std::function's move); the differential test below needs std::regex.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <regex>

#include "grammar/grammar_test_util.h"

namespace loom {
namespace {

using grammar_test::ExpectError;
using grammar_test::GrammarCase;
using grammar_test::Matches;
using grammar_test::MustCompile;
using grammar_test::RunCases;

StatusOr<Grammar> Regex(const std::string& s) { return CompileRegex(s); }

TEST(RegexTest, AcceptsAndRejects) {
  const std::vector<GrammarCase> cases = {
      {"^abc$", {"abc"}, {"", "ab", "abcd", "xabc"}},
      {"^a|b$", {"a", "b", "ax", "xb"}, {"", "x", "xa"}},  // anchors bind per alternative
      {"abc", {"abc", "xabc", "abcx", "xxabcxx"}, {"", "ab", "axbc"}},  // unanchored: search
      {"^abc", {"abc", "abcd", "abc\n"}, {"xabc", "ab"}},
      {"abc$", {"abc", "xabc"}, {"abcd"}},
      {"^\\d+$", {"0", "123", "9876543210"}, {"", "12a", "a", "١"}},
      {"^\\D$", {"a", " ", "é"}, {"1", ""}},
      {"^\\w*$", {"", "abc_XYZ_09"}, {"a-b", "é", "a b"}},
      {"^\\W$", {"-", " ", "é"}, {"a", "_", "0"}},
      {"^a\\sb$",
       {"a b", "a\tb", "a\nb",
        "a\xC2\xA0"
        "b",
        "a\xE3\x80\x80"
        "b"},
       {"ab", "a_b"}},
      {"^\\S+$", {"abc", "é"}, {"a b", "\t"}},
      {"^a\\.b\\\\c\\/d$", {"a.b\\c/d"}, {"aXb\\c/d", "a.bc/d"}},
      {"^\\u00e9\\x41$",
       {"\xC3\xA9"
        "A"},
       {"eA", "\xC3\xA9"}},
      {"^[abc]$", {"a", "b", "c"}, {"d", "ab", ""}},
      {"^[^abc]$", {"d", "é", "\n"}, {"a", "c", ""}},
      {"^[a-f0-9]{2}$", {"0f", "a9", "ff"}, {"g0", "0", "abc"}},
      {"^[\\d.-]+$", {"1.5", "-3", "..-"}, {"a", "1,5"}},
      {"^[\\w\\s]+$", {"a b_1", "x"}, {"a-b"}},
      {"^[^\\d]+$", {"abc"}, {"a1"}},
      {"^[\\]\\[]$", {"]", "["}, {"\\"}},
      {"^[a-]$", {"a", "-"}, {"b"}},
      {"^.$", {"a", "é", "\xF0\x9F\x98\x80"}, {"\n", "\r", "", "ab"}},
      {"^(ab)+$", {"ab", "abab"}, {"", "aba"}},
      {"^(?:ab|cd)*$", {"", "ab", "cdab", "abcdcd"}, {"a", "abc"}},
      {"^(?<year>\\d{4})-(\\d{2})$", {"2024-05"}, {"24-05", "2024-5"}},
      {"^a{3}$", {"aaa"}, {"aa", "aaaa"}},
      {"^a{2,}$", {"aa", "aaaaa"}, {"a"}},
      {"^a{1,3}b$", {"ab", "aab", "aaab"}, {"b", "aaaab"}},
      {"^a{0}b$", {"b"}, {"ab"}},
      {"^a+?b*?c??$", {"a", "ab", "aabbc"}, {"", "bc", "acc"}},  // lazy: same language
      {"^(a|b|)c$", {"ac", "bc", "c"}, {"abc"}},
      {"^(a*)*b$", {"b", "aab"}, {"", "ba"}},  // nullable body under a star
      {"^x{$", {"x{"}, {"x"}},                 // a `{` that is no quantifier is literal
      {"^[+-]?(0|[1-9]\\d*)(\\.\\d+)?$",
       {"0", "-1.5", "+42", "3.14159"},
       {"01", "1.", ".5", "--1"}},
      {"^[A-Z]{2}-\\d{3}$", {"AB-123"}, {"ab-123", "AB-12", "ABC-123"}},
      {"^(\\+\\d{1,3} )?\\(\\d{3}\\) \\d{3}-\\d{4}$",
       {"(555) 123-4567", "+1 (555) 123-4567"},
       {"555-123-4567", "+1234 (555) 123-4567"}},
      {"^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$",
       {"a@b.co", "first.last@host.org"},
       {"a@b", "a b@c.de", "@b.co"}},
      {"^é+$", {"é", "ééé"}, {"e", ""}},
      {"^[é-ë]$", {"é", "ë"}, {"è", "e"}},
      {"^\\t\\n\\r\\f\\v\\0$", {std::string("\t\n\r\f\v\0", 6)}, {"\t\n\r\f\v"}},
      // A \u surrogate pair is the code point it encodes (ECMAScript's unicode mode), also as a
      // range end; the quantifier applies to the whole of it.
      {"^\\uD83D\\uDE00+$",
       {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80\xF0\x9F\x98\x80"},
       {"", "\xED\xA0\xBD\xED\xB8\x80"}},
      {"^[\\uD83D\\uDE00-\\uD83D\\uDE4F]$",
       {"\xF0\x9F\x98\x80", "\xF0\x9F\x99\x8F"},
       {"\xF0\x9F\x99\x90", "a"}},
  };
  EXPECT_EQ(RunCases(cases, Regex), 189);  // accept + reject strings checked
}

// Differential: every string up to length 4 over a small alphabet, against std::regex_search
// (ECMAScript), whose search semantics our unanchored padding reproduces.
TEST(RegexTest, AgreesWithStdRegexOnAllShortStrings) {
  const std::vector<std::string> patterns = {"a",           "^a",        "a$",
                                             "^a$",         "^(a|b)*$",  "^a+b?$",
                                             "^[ab]{2,3}$", "^[^a]*$",   "\\d",
                                             "^\\w+$",      "^\\s?\\S$", "^(ab|a)(b|)$",
                                             "^a{2}$|^b",   "^.*a.*$",   "^(?:a|1)+-?$",
                                             "^[a-]+$",     "^\\.$",     "^a*?b$",
                                             "b.a",         "^(a|)+$",   "^[\\d.]{1,2}$",
                                             "a{2,}",       "^\\W*$",    "^(a(b|1)?)+$",
                                             "^[^\\s.]?$"};
  const std::string alphabet = "ab1 .-\n";
  std::vector<std::string> inputs = {""};
  for (size_t begin = 0, len = 0; len < 4; ++len) {
    const size_t end = inputs.size();
    for (size_t i = begin; i < end; ++i) {
      for (char c : alphabet) inputs.push_back(inputs[i] + c);
    }
    begin = end;
  }
  for (const std::string& p : patterns) {
    SCOPED_TRACE(p);
    const auto g = MustCompile(CompileRegex(p));
    ASSERT_NE(g, nullptr);
    const std::regex re(p, std::regex::ECMAScript);
    int mismatches = 0;
    for (const std::string& s : inputs) {
      GrammarMatcher m(g);
      const bool ours = m.AcceptBytes(s) && m.IsAccepting();
      const bool theirs = std::regex_search(s, re);
      if (ours != theirs && ++mismatches <= 3) {
        ADD_FAILURE() << "\"" << s << "\": ours " << ours << ", std::regex " << theirs;
      }
    }
  }
}

// Under a whole match every top-level alternative's own anchors are dropped (not only the
// pattern's first `^` and last `$`), so "^a$|^b$" compiles; escaped, class and group anchors stay.
TEST(RegexTest, AnchorWholeMatchDropsEachAlternativesAnchors) {
  EXPECT_EQ(AnchorWholeMatch("^a$|^b$"), "^(?:a|b)$");
  EXPECT_EQ(AnchorWholeMatch("a{2}$|^b"), "^(?:a{2}|b)$");
  EXPECT_EQ(AnchorWholeMatch("a\\$|[$|^](^b$)"), "^(?:a\\$|[$|^](^b$))$");
  EXPECT_EQ(AnchorWholeMatch("(a|^b)$"), "^(?:(a|^b))$");
  const auto g = MustCompile(CompileRegex(AnchorWholeMatch("^a{2}$|^b")));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "aa"));
  EXPECT_TRUE(Matches(g, "b"));
  EXPECT_FALSE(Matches(g, "bx"));
  EXPECT_FALSE(Matches(g, "aab"));
}

TEST(RegexTest, JsonStringTargetEscapes) {
  Grammar g;
  const int32_t root = g.AddRule("root");
  auto seq = LowerRegex("^a\"b\\\\c[\\n]$", RegexTarget::kJsonString, &g);
  ASSERT_TRUE(seq.ok()) << seq.status().ToString();
  g.AddAlternative(root, *seq);
  g.set_root(root);
  const auto c = MustCompile(g);
  EXPECT_TRUE(Matches(c, "a\\\"b\\\\c\\n"));
  EXPECT_FALSE(Matches(c, "a\"b\\c\n"));           // raw specials are not JSON string content
  EXPECT_FALSE(Matches(c, "a\\\"b\\\\c\\u000a"));  // only the canonical escape
  EXPECT_EQ(JsonEscape(0x1F), "\\u001f");
  EXPECT_EQ(JsonEscape('"'), "\\\"");
}

TEST(RegexTest, Errors) {
  ExpectError(CompileRegex("(a)\\1").status(), "backreferences");
  ExpectError(CompileRegex("(?<n>a)\\k<n>").status(), "backreferences (\\k<name>)");
  ExpectError(CompileRegex("a(?=b)").status(), "lookaround");
  ExpectError(CompileRegex("a(?!b)").status(), "lookaround");
  ExpectError(CompileRegex("(?<=a)b").status(), "lookaround");
  ExpectError(CompileRegex("(?<!a)b").status(), "lookaround");
  ExpectError(CompileRegex("\\bword\\b").status(), "word boundary \\b");
  ExpectError(CompileRegex("a^b").status(), "anchor `^` is only supported at the start");
  ExpectError(CompileRegex("a$b").status(), "anchor `$` is only supported at the end");
  ExpectError(CompileRegex("(^a)").status(), "anchor `^`");
  ExpectError(CompileRegex("(a").status(), "missing `)`");
  ExpectError(CompileRegex("a)").status(), "unmatched `)`");
  ExpectError(CompileRegex("[abc").status(), "unterminated character class");
  ExpectError(CompileRegex("*a").status(), "nothing to repeat");
  ExpectError(CompileRegex("a{3,1}").status(), "n < m");
  ExpectError(CompileRegex("a{20000}").status(), "past 10000");
  ExpectError(CompileRegex("a**").status(), "possessive");
  ExpectError(CompileRegex("[z-a]").status(), "out of order");
  ExpectError(CompileRegex("\\p{L}").status(), "\\p{...}");
  ExpectError(CompileRegex("\\q").status(), "unknown escape \\q");
  ExpectError(CompileRegex("\\x4").status(), "hex digits");
  ExpectError(CompileRegex("a\\").status(), "trailing backslash");
  ExpectError(CompileRegex("(?i)a").status(), "unknown group syntax");
  ExpectError(CompileRegex("(a)\\1").status(), "at offset 3");
  ExpectError(CompileRegex("\\01").status(), "octal escapes");
}

}  // namespace
}  // namespace loom
