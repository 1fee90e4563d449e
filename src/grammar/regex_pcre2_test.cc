// Differential test of the regex front end (regex_grammar.h) against PCRE2, in both of loom's
// semantics: CompileRegex(p) (JSON Schema `pattern`: a search) against an unanchored pcre2_match,
// and CompileRegex(AnchorWholeMatch(p)) (guided_regex, `loom grammar --regex`: the whole string)
// against PCRE2_ANCHORED | PCRE2_ENDANCHORED. Per regex, thousands of strings (deterministic seed):
// random strings over an alphabet taken from the pattern (its code points, their neighbours and
// a few extra bytes, invalid UTF-8 included), random walks through loom's own grammar
// (GrammarMatcher, a random allowed byte at a time) and single-byte mutations of those walks.
//
// PCRE2 is told ECMAScript's meaning where its own differs (ToPcre2 below): `.` excludes
// \n \r U+2028 U+2029, \s is ECMAScript's White_Space + line terminators (PCRE2's non-UCP \s is
// ASCII), \v is U+000B, \0 is NUL, `[` inside a class is a literal (PCRE2 reads `[:`/`[.`/`[=`
// as POSIX classes), `[]` / `[^]` are the empty / full class (PCRE2_ALLOW_EMPTY_CLASS), \uXXXX
// (PCRE2_ALT_BSUX), `$` only at the very end (PCRE2_DOLLAR_ENDONLY). Invalid UTF-8 subjects are
// an error for PCRE2 and must be a reject for loom (its classes are code points).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.h"
#include "grammar/grammar_test_util.h"
#include "grammar/matcher.h"
#include "grammar/regex_grammar.h"

