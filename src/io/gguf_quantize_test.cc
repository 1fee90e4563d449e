#include "io/gguf_quantize.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>

#include "io/gguf_writer.h"
#include "io/io_test_util.h"
#include "tensor/quant.h"

namespace loom {
namespace {

using testing::HasError;
using testing::ScratchDir;

// A llama-shaped GGUF of `layers` layers, matrices in `dtype` (random N(0, 0.1) values), norms in
// f32; with `tied`, no output.weight. `cols` is the hidden size.
struct ModelSpec {
  int layers = 8;
  DType dtype = DType::kF16;
  bool tied = false;
  int64_t cols = 256;
  int experts = 0;
  int heads = 8, kv_heads = 2;
};

std::string Payload(DType dtype, const Shape& shape, uint32_t seed) {
  const int64_t cols = shape[shape.ndim() - 1], rows = shape.numel() / cols;
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 0.1f);
  std::vector<float> row(static_cast<size_t>(cols));
  std::string bytes(static_cast<size_t>(rows) * RowBytes(dtype, cols), '\0');
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    QuantizeRow(dtype, row.data(), bytes.data() + r * RowBytes(dtype, cols), cols);
  }
  return bytes;
}

std::shared_ptr<GgufFile> WriteModel(const std::string& path, const ModelSpec& m) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", "tiny");
  w.SetU32("llama.block_count", static_cast<uint32_t>(m.layers));
  w.SetU32("llama.attention.head_count", static_cast<uint32_t>(m.heads));
  w.SetU32("llama.attention.head_count_kv", static_cast<uint32_t>(m.kv_heads));
  if (m.experts > 0) w.SetU32("llama.expert_count", static_cast<uint32_t>(m.experts));
  w.SetU32("general.file_type", 1);
  w.SetStringArray("tokenizer.ggml.tokens", {"a", "b", "c"});
  uint32_t seed = 1;
  auto add = [&](const std::string& name, DType dtype, const Shape& shape) {
    w.AddTensor(name, dtype, shape, Payload(dtype, shape, seed++));
  };
  const int64_t h = m.cols;
  add("token_embd.weight", m.dtype, Shape{16, h});
  for (int i = 0; i < m.layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", DType::kF32, Shape{h});
    add(b + "attn_q.weight", m.dtype, Shape{h, h});
    add(b + "attn_k.weight", m.dtype, Shape{h / 4, h});
    add(b + "attn_v.weight", m.dtype, Shape{h / 4, h});
    add(b + "attn_output.weight", m.dtype, Shape{h, h});
    add(b + "ffn_norm.weight", DType::kF32, Shape{h});
    if (m.experts > 0) {
      add(b + "ffn_gate_inp.weight", DType::kF32, Shape{m.experts, h});
      add(b + "ffn_gate_exps.weight", m.dtype, Shape{m.experts, 2 * h, h});
      add(b + "ffn_up_exps.weight", m.dtype, Shape{m.experts, 2 * h, h});
      add(b + "ffn_down_exps.weight", m.dtype, Shape{m.experts, h, 2 * h});
    } else {
      add(b + "ffn_gate.weight", m.dtype, Shape{2 * h, h});
      add(b + "ffn_up.weight", m.dtype, Shape{2 * h, h});
      add(b + "ffn_down.weight", m.dtype, Shape{h, 2 * h});
    }
  }
  add("output_norm.weight", DType::kF32, Shape{h});
  if (!m.tied) add("output.weight", m.dtype, Shape{16, h});
  EXPECT_TRUE(w.WriteFile(path).ok());
  StatusOr<std::shared_ptr<GgufFile>> f = GgufFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? *f : nullptr;
}

GgufQuantizeOptions Options(const std::string& scheme) {
  GgufQuantizeOptions o;
  StatusOr<QuantScheme> s = ParseQuantScheme(scheme);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (s.ok()) o.scheme = *s;
  return o;
}

