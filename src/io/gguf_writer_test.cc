#include "io/gguf_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "base/mapped_file.h"
#include "io/gguf.h"
#include "io/io_test_util.h"
#include "support/test_data.h"

namespace loom {
namespace {

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

TEST(GgufWriterTest, WritesTheExactGgufV3Layout) {
  // Expected bytes built by hand from the GGUF spec, independent of the reader.
  GgufWriter writer;
  writer.SetU32("a", 7);
  writer.AddTensor("t", DType::kF32, Shape{2, 3}, testing::FloatBytes({0, 1, 2, 3, 4, 5}));
  std::string expected("GGUF", 4);
  expected += std::string("\x03\0\0\0", 4);         // version 3
  expected += testing::Le64(1) + testing::Le64(1);  // 1 tensor, 1 kv
  expected += testing::Le64(1) + "a" + std::string("\x04\0\0\0", 4) + std::string("\x07\0\0\0", 4);
  expected += testing::Le64(1) + "t" + std::string("\x02\0\0\0", 4);  // name, n_dims 2
  expected += testing::Le64(3) + testing::Le64(2);                    // ne = [3, 2] (fastest first)
  expected += std::string("\0\0\0\0", 4) + testing::Le64(0);          // f32, offset 0
  expected.append((32 - expected.size() % 32) % 32, '\0');
  expected += testing::FloatBytes({0, 1, 2, 3, 4, 5});
  expected.append((32 - expected.size() % 32) % 32, '\0');
  EXPECT_EQ(writer.Serialize(), expected);
}

TEST(GgufWriterTest, RoundTripsEveryMetadataTypeAndTensorType) {
  GgufWriter writer(64);
  writer.Set("u8", GgufValue::U8(255));
  writer.Set("i8", GgufValue::I8(-128));
  writer.Set("u16", GgufValue::U16(65535));
  writer.Set("i16", GgufValue::I16(-32768));
  writer.SetU32("u32", 4294967295u);
  writer.SetI32("i32", -2147483647 - 1);
  writer.SetU64("u64", UINT64_MAX);
  writer.Set("i64", GgufValue::I64(INT64_MIN));
  writer.SetF32("f32", 1e-5f);
  writer.Set("f64", GgufValue::F64(3.141592653589793));
  writer.SetBool("t", true);
  writer.SetBool("f", false);
  writer.SetString("general.architecture", "llama");
  writer.SetString("empty", "");
  writer.SetStringArray("tokens", {"<unk>", "<s>", "\xe2\x96\x81the", ""});
  writer.SetF32Array("scores", {0.f, -1.5f, 2.25f});
  writer.SetI32Array("types", {2, 3, 1});
  writer.Set("nested", GgufValue::Array(GgufType::kArray,
                                        {GgufValue::I32Array({1, 2}), GgufValue::I32Array({})}));
  writer.SetU32("u32", 11);  // overwrite keeps one key

  struct Spec {
    std::string name;
    DType dtype;
    Shape shape;
  };
  const std::vector<Spec> specs = {
      {"f32", DType::kF32, Shape{3, 5}},           {"f16", DType::kF16, Shape{7}},
      {"bf16", DType::kBF16, Shape{2, 2, 3}},      {"q8_0", DType::kQ8_0, Shape{3, 64}},
      {"q4_0", DType::kQ4_0, Shape{32}},           {"q4_K", DType::kQ4_K, Shape{2, 512}},
      {"q6_K", DType::kQ6_K, Shape{1, 1, 2, 256}}, {"q5_K", DType::kQ5_K, Shape{3, 256}},
  };
  std::vector<std::string> payloads;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& s = specs[i];
    const int64_t cols = s.shape[s.shape.ndim() - 1];
    payloads.push_back(
        RandomBytes(static_cast<size_t>(s.shape.numel() / cols) * RowBytes(s.dtype, cols),
                    static_cast<uint32_t>(i)));
    writer.AddTensor(s.name, s.dtype, s.shape, payloads.back());
  }

