// The pooling of /v1/embeddings from --pooling and a sentence-transformers checkpoint's
// modules.json + 1_Pooling/config.json (pooling_config.h).
#include "cli/pooling_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace loom {
namespace {

namespace fs = std::filesystem;

const char* kModules = R"([
  {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
  {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
  {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
])";

// Qwen3-Embedding's 1_Pooling/config.json, with `mode` set instead of lasttoken.
std::string PoolingConfig(const std::string& mode) {
  std::string s = R"({"word_embedding_dimension": 1024)";
  for (const char* key : {"pooling_mode_cls_token", "pooling_mode_mean_tokens",
                          "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                          "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"}) {
    s += std::string(", \"") + key + "\": " + (mode == key ? "true" : "false");
  }
  return s + R"(, "include_prompt": true})";
}

class PoolingConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("loom_pooling_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "1_Pooling");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }
  fs::path dir_;
};

TEST_F(PoolingConfigTest, ReadsEachImplementedMode) {
  Write("modules.json", kModules);
  const std::vector<std::pair<std::string, Pooling>> cases = {
      {"pooling_mode_lasttoken", Pooling::kLast},
      {"pooling_mode_mean_tokens", Pooling::kMean},
      {"pooling_mode_cls_token", Pooling::kCls}};
  for (const auto& [key, want] : cases) {
    Write("1_Pooling/config.json", PoolingConfig(key));
    auto p = ReadSentenceTransformersPooling(dir_.string());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_TRUE(p->has_value()) << key;
    EXPECT_EQ(**p, want) << key;
    auto choice = ResolvePooling("auto", dir_.string());
    ASSERT_TRUE(choice.ok());
    EXPECT_EQ(choice->pooling, want);
    EXPECT_EQ(choice->source, "sentence-transformers config");
  }
  // --pooling wins over the config.
  auto flag = ResolvePooling("mean", dir_.string());
  ASSERT_TRUE(flag.ok());
  EXPECT_EQ(flag->pooling, Pooling::kMean);
  EXPECT_EQ(flag->source, "--pooling");
}

TEST_F(PoolingConfigTest, NoConfigMeansLastToken) {
  auto none = ReadSentenceTransformersPooling(dir_.string());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto choice = ResolvePooling("auto", dir_.string());
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->pooling, Pooling::kLast);
  EXPECT_EQ(choice->source, "default");
  // A .gguf path (not a directory), and modules without a Pooling module.
  EXPECT_FALSE(ReadSentenceTransformersPooling((dir_ / "model.gguf").string())->has_value());
  Write("modules.json", R"([{"idx": 0, "path": "", "type": "x.Transformer"}])");
  EXPECT_FALSE(ReadSentenceTransformersPooling(dir_.string())->has_value());
}

TEST_F(PoolingConfigTest, UnusableConfigsSayWhatToDo) {
  Write("modules.json", kModules);
  Write("1_Pooling/config.json", PoolingConfig("pooling_mode_max_tokens"));
  auto max = ResolvePooling("auto", dir_.string());
  ASSERT_FALSE(max.ok());
  EXPECT_NE(max.status().message().find("pooling_mode_max_tokens is not implemented"),
            std::string::npos)
      << max.status().message();
  EXPECT_NE(max.status().message().find("--pooling"), std::string::npos);
  // A usable flag still works.
  EXPECT_TRUE(ResolvePooling("last", dir_.string()).ok());
  Write("1_Pooling/config.json",
        R"({"pooling_mode_mean_tokens": true, "pooling_mode_cls_token": true})");
  EXPECT_FALSE(ReadSentenceTransformersPooling(dir_.string()).ok());
  Write("1_Pooling/config.json", "{not json");
  EXPECT_FALSE(ReadSentenceTransformersPooling(dir_.string()).ok());
  fs::remove(dir_ / "1_Pooling/config.json");
  EXPECT_EQ(ReadSentenceTransformersPooling(dir_.string()).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(ResolvePooling("max", dir_.string()).ok());
}

TEST(PoolingNameTest, FlagAndSentenceTransformersNames) {
  EXPECT_EQ(ParsePoolingName("last"), Pooling::kLast);
  EXPECT_EQ(ParsePoolingName("lasttoken"), Pooling::kLast);
  EXPECT_EQ(ParsePoolingName("mean"), Pooling::kMean);
  EXPECT_EQ(ParsePoolingName("cls"), Pooling::kCls);
  EXPECT_EQ(ParsePoolingName("max"), std::nullopt);
}

}  // namespace
}  // namespace loom
