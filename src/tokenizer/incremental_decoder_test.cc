// IncrementalDecoder behaviour beyond the golden corpus (which checks concat(deltas) == Decode
// for every corpus string on every tokenizer): hold-back of partial UTF-8 and byte-fallback
// runs, invalid byte sequences, SentencePiece leading space, skip_special_tokens, reuse.
#include "tokenizer/incremental_decoder.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "support/test_data.h"
#include "tokenizer/unicode.h"

namespace loom {
namespace {

// A real tokenizer (tests/support/test_data.h); call LOOM_NEED_FILE(TokenizerDir(dir)) first.
std::unique_ptr<Tokenizer> Shared(const char* dir) {
  auto t = Tokenizer::FromHfDirectory(testing::TokenizerDir(dir));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

// Feeds ids one by one; returns the deltas (the last one from Flush).
std::vector<std::string> Stream(const Tokenizer& t, const std::vector<int32_t>& ids, bool skip) {
  IncrementalDecoder dec(t, skip);
  std::vector<std::string> deltas;
  for (int32_t id : ids) deltas.push_back(dec.Add(id));
  deltas.push_back(dec.Flush());
  return deltas;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x;
  return s;
}

TEST(IncrementalDecoderTest, ByteFallbackRunIsHeldUntilComplete) {
  LOOM_NEED_FILE(testing::TokenizerDir("tokenizer-llama2-ortx"));
  auto t = Shared("tokenizer-llama2-ortx");
  ASSERT_NE(t, nullptr);
  const auto ids = t->Encode("a 🦙 b", false);  // the llama emoji is 4 byte-fallback tokens
  const auto deltas = Stream(*t, ids, false);
  EXPECT_EQ(Join(deltas), "a 🦙 b");
  for (const auto& d : deltas) {
    EXPECT_TRUE(unicode::IsValidUtf8(d));
    // No delta ever contains a partial emoji: it appears whole or not at all.
    if (d.find("\xF0") != std::string::npos) {
      EXPECT_NE(d.find("🦙"), std::string::npos);
    }
  }
  // The first token loses its SentencePiece space: "a", not " a".
  EXPECT_EQ(deltas[0], "a");
}

TEST(IncrementalDecoderTest, InvalidByteFallbackRunMatchesDecode) {
  LOOM_NEED_FILE(testing::TokenizerDir("tokenizer-llama2-ortx"));
  auto t = Shared("tokenizer-llama2-ortx");
  ASSERT_NE(t, nullptr);
  const int32_t e4 = *t->TokenToId("<0xE4>"), b8 = *t->TokenToId("<0xB8>");
  const int32_t a = *t->TokenToId("a");
  const std::vector<int32_t> ids = {a, e4, b8, a, e4};
  const std::string full = t->Decode(ids, false);
  // HF ByteFallback: an invalid run becomes one U+FFFD per byte.
  EXPECT_EQ(full,
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "a\xEF\xBF\xBD");
  EXPECT_EQ(Join(Stream(*t, ids, false)), full);
}

TEST(IncrementalDecoderTest, ByteLevelHoldsPartialUtf8AndReplacesInvalid) {
  LOOM_NEED_FILE(testing::TokenizerDir("tokenizer-llama3_1-lenml"));
  auto t = Shared("tokenizer-llama3_1-lenml");
  ASSERT_NE(t, nullptr);
  // Rare astral ideographs split into byte-level tokens that end mid-character.
  const auto ids = t->Encode("𠜎𠜱𠝹", false);
  ASSERT_GT(ids.size(), 3u);
  const auto deltas = Stream(*t, ids, false);
  EXPECT_EQ(Join(deltas), "𠜎𠜱𠝹");
  for (const auto& d : deltas) EXPECT_TRUE(unicode::IsValidUtf8(d));
  // A lone continuation byte then ASCII: U+FFFD, as a lossy full decode gives.
  const auto cont_id = t->TokenToId(unicode::BytesToByteLevel("\x80"));
  const auto lead_id = t->TokenToId(unicode::BytesToByteLevel("\xE4"));
  ASSERT_TRUE(cont_id && lead_id);
  const int32_t cont = *cont_id, lead = *lead_id, x = *t->TokenToId("x");
  const std::vector<int32_t> bad = {x, cont, x, lead};
  EXPECT_EQ(t->Decode(bad, false), "x\xEF\xBF\xBDx\xEF\xBF\xBD");
  const auto bad_deltas = Stream(*t, bad, false);
  EXPECT_EQ(bad_deltas[3], "");  // the trailing lead byte might still complete: held
  EXPECT_EQ(Join(bad_deltas), t->Decode(bad, false));
}

TEST(IncrementalDecoderTest, SkipSpecialTokensAndReuseAfterFlush) {
  LOOM_NEED_FILE(testing::TokenizerDir("tokenizer-mistral-v0.1-lenml"));
  auto t = Shared("tokenizer-mistral-v0.1-lenml");
  ASSERT_NE(t, nullptr);
  const auto ids = t->Encode("Hello world", /*add_special_tokens=*/true);  // <s> first
  ASSERT_EQ(ids[0], 1);
  EXPECT_EQ(Join(Stream(*t, ids, /*skip=*/true)), "Hello world");
  EXPECT_EQ(Join(Stream(*t, ids, /*skip=*/false)), t->Decode(ids, false));
  IncrementalDecoder dec(*t, true);
  std::string first, second;
  for (int32_t id : ids) first += dec.Add(id);
  first += dec.Flush();
  for (int32_t id : ids) second += dec.Add(id);
  second += dec.Flush();
  EXPECT_EQ(first, second);  // Flush resets the leading-space state
}

}  // namespace
}  // namespace loom
