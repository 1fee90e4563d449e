// Component tests on small inline tokenizer.json files (Unigram, WordPiece, normalizers,
// pre-tokenizers, added-token options) and robustness on real tokenizers (invalid UTF-8, empty
// and 10 MB inputs).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "support/test_data.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace loom {
namespace {

std::unique_ptr<Tokenizer> FromJsonText(const std::string& json, const std::string& config = "") {
  auto t = Tokenizer::FromTokenizerJsonText(json, config);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

// A real tokenizer (tests/support/test_data.h); call LOOM_NEED_FILE(TokenizerDir(dir)) first.
std::unique_ptr<Tokenizer> Shared(const char* dir) {
  auto t = Tokenizer::FromHfDirectory(testing::TokenizerDir(dir));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

using Ids = std::vector<int32_t>;

TEST(UnigramTest, ViterbiPicksBestSegmentationAndFusesUnknowns) {
  auto t = FromJsonText(R"({
    "model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0], ["a", -1], ["b", -1],
              ["ab", -1.5], ["abc", -5], ["c", -2], ["\u2581", -1]]},
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never"},
    "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never"}})");
  ASSERT_NE(t, nullptr);
  // "ab"+"c" = -3.5 beats "abc" = -5 and a+b+c = -4.
  EXPECT_EQ(t->Encode("abc", false), (Ids{3, 5}));
  EXPECT_EQ(t->Encode("xyz", false), (Ids{0}));  // unknown run fused into one <unk>
  EXPECT_EQ(t->Encode("axyb", false), (Ids{1, 0, 2}));
  EXPECT_EQ(t->Decode(Ids{3, 5}, false), "abc");
}

TEST(WordPieceTest, GreedyLongestMatchWithContinuationPrefix) {
  auto t = FromJsonText(R"({
    "normalizer": {"type": "BertNormalizer", "lowercase": true},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "vocab": {"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3, "!": 4, "hi": 5}},
    "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
    "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 7], "cls": ["[CLS]", 6]}})");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("UNAFFABLE hi!", false), (Ids{1, 2, 3, 5, 4}));
  EXPECT_EQ(t->Encode("hi xyz", false), (Ids{5, 0}));
  EXPECT_EQ(t->Encode("hi", true), (Ids{6, 5, 7}));
  EXPECT_EQ(t->Decode(Ids{1, 2, 3, 5, 4}, false), "unaffable hi!");
}

TEST(NormalizerTest, UnicodeFormsLowercaseStripReplace) {
  // Identity-vocab BPE over single characters makes the normalized text visible via Decode.
  std::string vocab = "{";
  const std::vector<std::string> chars = {"f",        "i", "a",        "b", "x",
                                          "\xC3\xA9", "e", "\xCC\x81", "_", "1"};
  for (size_t i = 0; i < chars.size(); ++i) {
    vocab += (i ? "," : "") + std::string("\"") + chars[i] + "\":" + std::to_string(i);
  }
  vocab += "}";
  auto make = [&](const std::string& normalizer) {
    return FromJsonText(R"({"normalizer": )" + normalizer +
                        R"(, "model": {"type": "BPE", "vocab": )" + vocab +
                        R"(, "merges": []}, "decoder": {"type": "Fuse"}})");
  };
  auto nfkc = make(R"({"type": "NFKC"})");
  EXPECT_EQ(nfkc->Decode(nfkc->Encode("\xEF\xAC\x81", false), false), "fi");  // U+FB01
  EXPECT_EQ(nfkc->Decode(nfkc->Encode("\xE2\x91\xA0", false), false), "1");   // circled 1
  auto nfc = make(R"({"type": "NFC"})");
  EXPECT_EQ(nfc->Encode("e\xCC\x81", false), (Ids{5}));
  auto nfd = make(R"({"type": "NFD"})");
  EXPECT_EQ(nfd->Encode("\xC3\xA9", false), (Ids{6, 7}));
  auto seq = make(R"({"type": "Sequence", "normalizers": [{"type": "Strip"},
      {"type": "Lowercase"}, {"type": "Replace", "pattern": {"Regex": "[0-9]+"}, "content": "_"}]})");
  EXPECT_EQ(seq->Decode(seq->Encode("  AB 12 X\t", false), false), "ab_x");
}

TEST(PreTokenizerTest, MetaspaceFirstOnlyPrependsAtInputStart) {
  const std::string json = R"({
    "added_tokens": [{"id": 9, "content": "<sep>", "special": true, "normalized": false}],
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"},
    "model": {"type": "BPE", "vocab": {"\u2581": 0, "a": 1, "b": 2, "\u2581a": 3, "\u2581b": 4},
              "merges": ["\u2581 a", "\u2581 b"]},
    "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"}})";
  auto t = FromJsonText(json);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("a b", false), (Ids{3, 4}));
  EXPECT_EQ(t->Encode("a<sep>b", false), (Ids{3, 9, 2}));  // no prefix after the added token
  EXPECT_EQ(t->Decode(Ids{3, 4}, false), "a b");
}