std::map<std::string, DType> PlanOf(const GgufFile& f, const GgufQuantizeOptions& o) {
  StatusOr<std::vector<TensorQuantPlan>> plan = PlanGgufQuantization(f, o);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  std::map<std::string, DType> out;
  if (plan.ok()) {
    for (const TensorQuantPlan& p : *plan) out[p.name] = p.to;
  }
  return out;
}

TEST(GgufQuantizeTest, ParsesSchemeNames) {
  EXPECT_EQ(ParseQuantScheme("q4_k_m")->file_type, 15u);
  EXPECT_EQ(ParseQuantScheme("Q4_K")->name, "Q4_K_M");
  EXPECT_EQ(ParseQuantScheme("Q5_K")->base, DType::kQ5_K);
  EXPECT_EQ(ParseQuantScheme("Q6_K")->file_type, 18u);
  EXPECT_EQ(ParseQuantScheme("bf16")->file_type, 32u);
  EXPECT_EQ(ParseQuantScheme("Q8_0")->base, DType::kQ8_0);
  EXPECT_TRUE(HasError(ParseQuantScheme("Q3_K_M").status(), StatusCode::kInvalidArgument,
                       {"'Q3_K_M'", "Q4_K_M", "Q6_K", "BF16"}));
}

// llama.cpp's Q4_K_M mixture on 8 layers: use_more_bits picks layers 0, 3, 6 and 7 (i < 1,
// i >= 7, (i - 1) % 3 == 2) for q6_K attn_v and ffn_down; output q6_K; the rest q4_K; norms keep
// f32.
TEST(GgufQuantizeTest, Q4KMMixtureMatchesLlamaCpps) {
  const std::string dir = ScratchDir();
  auto f = WriteModel(dir + "/m.gguf", ModelSpec{});
  ASSERT_NE(f, nullptr);
  std::map<std::string, DType> plan = PlanOf(*f, Options("Q4_K_M"));
  EXPECT_EQ(plan["output.weight"], DType::kQ6_K);
  EXPECT_EQ(plan["token_embd.weight"], DType::kQ4_K);
  EXPECT_EQ(plan["output_norm.weight"], DType::kF32);
  for (int i = 0; i < 8; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const DType more = (i == 0 || i == 3 || i == 6 || i == 7) ? DType::kQ6_K : DType::kQ4_K;
    EXPECT_EQ(plan[b + "attn_v.weight"], more) << i;
    EXPECT_EQ(plan[b + "ffn_down.weight"], more) << i;
    for (const char* t : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"}) {
      EXPECT_EQ(plan[b + t + ".weight"], DType::kQ4_K) << b << t;
    }
    EXPECT_EQ(plan[b + "attn_norm.weight"], DType::kF32);
  }
  // Q5_K_M: the same layers q6_K, the rest q5_K.
  plan = PlanOf(*f, Options("Q5_K_M"));
  EXPECT_EQ(plan["blk.3.ffn_down.weight"], DType::kQ6_K);
  EXPECT_EQ(plan["blk.4.ffn_down.weight"], DType::kQ5_K);
  EXPECT_EQ(plan["blk.4.attn_q.weight"], DType::kQ5_K);
  // Q4_K_S: the first 4 attn_v and the first eighth of ffn_down q5_K.
  plan = PlanOf(*f, Options("Q4_K_S"));
  EXPECT_EQ(plan["blk.3.attn_v.weight"], DType::kQ5_K);
  EXPECT_EQ(plan["blk.4.attn_v.weight"], DType::kQ4_K);
  EXPECT_EQ(plan["blk.0.ffn_down.weight"], DType::kQ5_K);
  EXPECT_EQ(plan["blk.1.ffn_down.weight"], DType::kQ4_K);
  // Q8_0 keeps the output q8_0; --pure puts every matrix at the base type.
  plan = PlanOf(*f, Options("Q8_0"));
  EXPECT_EQ(plan["output.weight"], DType::kQ8_0);
  GgufQuantizeOptions pure = Options("Q4_K_M");
  pure.pure = true;
  plan = PlanOf(*f, pure);
  EXPECT_EQ(plan["output.weight"], DType::kQ4_K);
  EXPECT_EQ(plan["blk.0.attn_v.weight"], DType::kQ4_K);
  // Plain targets convert every matrix and nothing else.
  plan = PlanOf(*f, Options("BF16"));
  EXPECT_EQ(plan["output.weight"], DType::kBF16);
  EXPECT_EQ(plan["blk.0.attn_norm.weight"], DType::kF32);
}

