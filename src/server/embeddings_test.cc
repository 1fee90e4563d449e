// POST /v1/embeddings' parser and response (embeddings.h): every accepted input shape, every bad
// field rejected naming it, truncation + normalization, base64 as the OpenAI SDK decodes it.
#include "server/embeddings.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace loom {
namespace {

constexpr int kVocab = 512;
constexpr int kHidden = 8;

StatusOr<EmbeddingsRequest> Parse(const std::string& body, std::string* param) {
  return ParseEmbeddingsRequest(body, kVocab, kHidden, param);
}

TEST(EmbeddingsRequestTest, InputShapes) {
  std::string param;
  auto one = Parse(R"({"input":"hello","model":"m"})", &param);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->inputs.size(), 1u);
  EXPECT_EQ(one->inputs[0].field, "input");
  EXPECT_FALSE(one->inputs[0].is_ids);
  EXPECT_EQ(one->inputs[0].text, "hello");
  EXPECT_EQ(one->model, "m");
  EXPECT_FALSE(one->base64);
  EXPECT_EQ(one->dimensions, 0);

  auto texts = Parse(R"({"input":["a","b c","d"]})", &param);
  ASSERT_TRUE(texts.ok());
  ASSERT_EQ(texts->inputs.size(), 3u);
  EXPECT_EQ(texts->inputs[2].field, "input[2]");
  EXPECT_EQ(texts->inputs[1].text, "b c");

  auto ids = Parse(R"({"input":[1,2,3]})", &param);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->inputs.size(), 1u);
  EXPECT_TRUE(ids->inputs[0].is_ids);
  EXPECT_EQ(ids->inputs[0].ids, (std::vector<TokenId>{1, 2, 3}));

  auto id_lists = Parse(
      R"({"input":[[5],[6,7]],"encoding_format":"base64","dimensions":4,"user":"u"})", &param);
  ASSERT_TRUE(id_lists.ok()) << id_lists.status().ToString();
  ASSERT_EQ(id_lists->inputs.size(), 2u);
  EXPECT_EQ(id_lists->inputs[1].field, "input[1]");
  EXPECT_EQ(id_lists->inputs[1].ids, (std::vector<TokenId>{6, 7}));
  EXPECT_TRUE(id_lists->base64);
  EXPECT_EQ(id_lists->dimensions, 4);

  auto nulls =
      Parse(R"({"input":"x","encoding_format":null,"dimensions":null,"user":null})", &param);
  ASSERT_TRUE(nulls.ok());
  EXPECT_EQ(nulls->dimensions, 0);
}

struct BadCase {
  std::string body;
  std::string param;
  std::string substring;
};

TEST(EmbeddingsRequestTest, BadInputsNameTheField) {
  const std::vector<BadCase> cases = {
      {R"({})", "input", "input is required"},
      {R"({"input":""})", "input", "empty string"},
      {R"({"input":[]})", "input", "empty array"},
      {R"({"input":["a",""]})", "input[1]", "input[1] is an empty string"},
      {R"({"input":[[1],[]]})", "input[1]", "must not be empty"},
      {R"({"input":["a",[1]]})", "input[1]", "one kind throughout"},
      {R"({"input":[[1],"a"]})", "input[1]", "one kind throughout"},
      {R"({"input":[1,"a"]})", "input", "token ids must be integers"},
      {R"({"input":[1,512]})", "input", "[0, 512)"},
      {R"({"input":[[1,-1]]})", "input[0]", "[0, 512)"},
      {R"({"input":[1.5]})", "input", "token ids must be integers"},
      {R"({"input":7})", "input", "input must be a string"},
      {R"({"input":{"a":1}})", "input", "got object"},
      {R"({"input":"x","encoding_format":"int8"})", "encoding_format", "\"float\" or \"base64\""},
      {R"({"input":"x","encoding_format":3})", "encoding_format", "must be a string"},
      {R"({"input":"x","dimensions":0})", "dimensions", "must be in [1,"},
      {R"({"input":"x","dimensions":9})", "dimensions", "must be in [1, 8]"},
      {R"({"input":"x","dimensions":2.5})", "dimensions", "must be an integer"},
      {R"({"input":"x","user":5})", "user", "must be a string"},
      {R"({"input":"x","model":5})", "model", "must be a string"},
      {R"([1])", "", "object"},
  };
  for (const BadCase& c : cases) {
    std::string param;
    auto r = Parse(c.body, &param);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(param, c.param) << c.body;
    EXPECT_NE(r.status().message().find(c.substring), std::string::npos)
        << c.body << ": " << r.status().message();
  }
  std::string many = R"({"input":[)";
  for (int i = 0; i <= kMaxEmbeddingInputs; ++i) many += i == 0 ? R"("a")" : R"(,"a")";
  many += "]}";
  std::string param;
  auto r = Parse(many, &param);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(param, "input");
}

