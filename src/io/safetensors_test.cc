#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "io/io_test_util.h"

namespace loom {
namespace {

using testing::FloatBytes;
using testing::HasError;
using testing::MakeSafetensors;
using testing::SafetensorsBytes;

std::string U16Bytes(const std::vector<uint16_t>& v) {
  std::string s(v.size() * 2, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

std::string ValidFile() {
  return MakeSafetensors(
      {{"w", "F32", {2, 3}, FloatBytes({0, 1, 2, 3, 4, 5})},
       {"b", "BF16", {4}, U16Bytes({F32ToBf16(1.f), F32ToBf16(-2.f), F32ToBf16(0.5f), 0})},
       {"scale", "F16", {}, U16Bytes({F32ToF16(3.f)})},
       {"empty", "F32", {0, 4}, ""}},
      R"({"format":"pt"})");
}

TEST(SafetensorsFileTest, OpensAValidFileAndViewsItsBytes) {
  const std::string path = testing::ScratchDir() + "/model.safetensors";
  testing::WriteBytes(path, ValidFile());
  StatusOr<std::shared_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const SafetensorsFile& f = **file;
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"b", "empty", "scale", "w"}));
  EXPECT_EQ(f.metadata().at("format"), "pt");

  const SafetensorsTensorInfo* w = f.Find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->shape, (Shape{2, 3}));
  EXPECT_EQ(w->size_bytes, 24u);
  EXPECT_EQ(f.Find("scale")->shape, (Shape{1}));  // 0-d scalar
  EXPECT_EQ(f.Find("missing"), nullptr);

  StatusOr<Tensor> t = f.GetTensor("w");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->shape(), (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t->data_as<float>()[i], static_cast<float>(i));
  // Zero-copy: the tensor points into the file's bytes at the recorded offset.
  StatusOr<Tensor> b = f.GetTensor("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(static_cast<const char*>(b->data()) - static_cast<const char*>(t->data()),
            static_cast<ptrdiff_t>(f.Find("b")->offset_bytes - w->offset_bytes));
  EXPECT_EQ(b->dtype(), DType::kBF16);
  EXPECT_EQ(Bf16ToF32(b->data_as<uint16_t>()[1]), -2.f);
  StatusOr<Tensor> s = f.GetTensor("scale");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(F16ToF32(s->data_as<uint16_t>()[0]), 3.f);

  EXPECT_TRUE(HasError(f.GetTensor("nope").status(), StatusCode::kNotFound, {path, "'nope'"}));
  EXPECT_TRUE(HasError(f.GetTensor("empty").status(), StatusCode::kInvalidArgument,
                       {path, "'empty'", "zero elements"}));
}

TEST(SafetensorsFileTest, TensorKeepsTheFileAlive) {
  StatusOr<std::shared_ptr<SafetensorsFile>> file =
      SafetensorsFile::OpenFromMemory(ValidFile(), "mem");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  StatusOr<Tensor> t = (*file)->GetTensor("w");
  ASSERT_TRUE(t.ok());
  std::weak_ptr<SafetensorsFile> weak = *file;
  file = InternalError("dropped");
  EXPECT_FALSE(weak.expired());  // the tensor's buffer holds it
  EXPECT_EQ(t->data_as<float>()[5], 5.f);
  *t = Tensor();
  EXPECT_TRUE(weak.expired());
}

TEST(SafetensorsFileTest, MisalignedDataIsCopiedToAlignedMemory) {
  // Header of 7 bytes + 8-byte length: data starts at byte 15, so an F32 at offset 0 is
  // misaligned for float reads.
  std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  while ((8 + header.size()) % 4 != 3) header += ' ';
  StatusOr<std::shared_ptr<SafetensorsFile>> file =
      SafetensorsFile::OpenFromMemory(SafetensorsBytes(header, FloatBytes({1.5f, -7.f})), "mem");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  StatusOr<Tensor> t = (*file)->GetTensor("x");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()) % 4, 0u);
  EXPECT_EQ(t->data_as<float>()[0], 1.5f);
  EXPECT_EQ(t->data_as<float>()[1], -7.f);
}

TEST(SafetensorsFileTest, MissingFileIsNotFound) {
  const std::string path = testing::ScratchDir() + "/absent.safetensors";
  EXPECT_TRUE(HasError(SafetensorsFile::Open(path).status(), StatusCode::kNotFound, {path}));
}

struct BadFileCase {
  const char* name;
  std::string bytes;
  StatusCode code;
  std::vector<std::string> phrases;
};

std::string Entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