TEST(PreTokenizerTest, DigitsAndSplitBehaviors) {
  auto t = FromJsonText(R"({
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Digits", "individual_digits": true},
      {"type": "Split", "pattern": {"String": "-"}, "behavior": "Removed", "invert": false}]},
    "model": {"type": "BPE", "vocab": {"1": 0, "2": 1, "3": 2, "a": 3, "12": 4},
              "merges": ["1 2"]}})");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("123-a", false), (Ids{0, 1, 2, 3}));  // digits isolated: no "12" merge
}

TEST(AddedTokensTest, LstripRstripSingleWord) {
  auto t = FromJsonText(R"({
    "added_tokens": [
      {"id": 10, "content": "<l>", "lstrip": true, "special": true, "normalized": false},
      {"id": 11, "content": "<r>", "rstrip": true, "special": false, "normalized": false},
      {"id": 12, "content": "cat", "single_word": true, "special": false, "normalized": false}],
    "model": {"type": "BPE", "vocab": {" ": 0, "a": 1, "c": 2, "t": 3, "s": 4}, "merges": []},
    "decoder": {"type": "Fuse"}})");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("a  <l>a", false), (Ids{1, 10, 1}));
  EXPECT_EQ(t->Encode("a<r>  a", false), (Ids{1, 11, 1}));
  EXPECT_EQ(t->Encode("cat cats", false), (Ids{12, 0, 2, 1, 3, 4}));
  EXPECT_EQ(t->Decode(Ids{1, 10, 11}, /*skip_special_tokens=*/true), "a<r>");
  EXPECT_TRUE(t->IsSpecial(10));
  EXPECT_FALSE(t->IsSpecial(11));
}

TEST(LoaderTest, ErrorsNameTheProblem) {
  auto bad = Tokenizer::FromTokenizerJsonText("{not json");
  EXPECT_FALSE(bad.ok());
  auto unknown = Tokenizer::FromTokenizerJsonText(R"({"model": {"type": "Wat"}})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("Wat"), std::string::npos);
  auto merge = Tokenizer::FromTokenizerJsonText(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})");
  ASSERT_FALSE(merge.ok());
  EXPECT_NE(merge.status().message().find("a b"), std::string::npos);
  auto missing = Tokenizer::FromHfDirectory("/nonexistent/dir");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(RobustnessTest, InvalidUtf8IsReplacedOrRejected) {
  LOOM_NEED_FILE(testing::TokenizerDir("tokenizer-llama3_1-lenml"));
  auto t = Shared("tokenizer-llama3_1-lenml");
  ASSERT_NE(t, nullptr);
  const std::string bad =
      "ab\xFF"
      "cd\xE4\xB8"
      "e\xED\xA0\x80";
  EXPECT_EQ(t->Encode(bad, false), t->Encode("ab\xEF\xBF\xBD"
                                             "cd\xEF\xBF\xBD"
                                             "e\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD",
                                             false));
  auto checked = t->EncodeChecked(bad, false);
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.status().message().find("offset 2"), std::string::npos);
  EXPECT_TRUE(t->EncodeChecked("fine", false).ok());
  EXPECT_EQ(t->Encode("", false), Ids{});
  EXPECT_EQ(t->Encode("", true), Ids{128000});
  EXPECT_EQ(t->Decode(Ids{}, false), "");
  EXPECT_EQ(t->Decode(Ids{-5, 99999999}, false), "");  // unknown ids are ignored
}

TEST(RobustnessTest, TenMegabyteInputsAreLinear) {
  for (const char* dir : {"tokenizer-llama3_1-lenml", "tokenizer-gemma3-lenml"}) {
    LOOM_NEED_FILE(testing::TokenizerDir(dir));
    auto t = Shared(dir);
    ASSERT_NE(t, nullptr);
    const std::string chunk =
        "The quick brown fox jumps over the lazy dog. 你好，世界！ int main() { return 0; }\n";
    std::string text;
    while (text.size() < 10'000'000) text += chunk;
    // One 10 MB mixed text, and single-"word" inputs where only an O(n log n) merge loop
    // (no O(n^2) rescans) finishes quickly: 2 MB of 'a' and 2 MB of spaces.
    for (const std::string& input :
         {text, std::string(2'000'000, 'a'), std::string(2'000'000, ' ')}) {
      const auto start = std::chrono::steady_clock::now();
      const auto ids = t->Encode(input, false);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_LT(s, 20.0) << dir;  // quadratic BPE would take hours
      EXPECT_EQ(t->Decode(ids, false), input) << dir;
    }
  }
}

}  // namespace
}  // namespace loom