namespace loom {
namespace {

using grammar_test::MustCompile;

struct RegexEntry {
  std::string pattern;     // as loom gets it (ECMAScript syntax)
  std::string pcre2 = "";  // the same language in PCRE2 syntax, when ToPcre2 cannot say it
};

// Every construct regex_grammar.h supports, then the patterns real schemas carry.
const std::vector<RegexEntry>& Table() {
  static const std::vector<RegexEntry> table = {
      // Literals, anchors (per top-level alternative), search vs whole match.
      {"abc"},
      {"^abc$"},
      {"^abc"},
      {"abc$"},
      {"^a|b$"},
      {"foo|bar"},
      {"^(foo|bar)"},
      {"(foo|bar)$"},
      {"^a{2}$|^b"},
      {"^(a|bc|)d$"},
      {"^$"},
      {""},
      {"^"},
      {"$"},
      // Classes.
      {"^[abc]+$"},
      {"^[^abc]*$"},
      {"^[a-f0-9]{2,4}$"},
      {"^[\\d.-]+$"},
      {"^[\\w\\s]+$"},
      {"^[^\\d\\s]+$"},
      {"^[\\]\\[\\\\]+$"},
      {"^[a-]$"},
      {"^[-a]+$"},
      {"^[a-c-e]+$"},
      {"^a[]?b$", "^a(?:[])?b$"},  // PCRE2 10.42 fails the whole match on a quantified []
      {"^[^]+$"},
      {"^[é-ë ñ]+$"},
      {"^[\\u0400-\\u04FF]+$"},
      {"^[^\\u0000-\\u007F]+$"},
      {"^[\\S]+$"},
      {"^[^\\S\\n]*$"},
      {"^[\\W\\d]+$"},
      {"^[\\D]$"},
      {"^[\\x41-\\x5a]+$"},
      {"^[\\b]$"},
      {"^[.*+?(){}|^$]+$"},
      {"^[[a]+$"},
      // Escapes.
      {"^\\d+$"},
      {"^\\D+$"},
      {"^\\w+$"},
      {"^\\W+$"},
      {"^\\s+$"},
      {"^\\S+$"},
      {"\\d"},
      {"\\S"},
      {"^\\s*$"},
      {"^a\\sb$"},
      {"^\\t\\n\\r\\f\\v\\0$"},
      {"^\\u00e9\\x41\\u20AC$"},
      {"^\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\^\\$\\\\\\/\\-$"},
      {"^\\uD83D\\uDE00+$", "^😀+$"},  // a surrogate pair is one code point
      {"^[\\uD83D\\uDE00-\\uD83D\\uDE4F]{1,2}$", "^[😀-🙏]{1,2}$"},
      // Quantifiers, greedy and lazy; braces that are no quantifier are literal.
      {"^a*$"},
      {"^a+$"},
      {"^a?b$"},
      {"^a{3}$"},
      {"^a{2,}$"},
      {"^a{1,3}b$"},
      {"^a{0}b$"},
      {"^(ab){2,3}$"},
      {"^a{0,2}b{1,}$"},
      {"^a+?b*?c??$"},
      {"^(ab)*?c{1,2}?$"},
      {"^x{$"},
      {"^x{a}$"},
      {"^x{1,a}$"},
      {"^a{,3}$"},
      {"^{}$"},
      {"^a{33,40}$"},  // counts past Grammar::kMinCountChain
      {"^(ab){32,}$"},
      {"^[0-9]{35}$"},
      {"^a{0,40}b$"},
      {"^(a{2,3}){2,3}$"},
      {"^((ab){1,2}c){2}$"},
      // Groups and alternation.
      {"^(a|b)*c$"},
      {"^(?:ab|cd)+$"},
      {"^(?<y>\\d{4})-(?<m>\\d{2})$"},
      {"^((a|b)c)+$"},
      {"^(a*)*b$"},
      {"^(a|)+$"},
      {"^(?:a(?:b(?:c)?)?)?$"},
      // Dot.
      {"^.$"},
      {"^a.c$"},
      {"^.*$"},
      {"a.b"},
      {"^.+\\n.+$"},
      // UTF-8 literals.
      {"^é+$"},
      {"^日本語?$"},
      {"^😀+$"},
      {"^[😀-😂]$"},
      {"^[αβγ]{2}$"},
      // Real schemas.
      {"^\\d{4}-\\d{2}-\\d{2}$"},
      {"^(19|20)\\d\\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])$"},
      {"^([01]\\d|2[0-3]):[0-5]\\d(:[0-5]\\d)?$"},
      {"^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?(Z|[+-]\\d\\d:\\d\\d)$"},
      {"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$"},
      {"^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$"},
      {"^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(?:-((?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]"
       "*)"
       "(?:\\.(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\\+([0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]"
       "+)"
       "*))?$"},
      {"^\\+?[1-9]\\d{1,14}$"},
      {"^(\\+\\d{1,3} )?\\(\\d{3}\\) \\d{3}-\\d{4}$"},
      {"^[A-Za-z_][A-Za-z0-9_]*$"},
      {"^[a-z][a-z0-9-]{0,62}$"},
      {"^[a-zA-Z0-9_-]{1,64}$"},
      {"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-5][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}"
       "$"},
      {"^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"},
      {"^((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$"},
      {"^https?://[\\w.-]+(?:\\.[\\w.-]+)+[\\w\\-._~:/?#[\\]@!$&'()*+,;=]*$"},
      {"^-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?$"},
      {"^\\d{5}(-\\d{4})?$"},
      {"^[a-z0-9]+(?:-[a-z0-9]+)*$"},
      {"^P(\\d+Y)?(\\d+M)?(\\d+D)?(T(\\d+H)?(\\d+M)?(\\d+S)?)?$"},
      {"^\\$\\d{1,3}(,\\d{3})*(\\.\\d{2})?$"},
      {"^[a-z_]+\\((\\w+(, \\w+)*)?\\)$"},
      {"\\d{3}"},
      {"[A-Z]"},
      {"^[A-Z][a-z]+( [A-Z][a-z]+)*$"},
  };
  return table;
}

// ECMAScript's \s, as class items.
constexpr std::string_view kSpaceItems =
    "\\t-\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff";
// Its complement within U+0000-U+10FFFF (the last range is U+10000-U+10FFFF, written raw).
constexpr std::string_view kNonSpaceItems =
    "\\x00-\\x08\\x0e-\\x1f!-\\x9f\\xa1-\\u167f\\u1681-\\u1fff\\u200b-\\u2027\\u202a-\\u202e"
    "\\u2030-\\u205e\\u2060-\\u2fff\\u3001-\\ufefe\\uff00-\\uffff\xF0\x90\x80\x80-\xF4\x8F\xBF\xBF";

// `p` (ECMAScript) in PCRE2 syntax with ECMAScript's meaning (see the file comment).
std::string ToPcre2(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      if (e == 's') {
        out += in_class ? std::string(kSpaceItems) : "[" + std::string(kSpaceItems) + "]";
      } else if (e == 'S') {
        out += in_class ? std::string(kNonSpaceItems) : "[" + std::string(kNonSpaceItems) + "]";
      } else if (e == 'v') {
        out += "\\x0b";
      } else if (e == '0') {
        out += "\\x00";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      out += c == '[' ? std::string("\\[") : std::string(1, c);
      continue;
    }
    if (c == '.') {
      out += "[^\\n\\r\\u2028\\u2029]";
    } else if (c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
    } else {
      out += c;
    }
  }
  return out;
}

class Pcre2 {
 public:
  Pcre2(const std::string& pattern, uint32_t extra_options) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(
        reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
        PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_ALLOW_EMPTY_CLASS | PCRE2_DOLLAR_ENDONLY | extra_options,
        &error, &offset, nullptr);
    if (code_ == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      error_ = std::string(reinterpret_cast<const char*>(message)) + " at offset " +
               std::to_string(offset);
      return;
    }
    data_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~Pcre2() {
    pcre2_match_data_free(data_);
    pcre2_code_free(code_);
  }
  Pcre2(const Pcre2&) = delete;
  Pcre2& operator=(const Pcre2&) = delete;