std::vector<BadFileCase> BadFiles() {
  const std::string f8 = FloatBytes({1, 2});  // 8 bytes of data
  std::string valid = ValidFile();
  return {
      {"empty", "", StatusCode::kDataLoss, {"too small", "empty or truncated"}},
      {"truncated_header_length",
       std::string("\x10\x00\x00", 3),
       StatusCode::kDataLoss,
       {"too small"}},
      {"header_past_end",
       testing::Le64(4096) + "{}",
       StatusCode::kDataLoss,
       {"header length 4096 runs past the end of the file"}},
      {"header_absurd",
       testing::Le64(uint64_t{1} << 40) + "{}",
       StatusCode::kInvalidArgument,
       {"exceeds the limit"}},
      {"invalid_json",
       SafetensorsBytes("{\"x\": {", ""),
       StatusCode::kInvalidArgument,
       {"invalid JSON"}},
      {"not_an_object",
       SafetensorsBytes("[1, 2]", ""),
       StatusCode::kInvalidArgument,
       {"not a JSON object"}},
      {"unsupported_dtype_i64",
       SafetensorsBytes("{" + Entry("ids", "I64", "[1]", "[0,8]") + "}", f8),
       StatusCode::kUnimplemented,
       {"'ids'", "dtype I64 is not supported"}},
      {"unsupported_dtype_f8_e5m2",
       SafetensorsBytes("{" + Entry("w8", "F8_E5M2", "[8]", "[0,8]") + "}", f8),
       StatusCode::kUnimplemented,
       {"'w8'", "F8_E5M2", "F8_E4M3"}},
      {"unknown_dtype",
       SafetensorsBytes("{" + Entry("q", "Q7", "[2]", "[0,8]") + "}", f8),
       StatusCode::kInvalidArgument,
       {"'q'", "unknown dtype \"Q7\""}},
      {"offsets_past_end",
       SafetensorsBytes("{" + Entry("a", "F32", "[4]", "[0,16]") + "}", f8),
       StatusCode::kDataLoss,
       {"'a'", "run past the end of the data"}},
      {"truncated_data",
       valid.substr(0, valid.size() - 3),
       StatusCode::kDataLoss,
       {"run past the end of the data", "truncated"}},
      {"size_mismatch",
       SafetensorsBytes("{" + Entry("a", "F32", "[3]", "[0,8]") + "}", f8),
       StatusCode::kInvalidArgument,
       {"'a'", "size mismatch"}},
      {"reversed_offsets",
       SafetensorsBytes("{" + Entry("a", "F32", "[0]", "[8,0]") + "}", f8),
       StatusCode::kInvalidArgument,
       {"reversed"}},
      {"overlapping",
       SafetensorsBytes(
           "{" + Entry("a", "F32", "[2]", "[0,8]") + "," + Entry("b", "F32", "[1]", "[4,8]") + "}",
           f8),
       StatusCode::kInvalidArgument,
       {"'a'", "'b'", "overlap"}},
      {"missing_offsets",
       SafetensorsBytes(R"({"a":{"dtype":"F32","shape":[2]}})", f8),
       StatusCode::kInvalidArgument,
       {"'a'", "data_offsets"}},
      {"negative_dim",
       SafetensorsBytes("{" + Entry("a", "F32", "[-2]", "[0,8]") + "}", f8),
       StatusCode::kInvalidArgument,
       {"shape entries"}},
      {"five_dims",
       SafetensorsBytes("{" + Entry("a", "F32", "[1,1,1,1,2]", "[0,8]") + "}", f8),
       StatusCode::kUnimplemented,
       {"'a'", "at most 4"}},
      {"bad_metadata",
       SafetensorsBytes(R"({"__metadata__":{"format":1}})", ""),
       StatusCode::kInvalidArgument,
       {"__metadata__"}},
      {"entry_not_object",
       SafetensorsBytes(R"({"a":5})", ""),
       StatusCode::kInvalidArgument,
       {"'a'", "not a JSON object"}},
  };
}

TEST(SafetensorsFileTest, BadFilesGiveAStatusNamingFileAndProblem) {
  const std::string dir = testing::ScratchDir();
  for (const BadFileCase& c : BadFiles()) {
    SCOPED_TRACE(c.name);
    const std::string path = dir + "/" + c.name + ".safetensors";
    testing::WriteBytes(path, c.bytes);
    std::vector<std::string> phrases = c.phrases;
    phrases.push_back(path);
    EXPECT_TRUE(HasError(SafetensorsFile::Open(path).status(), c.code, phrases));
  }
}

TEST(SafetensorsFileTest, EveryTruncationOfAValidFileFails) {
  const std::string valid = ValidFile();
  ASSERT_TRUE(SafetensorsFile::OpenFromMemory(valid, "full").ok());
  for (size_t n = 0; n < valid.size(); ++n) {
    EXPECT_FALSE(SafetensorsFile::OpenFromMemory(valid.substr(0, n), "cut").ok()) << n;
  }
}

}  // namespace
}  // namespace loom
