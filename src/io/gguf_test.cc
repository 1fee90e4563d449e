#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "base/mapped_file.h"
#include "io/gguf_writer.h"
#include "io/io_test_util.h"
#include "support/test_data.h"

namespace loom {
namespace {

using testing::HasError;

const char* kStories = LOOM_SHARED_DIR "/data/models/stories260K-gguf/stories260K.gguf";
const char* kStoriesBin = LOOM_SHARED_DIR "/data/models/stories260K-llama2c/stories260K.bin";
const char* kTinyRandom =
    LOOM_SHARED_DIR "/data/models/llama-2-tiny-random-gguf/llama-2-tiny-random.gguf";

TEST(GgufFileTest, ReadsStories260K) {
  LOOM_NEED_FILE(kStories);
  StatusOr<std::shared_ptr<GgufFile>> file = GgufFile::Open(kStories);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const GgufFile& f = **file;
  // Expected values: PROVENANCE.txt next to the file.
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.architecture(), "llama");
  EXPECT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(*f.GetInt("llama.context_length"), 2048);
  EXPECT_EQ(*f.GetInt("llama.embedding_length"), 64);
  EXPECT_EQ(*f.GetInt("llama.feed_forward_length"), 172);
  EXPECT_EQ(*f.GetInt("llama.attention.head_count"), 8);
  EXPECT_EQ(*f.GetInt("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(*f.GetInt("llama.block_count"), 5);
  EXPECT_EQ(*f.GetInt("llama.rope.dimension_count"), 8);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.GetFloat("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(*f.GetInt("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(*f.GetInt("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(*f.GetInt("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_EQ(*f.GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.GetStringArray("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(f.GetFloatArray("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(f.GetIntArray("tokenizer.ggml.token_type")->size(), 512u);
  EXPECT_FALSE(f.Has("tokenizer.chat_template"));

  for (const GgufTensorInfo& t : f.tensors()) EXPECT_EQ(t.dtype, DType::kF32) << t.name;
  EXPECT_EQ(f.FindTensor("token_embd.weight")->shape, (Shape{512, 64}));
  EXPECT_EQ(f.FindTensor("output.weight")->shape, (Shape{512, 64}));
  EXPECT_EQ(f.FindTensor("blk.0.attn_norm.weight")->shape, (Shape{64}));
  EXPECT_EQ(f.FindTensor("blk.4.ffn_gate.weight")->shape, (Shape{172, 64}));
  EXPECT_EQ(f.FindTensor("blk.4.ffn_down.weight")->shape, (Shape{64, 172}));
  EXPECT_EQ(f.FindTensor("blk.0.attn_k.weight")->shape, (Shape{32, 64}));  // 4 kv heads x 8

  // The weights are byte-equal to the llama2.c checkpoint (PROVENANCE.txt): after its 28-byte
  // header come token_embedding [512, 64] then rms_att_weight [5, 64].
  if (!testing::OptionalFile(kStoriesBin)) return;
  StatusOr<MappedFile> bin = MappedFile::Open(kStoriesBin);
  ASSERT_TRUE(bin.ok());
  StatusOr<Tensor> embd = f.GetTensor("token_embd.weight");
  ASSERT_TRUE(embd.ok());
  EXPECT_EQ(std::memcmp(embd->data(), bin->data() + 28, 512 * 64 * 4), 0);
  const size_t rms_att = 28 + 512 * 64 * 4;
  StatusOr<Tensor> norm0 = f.GetTensor("blk.0.attn_norm.weight");
  StatusOr<Tensor> norm4 = f.GetTensor("blk.4.attn_norm.weight");
  ASSERT_TRUE(norm0.ok() && norm4.ok());
  EXPECT_EQ(std::memcmp(norm0->data(), bin->data() + rms_att, 64 * 4), 0);
  EXPECT_EQ(std::memcmp(norm4->data(), bin->data() + rms_att + 4 * 64 * 4, 64 * 4), 0);
}

TEST(GgufFileTest, ReadsLlama2TinyRandomF16) {
  LOOM_NEED_FILE(kTinyRandom);
  StatusOr<std::shared_ptr<GgufFile>> file = GgufFile::Open(kTinyRandom);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const GgufFile& f = **file;
  EXPECT_EQ(f.architecture(), "llama");
  EXPECT_EQ(f.tensors().size(), 12u);
  EXPECT_EQ(*f.GetInt("llama.embedding_length"), 8);
  EXPECT_EQ(*f.GetInt("llama.block_count"), 1);
  EXPECT_EQ(*f.GetInt("llama.feed_forward_length"), 32);
  EXPECT_EQ(*f.GetInt("llama.attention.head_count"), 2);
  EXPECT_EQ(*f.GetInt("llama.context_length"), 4096);
  EXPECT_EQ(f.GetStringArray("tokenizer.ggml.tokens")->size(), 32000u);
  const GgufTensorInfo* embd = f.FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->dtype, DType::kF16);
  EXPECT_EQ(embd->shape, (Shape{32000, 8}));
  EXPECT_EQ(f.FindTensor("blk.0.attn_norm.weight")->dtype, DType::kF32);
  StatusOr<Tensor> t = f.GetTensor("token_embd.weight");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->nbytes(), 32000u * 8 * 2);
}

// --- bad files ---

class Bytes {
 public:
  Bytes& U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) s_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  Bytes& U64(uint64_t v) {
    s_ += testing::Le64(v);
    return *this;
  }
  Bytes& Str(const std::string& v) {
    U64(v.size());
    s_ += v;
    return *this;
  }
  Bytes& Raw(const std::string& v) {
    s_ += v;
    return *this;
  }
  Bytes& Pad(size_t alignment) {
    s_.append((alignment - s_.size() % alignment) % alignment, '\0');
    return *this;
  }
  // A tensor-info record.
  Bytes& Tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t off) {
    Str(name).U32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) U64(n);
    return U32(type).U64(off);
  }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

Bytes Header(uint64_t num_tensors, uint64_t num_kv, uint32_t version = 3) {
  Bytes b;
  b.Raw("GGUF").U32(version).U64(num_tensors).U64(num_kv);
  return b;
}

// A valid file whose tensor data is an exact multiple of 32 bytes, so the file has no trailing
// padding and every proper prefix is truncated.
std::string ValidGguf() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", {"a", "bb"});
  w.SetF32("x", 2.f);
  w.AddTensor("a", DType::kF32, Shape{2, 4}, testing::FloatBytes({1, 2, 3, 4, 5, 6, 7, 8}));
  w.AddTensor("b", DType::kF32, Shape{8}, testing::FloatBytes({1, 2, 3, 4, 5, 6, 7, 8}));
  return w.Serialize();
}

struct BadFileCase {
  const char* name;
  std::string bytes;
  StatusCode code;
  std::vector<std::string> phrases;
};

std::vector<BadFileCase> BadFiles() {
  const std::string data32(32, '\0');
  const std::string valid = ValidGguf();
  return {
      {"empty", "", StatusCode::kDataLoss, {"too small", "empty or truncated"}},
      {"wrong_magic",
       Bytes().Raw("GGJT").U32(3).U64(0).U64(0).str(),
       StatusCode::kInvalidArgument,
       {"wrong magic"}},
      {"safetensors_not_gguf",
       testing::MakeSafetensors({}),
       StatusCode::kInvalidArgument,
       {"not a GGUF file"}},
      {"version_1", Header(0, 0, 1).str(), StatusCode::kUnimplemented, {"GGUF version 1"}},
      {"version_7",
       Header(0, 0, 7).str(),
       StatusCode::kInvalidArgument,
       {"unsupported GGUF version 7"}},
      {"big_endian", Header(0, 0, 0x03000000).str(), StatusCode::kUnimplemented, {"big-endian"}},
      {"truncated_header",
       Bytes().Raw("GGUF").U32(3).U32(0).str(),
       StatusCode::kDataLoss,
       {"truncated", "tensor count"}},
      {"tensor_count_absurd",
       Header(uint64_t{1} << 40, 0).Raw(data32).str(),
       StatusCode::kInvalidArgument,
       {"tensor count 1099511627776 is absurd"}},
      {"kv_count_absurd",
       Header(0, 1000).Raw(data32).str(),
       StatusCode::kInvalidArgument,
       {"metadata count 1000 is absurd"}},
      {"string_length_absurd",
       Header(0, 1).U64(uint64_t{1} << 50).Raw(data32).str(),
       StatusCode::kDataLoss,
       {"metadata key #0", "string length 1125899906842624"}},
      {"value_string_length_absurd",
       Header(0, 1).Str("k").U32(8).U64(999).Raw("abc").str(),
       StatusCode::kDataLoss,
       {"metadata 'k'", "string length 999"}},
      {"unknown_value_type",
       Header(0, 1).Str("k").U32(13).Raw(data32).str(),
       StatusCode::kInvalidArgument,
       {"metadata 'k'", "unknown value type 13"}},
      {"array_length_absurd",
       Header(0, 1).Str("k").U32(9).U32(5).U64(1000).Raw(data32).str(),
       StatusCode::kDataLoss,
       {"metadata 'k'", "array length 1000"}},
      {"array_length_over_cap",
       Header(0, 1).Str("k").U32(9).U32(0).U64(uint64_t{1} << 25).Raw(data32).str(),
       StatusCode::kInvalidArgument,
       {"metadata 'k'", "array length 33554432 is absurd"}},
      {"arrays_too_deep",
       Header(0, 1)
           .Str("k")
           .U32(9)
           .U32(9)
           .U64(1)
           .U32(9)
           .U64(1)
           .U32(9)
           .U64(1)
           .U32(9)
           .U64(1)
           .U32(0)
           .U64(0)
           .Raw(data32)
           .str(),
       StatusCode::kInvalidArgument,
       {"metadata 'k'", "nested deeper than 4"}},
      {"bad_bool",
       Header(0, 1).Str("k").U32(7).Raw("\x02").str(),
       StatusCode::kInvalidArgument,
       {"metadata 'k'", "bool value 2"}},
      {"duplicate_key",
       Header(0, 2).Str("k").U32(0).Raw("a").Str("k").U32(0).Raw("b").str(),
       StatusCode::kInvalidArgument,
       {"duplicate metadata key 'k'"}},
      {"bad_alignment",
       Header(0, 1).Str("general.alignment").U32(4).U32(3).str(),
       StatusCode::kInvalidArgument,
       {"general.alignment 3"}},
      {"unsupported_type_q5_0",
       Header(1, 0).Tensor("blk.0.w", {32}, 6, 0).Pad(32).Raw(data32).str(),
       StatusCode::kUnimplemented,
       {"'blk.0.w'", "q5_0", "not support"}},
      {"unknown_type",
       Header(1, 0).Tensor("w", {32}, 99, 0).Pad(32).Raw(data32).str(),
       StatusCode::kUnimplemented,
       {"'w'", "unknown(99)"}},
      {"five_dims",
       Header(1, 0).Tensor("w", {1, 1, 1, 1, 8}, 0, 0).Pad(32).Raw(data32).str(),
       StatusCode::kInvalidArgument,
       {"'w'", "5 dims"}},
      {"zero_dims",
       Header(1, 0).Tensor("w", {}, 0, 0).Pad(32).Raw(data32).str(),
       StatusCode::kInvalidArgument,
       {"'w'", "0 dims"}},
      {"absurd_dim",
       Header(1, 0).Tensor("w", {uint64_t{1} << 62}, 0, 0).Pad(32).str(),
       StatusCode::kInvalidArgument,
       {"'w'", "is absurd"}},
      {"absurd_numel",
       Header(1, 0).Tensor("w", {1u << 30, 1u << 30}, 0, 0).Pad(32).str(),
       StatusCode::kInvalidArgument,
       {"'w'", "element count"}},
      {"absurd_numel_beside_a_zero_dim",  // found by fuzz_gguf: empty, yet products overflow
       Header(1, 0).Tensor("w", {uint64_t{1} << 41, uint64_t{1} << 41, 0}, 0, 0).Pad(32).str(),
       StatusCode::kInvalidArgument,
       {"'w'", "element count"}},
      {"row_not_a_block_multiple",
       Header(1, 0).Tensor("q", {33}, 8, 0).Pad(32).Raw(data32 + data32).str(),
       StatusCode::kInvalidArgument,
       {"'q'", "not a multiple of the q8_0 block size 32"}},
      {"unaligned_offset",
       Header(1, 0).Tensor("w", {4}, 0, 4).Pad(32).Raw(data32).str(),
       StatusCode::kInvalidArgument,
       {"'w'", "offset 4", "alignment 32"}},
      {"tensor_past_end",
       Header(1, 0).Tensor("w", {16}, 0, 0).Pad(32).Raw(data32).str(),
       StatusCode::kDataLoss,
       {"'w'", "runs past the end of the file"}},
      {"truncated_data",
       valid.substr(0, valid.size() - 7),
       StatusCode::kDataLoss,
       {"'b'", "runs past the end of the file", "truncated"}},
      {"overlapping",
       Header(2, 0).Tensor("a", {8}, 0, 0).Tensor("b", {8}, 0, 0).Pad(32).Raw(data32).str(),
       StatusCode::kInvalidArgument,
       {"'a'", "'b'", "overlap"}},
      {"duplicate_tensor",
       Header(2, 0)
           .Tensor("a", {8}, 0, 0)
           .Tensor("a", {8}, 0, 32)
           .Pad(32)
           .Raw(data32 + data32)
           .str(),
       StatusCode::kInvalidArgument,
       {"duplicate tensor name 'a'"}},
  };
}

TEST(GgufFileTest, BadFilesGiveAStatusNamingFileAndProblem) {
  const std::string dir = testing::ScratchDir();
  for (const BadFileCase& c : BadFiles()) {
    SCOPED_TRACE(c.name);
    const std::string path = dir + "/" + c.name + ".gguf";
    testing::WriteBytes(path, c.bytes);
    std::vector<std::string> phrases = c.phrases;
    phrases.push_back(path);
    EXPECT_TRUE(HasError(GgufFile::Open(path).status(), c.code, phrases));
  }
}

TEST(GgufFileTest, HandBuiltMinimalFilesParse) {
  // The builders above produce valid files when the fields are right (so the bad cases fail for
  // the reason they name, not for a builder mistake).
  const std::string data32(32, '\0');
  StatusOr<std::shared_ptr<GgufFile>> ok =
      GgufFile::OpenFromMemory(Header(2, 1)
                                   .Str("general.alignment")
                                   .U32(4)
                                   .U32(64)
                                   .Tensor("a", {8}, 0, 0)
                                   .Tensor("q", {32, 2}, 8, 64)
                                   .Pad(64)
                                   .Raw(data32 + data32 + std::string(68, '\0'))
                                   .str(),
                               "mem");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->alignment(), 64u);
  EXPECT_EQ((*ok)->FindTensor("q")->shape, (Shape{2, 32}));
  EXPECT_EQ((*ok)->FindTensor("q")->size_bytes, 68u);
  EXPECT_TRUE(GgufFile::OpenFromMemory(Header(0, 0, 2).str(), "v2").ok());
}

TEST(GgufFileTest, EveryTruncationOfAValidFileFails) {
  const std::string valid = ValidGguf();
  ASSERT_TRUE(GgufFile::OpenFromMemory(valid, "full").ok());
  for (size_t n = 0; n < valid.size(); ++n) {
    EXPECT_FALSE(GgufFile::OpenFromMemory(valid.substr(0, n), "cut").ok()) << n;
  }
}

TEST(GgufFileTest, AccessorErrorsNameFileAndKey) {
  const std::string path = testing::ScratchDir() + "/m.gguf";
  testing::WriteBytes(path, ValidGguf());
  StatusOr<std::shared_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const GgufFile& f = **file;
  EXPECT_EQ(*f.GetFloat("x"), 2.0);
  EXPECT_TRUE(
      HasError(f.GetInt("missing.key").status(), StatusCode::kNotFound, {path, "'missing.key'"}));
  EXPECT_TRUE(HasError(f.GetInt("general.architecture").status(), StatusCode::kInvalidArgument,
                       {path, "'general.architecture'", "expected an integer, found string"}));
  EXPECT_TRUE(HasError(f.GetFloatArray("tokenizer.ggml.tokens").status(),
                       StatusCode::kInvalidArgument, {path, "found array of string"}));
  EXPECT_TRUE(HasError(f.GetTensor("c").status(), StatusCode::kNotFound, {path, "'c'"}));
  EXPECT_TRUE(HasError(GgufFile::Open(path + ".absent").status(), StatusCode::kNotFound,
                       {path + ".absent"}));
  StatusOr<Tensor> a = f.GetTensor("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->shape(), (Shape{2, 4}));
  EXPECT_EQ(a->data_as<float>()[7], 8.f);
}

}  // namespace
}  // namespace loom