TEST(EmbeddingsResponseTest, FinishEmbeddingTruncatesThenNormalizes) {
  const std::vector<float> pooled = {3, 4, 12, 0};
  const std::vector<float> full = FinishEmbedding(pooled, 0);
  ASSERT_EQ(full.size(), 4u);
  EXPECT_FLOAT_EQ(full[0], 3.f / 13);
  EXPECT_FLOAT_EQ(full[2], 12.f / 13);
  const std::vector<float> two = FinishEmbedding(pooled, 2);  // Matryoshka: [3, 4] / 5
  ASSERT_EQ(two.size(), 2u);
  EXPECT_FLOAT_EQ(two[0], 0.6f);
  EXPECT_FLOAT_EQ(two[1], 0.8f);
  EXPECT_EQ(FinishEmbedding(std::vector<float>{0, 0}, 0), (std::vector<float>{0, 0}));
}

// Decodes standard base64 (the reference for the encoder below).
std::vector<unsigned char> DecodeBase64(const std::string& s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : 63;
  };
  std::vector<unsigned char> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    acc = (acc << 6) | static_cast<uint32_t>(value(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<unsigned char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

TEST(EmbeddingsResponseTest, Base64IsLittleEndianF32) {
  // 1.0f = 00 00 80 3F: "AACAPw==".
  EXPECT_EQ(EmbeddingBase64(std::vector<float>{1.0f}), "AACAPw==");
  EXPECT_EQ(EmbeddingBase64(std::vector<float>{}), "");
  for (size_t n : {1u, 2u, 3u, 7u}) {  // every padding case (4n bytes: n % 3 decides)
    std::vector<float> v;
    for (size_t i = 0; i < n; ++i) v.push_back(-0.5f + 0.37f * static_cast<float>(i));
    const std::string b64 = EmbeddingBase64(v);
    EXPECT_EQ(b64.size() % 4, 0u);
    const std::vector<unsigned char> bytes = DecodeBase64(b64);
    ASSERT_EQ(bytes.size(), n * 4);
    std::vector<float> back(n);
    std::memcpy(back.data(), bytes.data(), bytes.size());
    EXPECT_EQ(back, v);
  }
}

TEST(EmbeddingsResponseTest, JsonShape) {
  const auto j = EmbeddingsJson("m", {{0.6f, 0.8f}, {1.0f, 0.0f}}, false, 7);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "m");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][1]["object"], "embedding");
  EXPECT_EQ(j["data"][1]["index"], 1);
  EXPECT_EQ(j["data"][0]["embedding"][1].get<float>(), 0.8f);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(j["usage"]["total_tokens"], 7);
  const auto b = EmbeddingsJson("m", {{1.0f}}, true, 1);
  EXPECT_EQ(b["data"][0]["embedding"], "AACAPw==");
  // Key order as OpenAI sends it.
  EXPECT_EQ(j.begin().key(), "object");
  EXPECT_EQ(j["data"][0].begin().key(), "object");
}

}  // namespace
}  // namespace loom