  const std::string& error() const { return error_; }

  // Whether `s` matches; an invalid UTF-8 subject does not. Other PCRE2 errors fail the test.
  bool Matches(std::string_view s) {
    const int rc =
        pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, data_, nullptr);
    if (rc >= 0) return true;
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21) return false;
    ADD_FAILURE() << "pcre2_match error " << rc;
    return false;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* data_ = nullptr;
  std::string error_;
};

bool LoomMatches(const std::shared_ptr<const CompiledGrammar>& g, std::string_view s) {
  GrammarMatcher m(g);
  return m.AcceptBytes(s) && m.IsAccepting();
}

// `s` with non-printable bytes as \xHH, for failure messages.
std::string Printable(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// The units random strings are made of: every code point of the pattern and its neighbours, what
// the class escapes stand for, and extras (line terminators, Unicode spaces, astral, invalid
// UTF-8: a lone continuation byte, 0xFF, a truncated sequence, an encoded surrogate, overlong).
std::vector<std::string> Alphabet(std::string_view pattern) {
  std::set<std::string> units = {"a",        "Z",
                                 "0",        "9",
                                 "_",        " ",
                                 "\t",       "\n",
                                 "\r",       "\v",
                                 "-",        ".",
                                 "é",        "€",
                                 "\u00A0",   "\u2028",
                                 "😀",        "\uFEFF",
                                 "\x80",     "\xFF",
                                 "\xC3",     "\xED\xA0\x80",
                                 "\xC0\xAF", std::string(1, '\0')};
  for (size_t pos = 0; pos < pattern.size();) {
    const int32_t cp = DecodeUtf8At(pattern, &pos);
    if (cp < 0) {
      ++pos;
      continue;
    }
    for (int32_t d = -1; d <= 1; ++d) {
      const int32_t v = cp + d;
      if (v < 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) continue;
      std::string u;
      AppendUtf8(static_cast<char32_t>(v), &u);
      units.insert(u);
    }
  }
  return {units.begin(), units.end()};
}

// A random walk through `g`: a random allowed byte at a time, stopping at random once accepting.
std::string Walk(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64* rng,
                 size_t max_len) {
  GrammarMatcher m(g);
  std::string s;
  while (s.size() < max_len && m.CanAcceptMoreBytes()) {
    if (m.IsAccepting() && (*rng)() % 6 == 0) break;
    std::vector<uint8_t> next;
    for (int b = 0; b < 256; ++b) {
      if (m.NextBytes().Contains(static_cast<uint8_t>(b))) next.push_back(static_cast<uint8_t>(b));
    }
    const uint8_t b = next[(*rng)() % next.size()];
    EXPECT_TRUE(m.AcceptByte(b));
    s.push_back(static_cast<char>(b));
  }
  return s;
}

// One insert, delete or replace of a byte of `s` (bytes from `alphabet` units).
std::string Mutate(std::string s, const std::vector<std::string>& alphabet, std::mt19937_64* rng) {
  const std::string& unit = alphabet[(*rng)() % alphabet.size()];
  const char byte = unit[(*rng)() % unit.size()];
  const size_t at = s.empty() ? 0 : (*rng)() % (s.size() + 1);
  switch ((*rng)() % 3) {
    case 0:
      s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), byte);
      break;
    case 1:
      if (at < s.size()) s.erase(at, 1);
      break;
    default:
      if (at < s.size()) s[at] = byte;
      break;
  }
  return s;
}

