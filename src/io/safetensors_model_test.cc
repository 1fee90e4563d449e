#include "io/safetensors_model.h"

#include <gtest/gtest.h>

#include "io/io_test_util.h"

namespace loom {
namespace {

using testing::FloatBytes;
using testing::HasError;
using testing::MakeSafetensors;
using testing::WriteBytes;

std::string Shard1() {
  return MakeSafetensors({{"embed", "F32", {2, 2}, FloatBytes({1, 2, 3, 4})},
                          {"norm", "F32", {2}, FloatBytes({5, 6})}});
}
std::string Shard2() { return MakeSafetensors({{"head", "F32", {1, 2}, FloatBytes({7, 8})}}); }

const char* kIndex = R"({
  "metadata": {"total_size": 32},
  "weight_map": {
    "embed": "model-00001-of-00002.safetensors",
    "norm": "model-00001-of-00002.safetensors",
    "head": "model-00002-of-00002.safetensors"
  }
})";

float First(const StatusOr<Tensor>& t) {
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? t->data_as<float>()[0] : -1.f;
}

TEST(SafetensorsModelTest, OpensASingleFileDirectory) {
  const std::string dir = testing::ScratchDir();
  WriteBytes(dir + "/model.safetensors", Shard1());
  WriteBytes(dir + "/other.safetensors", Shard2());  // ignored: model.safetensors wins
  StatusOr<SafetensorsModel> model = SafetensorsModel::Open(dir);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->names(), (std::vector<std::string>{"embed", "norm"}));
  EXPECT_EQ(model->files().size(), 1u);
  EXPECT_EQ(First(model->GetTensor("norm")), 5.f);
  EXPECT_TRUE(HasError(model->GetTensor("head").status(), StatusCode::kNotFound, {dir, "'head'"}));
}

TEST(SafetensorsModelTest, OpensAShardedDirectoryThroughTheIndex) {
  const std::string dir = testing::ScratchDir();
  WriteBytes(dir + "/model-00001-of-00002.safetensors", Shard1());
  WriteBytes(dir + "/model-00002-of-00002.safetensors", Shard2());
  WriteBytes(dir + "/model.safetensors.index.json", kIndex);
  StatusOr<SafetensorsModel> model = SafetensorsModel::Open(dir);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->names(), (std::vector<std::string>{"embed", "head", "norm"}));
  EXPECT_EQ(model->num_tensors(), 3u);
  EXPECT_EQ(model->files().size(), 2u);
  EXPECT_TRUE(model->Has("head"));
  EXPECT_FALSE(model->Has("lm_head"));
  EXPECT_EQ(model->Find("embed")->shape, (Shape{2, 2}));
  EXPECT_EQ(First(model->GetTensor("embed")), 1.f);
  EXPECT_EQ(First(model->GetTensor("head")), 7.f);
}

TEST(SafetensorsModelTest, GlobsSafetensorsFilesWithoutAnIndex) {
  const std::string dir = testing::ScratchDir();
  WriteBytes(dir + "/a.safetensors", Shard1());
  WriteBytes(dir + "/b.safetensors", Shard2());
  WriteBytes(dir + "/notes.txt", "not a model");
  StatusOr<SafetensorsModel> model = SafetensorsModel::Open(dir);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->num_tensors(), 3u);
  EXPECT_EQ(First(model->GetTensor("head")), 7.f);
  // A single file path works too.
  StatusOr<SafetensorsModel> single = SafetensorsModel::Open(dir + "/b.safetensors");
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_EQ(single->names(), (std::vector<std::string>{"head"}));
}

TEST(SafetensorsModelTest, BadDirectoriesGiveAStatusNamingThePlaceAndProblem) {
  {
    const std::string dir = testing::ScratchDir() + "/missing_shard";
    std::filesystem::create_directories(dir);
    WriteBytes(dir + "/model-00001-of-00002.safetensors", Shard1());
    WriteBytes(dir + "/model.safetensors.index.json", kIndex);
    EXPECT_TRUE(HasError(SafetensorsModel::Open(dir).status(), StatusCode::kNotFound,
                         {dir + "/model.safetensors.index.json",
                          "'model-00002-of-00002.safetensors'", "does not exist"}));
  }
  {
    const std::string dir = testing::ScratchDir() + "/missing_tensor";
    std::filesystem::create_directories(dir);
    WriteBytes(dir + "/model-00001-of-00002.safetensors", Shard1());
    WriteBytes(dir + "/model-00002-of-00002.safetensors", Shard1());  // lacks "head"
    WriteBytes(dir + "/model.safetensors.index.json", kIndex);
    EXPECT_TRUE(HasError(SafetensorsModel::Open(dir).status(), StatusCode::kNotFound,
                         {"'head'", "missing from shard 'model-00002-of-00002.safetensors'"}));
  }
  {
    const std::string dir = testing::ScratchDir() + "/bad_index";
    std::filesystem::create_directories(dir);
    WriteBytes(dir + "/model.safetensors.index.json", "{\"weight_map\": {");
    EXPECT_TRUE(HasError(SafetensorsModel::Open(dir).status(), StatusCode::kInvalidArgument,
                         {dir + "/model.safetensors.index.json", "invalid JSON"}));
    WriteBytes(dir + "/model.safetensors.index.json", R"({"metadata": {}})");
    EXPECT_TRUE(HasError(SafetensorsModel::Open(dir).status(), StatusCode::kInvalidArgument,
                         {"weight_map"}));
    WriteBytes(dir + "/model.safetensors.index.json",
               R"({"weight_map": {"a": "../escape.safetensors"}})");
    EXPECT_TRUE(HasError(SafetensorsModel::Open(dir).status(), StatusCode::kInvalidArgument,
                         {"weight_map[\"a\"]", "file name"}));
  }
  {
    const std::string dir = testing::ScratchDir() + "/duplicate";
    std::filesystem::create_directories(dir);
    WriteBytes(dir + "/a.safetensors", Shard1());
    WriteBytes(dir + "/b.safetensors", Shard1());
    EXPECT_TRUE(HasError(SafetensorsModel::Open(dir).status(), StatusCode::kInvalidArgument,
                         {"'embed'", "appears in both"}));
  }
  {
    const std::string dir = testing::ScratchDir() + "/corrupt_shard";
    std::filesystem::create_directories(dir);
    WriteBytes(dir + "/model.safetensors", Shard1().substr(0, 20));
    EXPECT_TRUE(HasError(SafetensorsModel::Open(dir).status(), StatusCode::kDataLoss,
                         {dir + "/model.safetensors"}));
  }
  {
    const std::string dir = testing::ScratchDir() + "/empty";
    std::filesystem::create_directories(dir);
    EXPECT_TRUE(HasError(SafetensorsModel::Open(dir).status(), StatusCode::kNotFound,
                         {dir, "no model.safetensors"}));
    EXPECT_TRUE(HasError(SafetensorsModel::Open(dir + "/nonexistent").status(),
                         StatusCode::kNotFound, {dir + "/nonexistent"}));
  }
}

}  // namespace
}  // namespace loom