TEST(GgufQuantizeTest, TiedEmbeddingsGetTheOutputsType) {
  const std::string dir = ScratchDir();
  auto f = WriteModel(dir + "/m.gguf", {.tied = true});
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(PlanOf(*f, Options("Q4_K_M"))["token_embd.weight"], DType::kQ6_K);
  EXPECT_EQ(PlanOf(*f, Options("Q4_0"))["token_embd.weight"], DType::kQ6_K);
}

TEST(GgufQuantizeTest, RowsTheBlocksDoNotDivideFallBack) {
  const std::string dir = ScratchDir();
  // Rows of 96: not a multiple of 256, so the K-quants fall back to q8_0.
  auto f = WriteModel(dir + "/m.gguf", {.layers = 2, .cols = 96});
  ASSERT_NE(f, nullptr);
  std::map<std::string, DType> plan = PlanOf(*f, Options("Q4_K_M"));
  EXPECT_EQ(plan["blk.0.attn_q.weight"], DType::kQ8_0);
  EXPECT_EQ(plan["output.weight"], DType::kQ8_0);
  EXPECT_EQ(PlanOf(*f, Options("Q4_0"))["blk.0.attn_q.weight"], DType::kQ4_0);
}

// Mixtral-shaped (8 experts): attn_v / attn_k q8_0, attn_output q5_K; ffn_down's layer read from
// its name.
TEST(GgufQuantizeTest, EightExpertModelsFollowTheirRules) {
  const std::string dir = ScratchDir();
  auto f = WriteModel(dir + "/m.gguf", {.experts = 8});
  ASSERT_NE(f, nullptr);
  std::map<std::string, DType> plan = PlanOf(*f, Options("Q4_K_M"));
  EXPECT_EQ(plan["blk.2.attn_v.weight"], DType::kQ8_0);
  EXPECT_EQ(plan["blk.2.attn_k.weight"], DType::kQ8_0);
  EXPECT_EQ(plan["blk.2.attn_output.weight"], DType::kQ5_K);
  EXPECT_EQ(plan["blk.3.ffn_down_exps.weight"], DType::kQ6_K);
  EXPECT_EQ(plan["blk.4.ffn_down_exps.weight"], DType::kQ4_K);
  EXPECT_EQ(plan["blk.4.ffn_gate_inp.weight"], DType::kF32);  // the router is not quantized
}

