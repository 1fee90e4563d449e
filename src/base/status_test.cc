#include "base/status.h"

#include <gtest/gtest.h>

#include "base/mapped_file.h"

namespace loom {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(OkStatus().ok());
  Status s = NotFoundError("tensor x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "NOT_FOUND: tensor x");
  EXPECT_EQ(s.WithContext("model.gguf").message(), "model.gguf: tensor x");
}

TEST(StatusTest, StatusOrPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  StatusOr<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd: 3");
}

TEST(StatusTest, CheckAbortsWithMessage) {
  EXPECT_DEATH({ CHECK_EQ(1, 2) << "numbers differ"; }, "CHECK failed.*numbers differ");
}

TEST(MappedFileTest, MissingFileNamesPath) {
  auto f = MappedFile::Open("/nonexistent/loom.bin");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("/nonexistent/loom.bin"), std::string::npos);
}

TEST(MappedFileTest, DirectoryIsAnError) {
  auto f = MappedFile::Open("/tmp");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("directory"), std::string::npos);
}

}  // namespace
}  // namespace loom