  const std::string path = testing::ScratchDir() + "/all.gguf";
  ASSERT_TRUE(writer.WriteFile(path).ok());
  StatusOr<std::shared_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const GgufFile& f = **file;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(*f.GetInt("general.alignment"), 64);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.metadata_keys().front(), "general.alignment");
  EXPECT_EQ(*f.GetInt("u8"), 255);
  EXPECT_EQ(*f.GetInt("i8"), -128);
  EXPECT_EQ(*f.GetInt("u16"), 65535);
  EXPECT_EQ(*f.GetInt("i16"), -32768);
  EXPECT_EQ(*f.GetInt("u32"), 11);
  EXPECT_EQ(*f.GetInt("i32"), INT32_MIN);
  EXPECT_EQ(f.Find("u64")->raw_unsigned(), UINT64_MAX);
  EXPECT_EQ(*f.GetInt("i64"), INT64_MIN);
  EXPECT_EQ(*f.GetFloat("f32"), static_cast<double>(1e-5f));
  EXPECT_EQ(f.Find("f32")->type(), GgufType::kF32);
  EXPECT_EQ(*f.GetFloat("f64"), 3.141592653589793);
  EXPECT_TRUE(*f.GetBool("t"));
  EXPECT_FALSE(*f.GetBool("f"));
  EXPECT_EQ(f.architecture(), "llama");
  EXPECT_EQ(*f.GetString("empty"), "");
  EXPECT_EQ(*f.GetStringArray("tokens"),
            (std::vector<std::string>{"<unk>", "<s>", "\xe2\x96\x81the", ""}));
  EXPECT_EQ(*f.GetFloatArray("scores"), (std::vector<float>{0.f, -1.5f, 2.25f}));
  EXPECT_EQ(*f.GetIntArray("types"), (std::vector<int64_t>{2, 3, 1}));
  const GgufValue& nested = *f.Find("nested");
  ASSERT_EQ(nested.elements().size(), 2u);
  EXPECT_EQ(*nested.elements()[0].AsIntArray(), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(nested.elements()[1].elements().empty());

  ASSERT_EQ(f.tensors().size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(specs[i].name);
    const GgufTensorInfo& info = f.tensors()[i];
    EXPECT_EQ(info.name, specs[i].name);
    EXPECT_EQ(info.dtype, specs[i].dtype);
    EXPECT_EQ(info.shape, specs[i].shape);
    EXPECT_EQ(info.size_bytes, payloads[i].size());
    EXPECT_EQ((info.offset_bytes - f.data_offset()) % 64, 0u);
    StatusOr<Tensor> t = f.GetTensor(specs[i].name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->nbytes(), payloads[i].size());
    EXPECT_EQ(std::string(static_cast<const char*>(t->data()), t->nbytes()), payloads[i]);
  }
}

// Re-writing a llama.cpp-produced file's metadata and tensors with GgufWriter reproduces it
// byte for byte: the writer follows the same layout rules as llama.cpp's gguf writer.
void ExpectRewriteIsByteIdentical(const std::string& path) {
  LOOM_NEED_FILE(path);
  StatusOr<std::shared_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const GgufFile& f = **file;
  GgufWriter writer(f.alignment());
  for (const std::string& key : f.metadata_keys()) writer.Set(key, *f.Find(key));
  for (const GgufTensorInfo& info : f.tensors()) {
    StatusOr<Tensor> t = f.GetTensor(info.name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    writer.AddTensor(info.name, *t);
  }
  StatusOr<MappedFile> original = MappedFile::Open(path);
  ASSERT_TRUE(original.ok());
  const std::string rewritten = writer.Serialize();
  const std::string_view orig(reinterpret_cast<const char*>(original->data()), original->size());
  ASSERT_EQ(rewritten.size(), orig.size());
  EXPECT_TRUE(rewritten == orig);
}

TEST(GgufWriterTest, RewritesStories260KByteIdentically) {
  ExpectRewriteIsByteIdentical(LOOM_SHARED_DIR "/data/models/stories260K-gguf/stories260K.gguf");
}

TEST(GgufWriterTest, RewritesLlama2TinyRandomByteIdentically) {
  ExpectRewriteIsByteIdentical(LOOM_SHARED_DIR
                               "/data/models/llama-2-tiny-random-gguf/llama-2-tiny-random.gguf");
}

}  // namespace
}  // namespace loom