TEST(GgufQuantizeTest, WritesAFileWhoseTensorsAreQuantizeRowsOfTheSource) {
  const std::string dir = ScratchDir();
  auto in = WriteModel(dir + "/in.gguf", {.layers = 2, .dtype = DType::kBF16});
  ASSERT_NE(in, nullptr);
  GgufQuantizeOptions o = Options("Q4_K_M");
  o.threads = 3;
  uint64_t last_done = 0, calls = 0;
  o.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done, last_done);
    EXPECT_LE(done, total);
    last_done = done;
    ++calls;
  };
  StatusOr<GgufQuantizeResult> r = QuantizeGguf(*in, dir + "/out.gguf", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(calls, in->tensors().size());
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.gguf.part"));
  EXPECT_LT(r->output_bytes, r->input_bytes / 3);
  StatusOr<std::shared_ptr<GgufFile>> out = GgufFile::Open(dir + "/out.gguf");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*(*out)->GetInt("general.file_type"), 15);
  EXPECT_EQ(*(*out)->GetInt("general.quantization_version"), 2);
  EXPECT_EQ(*(*out)->GetString("general.name"), "tiny");
  EXPECT_EQ(*(*out)->GetStringArray("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"a", "b", "c"}));
  // llama.cpp's order: tensors outside the layers by name, then each layer's by name; the two keys
  // quantize sets last.
  ASSERT_EQ((*out)->tensors().size(), in->tensors().size());
  EXPECT_EQ((*out)->tensors()[0].name, "output.weight");
  EXPECT_EQ((*out)->tensors()[1].name, "output_norm.weight");
  EXPECT_EQ((*out)->tensors()[2].name, "token_embd.weight");
  EXPECT_EQ((*out)->tensors()[3].name, "blk.0.attn_k.weight");
  EXPECT_EQ((*out)->tensors().back().name, "blk.1.ffn_up.weight");
  const std::vector<std::string>& keys = (*out)->metadata_keys();
  ASSERT_GE(keys.size(), 2u);
  EXPECT_EQ(keys[keys.size() - 2], "general.quantization_version");
  EXPECT_EQ(keys.back(), "general.file_type");
  for (size_t i = 0; i < r->plan.size(); ++i) {
    const TensorQuantPlan& p = r->plan[i];
    const GgufTensorInfo& t = (*out)->tensors()[i];
    EXPECT_EQ(t.name, p.name);
    EXPECT_EQ(t.dtype, p.to) << p.name;
    EXPECT_EQ(t.shape, p.shape) << p.name;
    Tensor src = *in->GetTensor(p.name), dst = *(*out)->GetTensor(p.name);
    const int64_t cols = p.shape[p.shape.ndim() - 1], rows = p.shape.numel() / cols;
    std::vector<float> row(static_cast<size_t>(cols));
    std::string want(static_cast<size_t>(rows) * RowBytes(p.to, cols), '\0');
    for (int64_t r0 = 0; r0 < rows; ++r0) {
      DequantizeRow(p.from, static_cast<const char*>(src.data()) + r0 * RowBytes(p.from, cols),
                    row.data(), cols);
      QuantizeRow(p.to, row.data(), want.data() + r0 * RowBytes(p.to, cols), cols);
    }
    ASSERT_EQ(std::string(static_cast<const char*>(dst.data()), dst.nbytes()), want) << p.name;
  }
}

TEST(GgufQuantizeTest, RequantizingNeedsItsFlag) {
  const std::string dir = ScratchDir();
  auto in = WriteModel(dir + "/in.gguf", {.layers = 2, .dtype = DType::kQ8_0});
  ASSERT_NE(in, nullptr);
  GgufQuantizeOptions o = Options("Q4_K_M");
  EXPECT_TRUE(HasError(QuantizeGguf(*in, dir + "/out.gguf", o).status(),
                       StatusCode::kInvalidArgument,
                       {"output.weight", "already q8_0", "to q6_K", "--allow-requantize"}));
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.gguf"));
  // Q8_0 -> Q8_0 copies the matrices (the output stays q8_0): nothing to requantize.
  EXPECT_TRUE(QuantizeGguf(*in, dir + "/same.gguf", Options("Q8_0")).ok());
  o.allow_requantize = true;
  StatusOr<GgufQuantizeResult> r = QuantizeGguf(*in, dir + "/out.gguf", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*GgufFile::Open(dir + "/out.gguf"))->FindTensor("blk.1.attn_q.weight")->dtype,
            DType::kQ4_K);
}

TEST(GgufQuantizeTest, AnUnwritablePathIsAnErrorNamingIt) {
  const std::string dir = ScratchDir();
  auto in = WriteModel(dir + "/in.gguf", {.layers = 1});
  ASSERT_NE(in, nullptr);
  EXPECT_TRUE(HasError(QuantizeGguf(*in, dir + "/no/such/dir/out.gguf", Options("Q8_0")).status(),
                       StatusCode::kInvalidArgument, {"no/such/dir/out.gguf", "cannot create"}));
}

}  // namespace
}  // namespace loom