struct Mode {
  const char* name = "";
  std::shared_ptr<const CompiledGrammar> loom;
  std::unique_ptr<Pcre2> pcre2;
  int accepted = 0, rejected = 0, mismatches = 0;
};

TEST(RegexPcre2Test, AgreesWithPcre2) {
  const auto& table = Table();
  ASSERT_GE(table.size(), 60u);
  uint64_t total = 0;
  for (size_t index = 0; index < table.size(); ++index) {
    const RegexEntry& entry = table[index];
    SCOPED_TRACE("regex /" + entry.pattern + "/");
    const std::string pcre2_pattern = entry.pcre2.empty() ? ToPcre2(entry.pattern) : entry.pcre2;

    Mode modes[2];
    modes[0].name = "search (CompileRegex)";
    modes[1].name = "whole match (AnchorWholeMatch)";
    modes[0].loom = MustCompile(CompileRegex(entry.pattern));
    modes[0].pcre2 = std::make_unique<Pcre2>(pcre2_pattern, 0);
    modes[1].loom = MustCompile(CompileRegex(AnchorWholeMatch(entry.pattern)));
    modes[1].pcre2 = std::make_unique<Pcre2>(pcre2_pattern, PCRE2_ANCHORED | PCRE2_ENDANCHORED);
    bool usable = true;
    for (Mode& m : modes) {
      if (m.loom == nullptr || !m.pcre2->error().empty()) {
        ADD_FAILURE() << m.name << ": PCRE2 /" << pcre2_pattern << "/: " << m.pcre2->error();
        usable = false;
      }
    }
    if (!usable) continue;

    std::mt19937_64 rng(0x5eed0000 + index);
    const std::vector<std::string> alphabet = Alphabet(entry.pattern);
    std::vector<std::string> inputs = {""};
    for (int i = 0; i < 1500; ++i) {
      std::string s;
      for (size_t len = rng() % 12; len > 0; --len) s += alphabet[rng() % alphabet.size()];
      inputs.push_back(std::move(s));
    }
    for (int i = 0; i < 800; ++i) {
      // Mostly walks of the whole-match grammar (they end in its language), some of the search one.
      const std::string walked = Walk(modes[i % 4 == 0 ? 0 : 1].loom, &rng, 120);
      for (int k = 0; k < 3; ++k) inputs.push_back(Mutate(walked, alphabet, &rng));
      inputs.push_back(walked);
    }

    for (Mode& m : modes) {
      for (const std::string& s : inputs) {
        const bool ours = LoomMatches(m.loom, s);
        const bool theirs = m.pcre2->Matches(s);
        (theirs ? m.accepted : m.rejected)++;
        if (ours != theirs && ++m.mismatches <= 5) {
          ADD_FAILURE() << m.name << " on \"" << Printable(s) << "\": loom "
                        << (ours ? "accepts" : "rejects") << ", PCRE2 /" << pcre2_pattern << "/ "
                        << (theirs ? "matches" : "does not match");
        }
        ++total;
      }
      // Both verdicts occur, so the comparison can tell a too-loose grammar from a too-tight one.
      EXPECT_GT(m.accepted, 0) << m.name;
      EXPECT_GT(m.rejected, 0) << m.name;
    }
  }
  EXPECT_GT(total, 60u * 2 * 4000);
}

// The translation itself: PCRE2 reads the rewritten pattern with ECMAScript's meaning.
TEST(RegexPcre2Test, TranslationKeepsEcmaScriptMeaning) {
  EXPECT_EQ(ToPcre2("a.b"), "a[^\\n\\r\\u2028\\u2029]b");
  EXPECT_EQ(ToPcre2("[.\\v]"), "[.\\x0b]");
  EXPECT_EQ(ToPcre2("[[:a]"), "[\\[:a]");
  EXPECT_EQ(ToPcre2("[^\\d]\\0"), "[^\\d]\\x00");
  Pcre2 space(ToPcre2("^\\s$"), 0);
  ASSERT_EQ(space.error(), "");
  EXPECT_TRUE(space.Matches("\xEF\xBB\xBF"));  // U+FEFF
  EXPECT_FALSE(space.Matches("\xC2\x85"));     // U+0085 is no ECMAScript space
  Pcre2 non_space(ToPcre2("^[\\S]$"), 0);
  ASSERT_EQ(non_space.error(), "");
  EXPECT_TRUE(non_space.Matches("\xC2\x85"));
  EXPECT_TRUE(non_space.Matches("\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(non_space.Matches("\xE3\x80\x80"));  // U+3000
}

}  // namespace
}  // namespace loom
