#include "server/stream_detokenizer.h"

#include <gtest/gtest.h>

#include <map>

namespace loom {
namespace {

// A SentencePiece-like codec: pieces use "▁" for spaces, the decoder strips one leading space
// of the whole text (as Llama's Strip decoder does), and ids 100+b are byte-fallback tokens.
class FakeSpmCodec : public TextCodec {
 public:
  FakeSpmCodec() {
    pieces_ = {{1, "<s>"},
               {3, "\xE2\x96\x81Once"},
               {4, "\xE2\x96\x81upon"},
               {5,
                "\xE2\x96\x81"
                "a"},
               {6, "\xE2\x96\x81time"},
               {7, ","},
               {8, "\xE2\x96\x81"}};
  }
  StatusOr<std::vector<TokenId>> Encode(std::string_view, bool) const override {
    return UnimplementedError("not needed");
  }
  std::string Decode(std::span<const TokenId> ids, bool skip_special) const override {
    std::string bytes;
    for (TokenId id : ids) {
      if (id >= 100) {
        bytes.push_back(static_cast<char>(id - 100));
        continue;
      }
      if (id == 1) {
        if (!skip_special) bytes += "<s>";
        continue;
      }
      std::string p = pieces_.at(id);
      size_t pos;
      while ((pos = p.find("\xE2\x96\x81")) != std::string::npos) p.replace(pos, 3, " ");
      bytes += p;
    }
    if (!bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
    // Incomplete UTF-8 at the end → U+FFFD (what real decoders do).
    size_t i = bytes.size();
    int back = 0;
    while (i > 0 && back < 4 && (static_cast<unsigned char>(bytes[i - 1]) & 0xC0) == 0x80) {
      --i;
      ++back;
    }
    if (i > 0) {
      unsigned char lead = static_cast<unsigned char>(bytes[i - 1]);
      int need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
      if (need > back) bytes.replace(i - 1, bytes.size() - (i - 1), "\xEF\xBF\xBD");
    }
    return bytes;
  }
  int vocab_size() const override { return 356; }
  bool has_chat_template() const override { return false; }
  StatusOr<std::string> RenderChat(const nlohmann::ordered_json&) const override {
    return FailedPreconditionError("none");
  }

 private:
  std::map<TokenId, std::string> pieces_;
};

TEST(StreamDetokenizerTest, KeepsLeadingSpaceAfterPromptContext) {
  FakeSpmCodec codec;
  StreamDetokenizer d(&codec, {1, 3});  // prompt "<s> Once"
  std::string out;
  for (TokenId t : {4, 5, 6, 7}) out += d.Add(t);
  out += d.Flush();
  EXPECT_EQ(out, " upon a time,");
}

TEST(StreamDetokenizerTest, FirstTokenWithoutContextIsStripped) {
  FakeSpmCodec codec;
  StreamDetokenizer d(&codec, {});
  EXPECT_EQ(d.Add(3), "Once");
  EXPECT_EQ(d.Add(4), " upon");
}

TEST(StreamDetokenizerTest, HoldsBackIncompleteUtf8) {
  FakeSpmCodec codec;
  StreamDetokenizer d(&codec, {3});
  // "é" = C3 A9 as two byte-fallback tokens; "€" = E2 82 AC as three.
  EXPECT_EQ(d.Add(100 + 0xC3), "");
  EXPECT_EQ(d.Add(100 + 0xA9), "\xC3\xA9");
  EXPECT_EQ(d.Add(100 + 0xE2), "");
  EXPECT_EQ(d.Add(100 + 0x82), "");
  EXPECT_EQ(d.Add(100 + 0xAC), "\xE2\x82\xAC");
  EXPECT_EQ(d.Flush(), "");
}

TEST(StreamDetokenizerTest, FlushEmitsReplacementForTruncatedSequence) {
  FakeSpmCodec codec;
  StreamDetokenizer d(&codec, {3});
  EXPECT_EQ(d.Add(100 + 0xE2), "");
  EXPECT_EQ(d.Flush(), "\xEF\xBF\xBD");
}

TEST(StreamDetokenizerTest, MatchesOneShotDecode) {
  FakeSpmCodec codec;
  std::vector<TokenId> gen = {3, 4, 8, 5, 100 + 0xC3, 100 + 0xA9, 6, 7};
  StreamDetokenizer d(&codec, {1});
  std::string out;
  for (TokenId t : gen) out += d.Add(t);
  out += d.Flush();
  std::vector<TokenId> all = {1};
  all.insert(all.end(), gen.begin(), gen.end());
  std::string whole = codec.Decode(all, true);
  EXPECT_EQ(out, whole);
}

}  // namespace
}  // namespace loom
