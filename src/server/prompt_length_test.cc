// CheckPromptLength (route_util.h): a prompt that cannot fit the context is refused from its byte
// length, before it is tokenized.
#include <gtest/gtest.h>

#include <vector>

#include "server/route_util.h"
#include "server/tokenizer_codec.h"
#include "tokenizer/tokenizer.h"

namespace loom {
namespace {

// A codec whose tokens stand for at most 4 bytes; Encode must not be reached by the check.
class FourBytesCodec final : public TextCodec {
 public:
  StatusOr<std::vector<TokenId>> Encode(std::string_view, bool) const override {
    ADD_FAILURE() << "CheckPromptLength tokenized";
    return std::vector<TokenId>{};
  }
  std::string Decode(std::span<const TokenId>, bool) const override { return ""; }
  size_t MinTokenCount(std::string_view text, bool add_special_tokens) const override {
    return (text.size() + 3) / 4 + (add_special_tokens ? 1 : 0);
  }
  size_t max_bytes_per_token() const override { return 4; }
  int vocab_size() const override { return 100; }
  bool has_chat_template() const override { return false; }
  StatusOr<std::string> RenderChat(const nlohmann::ordered_json&) const override {
    return std::string();
  }
};

// A codec that knows no bound (the TextCodec defaults).
class UnboundedCodec final : public TextCodec {
 public:
  StatusOr<std::vector<TokenId>> Encode(std::string_view, bool) const override {
    return std::vector<TokenId>{};
  }
  std::string Decode(std::span<const TokenId>, bool) const override { return ""; }
  int vocab_size() const override { return 100; }
  bool has_chat_template() const override { return false; }
  StatusOr<std::string> RenderChat(const nlohmann::ordered_json&) const override {
    return std::string();
  }
};

TEST(CheckPromptLengthTest, RefusesWhatCannotFitBeforeTokenizing) {
  const FourBytesCodec codec;
  struct Case {
    size_t bytes;
    bool add_special;
    int context;
    bool refused;
  };
  const Case kCases[] = {
      {4 * 1000, false, 1000, true},       // exactly 1000 tokens at least: the context is full
      {4 * 1000 - 4, false, 1000, false},  // 999 at least: may fit, the exact check decides
      {4 * 999, true, 1000, true},         // 999 + BOS
      {30 << 20, false, 4096, true},       // a 30 MB body
      {999, false, 1000, false},           // shorter than the context in bytes: not checked
      {0, true, 1, false},
  };
  for (const Case& c : kCases) {
    const std::string text(c.bytes, 'x');
    const Status s = CheckPromptLength(codec, text, c.add_special, c.context);
    EXPECT_EQ(!s.ok(), c.refused) << c.bytes << " bytes, context " << c.context;
    if (s.ok()) continue;
    // The same 400 as the check after tokenization, naming the estimate, the bytes and the limit.
    const ApiError e = ApiError::FromStatus(s, "messages");
    EXPECT_EQ(e.http_status, 400);
    EXPECT_EQ(e.code, "context_length_exceeded");
    EXPECT_EQ(e.param, "messages");
    const std::string at_least = std::to_string(codec.MinTokenCount(text, c.add_special));
    EXPECT_EQ(std::string(s.message()),
              "the prompt has at least " + at_least + " tokens (" + std::to_string(c.bytes) +
                  " bytes, and no token of this model is longer than 4 bytes) but the "
                  "context length is " +
                  std::to_string(c.context) + "; shorten the prompt");
  }
  // No bound known: never refused here.
  EXPECT_TRUE(CheckPromptLength(UnboundedCodec(), std::string(1 << 20, 'x'), true, 16).ok());
}

// The real codec of the default model (byte-level BPE, 15 raw bytes in its longest token): refused
// exactly when the tokenizer's bound says so, and never a prompt whose real count fits.
TEST(CheckPromptLengthTest, TheDefaultModelsTokenizer) {
  auto tok = Tokenizer::FromHfDirectory(std::string(LOOM_SOURCE_DIR) + "/models/default");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const TokenizerCodec codec(std::shared_ptr<const Tokenizer>(std::move(tok).value()), nullptr);
  ASSERT_EQ(codec.max_bytes_per_token(), 15u);
  const int context = 512;
  for (const std::string& text :
       {std::string(512 * 15, ' '), std::string(512 * 15 - 15, ' '), std::string(1 << 20, 'a'),
        std::string(20000, 'x'), std::string("Once upon a time ") + std::string(9000, '!')}) {
    const Status s = CheckPromptLength(codec, text, /*add_special_tokens=*/true, context);
    const size_t real = codec.Encode(text, true)->size();
    if (!s.ok()) {
      EXPECT_GE(real, static_cast<size_t>(context)) << text.size() << " bytes refused but fit";
    }
    EXPECT_LE(codec.MinTokenCount(text, true), real);
  }
  EXPECT_FALSE(CheckPromptLength(codec, std::string(1 << 20, 'a'), true, context).ok());
}

}  // namespace
}  // namespace loom
