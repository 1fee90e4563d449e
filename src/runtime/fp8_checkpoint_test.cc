// FP8 checkpoints (model/hf_quantization.h) through LoadModel: the llama golden's projections
// written as F8_E4M3 with their scales, the way Qwen3-*-FP8 (quant_method fp8, 128x128 blocks of
// weight_scale_inv; 16x16 here so the tiny model has several, ragged, blocks) and
// compressed-tensors FP8 (one weight_scale per output row) checkpoints store them. Their rows (64,
// 96) do not hold whole runs of 128 under one scale, so they load as bf16 and must give exactly
// the logits of a bf16 checkpoint of the dequantized values (f8 * scale, rounded to bf16 once).
// A wider random llama (rows of 128 and 256) with 128x128 blocks keeps its weights as fp8 blocks:
// exactly the logits of an f32 checkpoint of the dequantized values (the CPU's fp8 kernels are the
// f32 kernels on the decoded weights). --quantize fp8 is checked the same way. The references are
// computed here independently of the loader; bad checkpoints fail naming the tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "io/hf_fp8_quantize.h"
#include "io/io_test_util.h"
#include "io/json_file.h"
#include "io/safetensors_model.h"
#include "model/model.h"
#include "runtime/golden_models.h"
#include "tensor/quant.h"

namespace loom {
namespace {

using nlohmann::json;

bool IsProjection(const std::string& name) {
  for (const char* p :
       {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}) {
    if (name.find(p) != std::string::npos) return true;
  }
  return false;
}

std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

enum class Scheme { kBlock16, kPerRow, kBlock128 };

// The golden llama's config and tensor names at twice its width (hidden 128, FFN 256, head_dim
// 32), random f32 weights (projections N(0, 0.05), norms near 1): rows of whole fp8 blocks.
void WriteWideLlama(const std::string& dir) {
  const std::filesystem::path src = golden::ModelDir("llama");
  StatusOr<SafetensorsModel> st = SafetensorsModel::Open(src.string());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.f, 0.05f);
  std::vector<testing::StTensor> out;
  for (const std::string& name : st->names()) {
    Tensor t = *st->GetTensor(name);
    std::vector<int64_t> shape;
    int64_t n = 1;
    for (int i = 0; i < t.ndim(); ++i) {
      const int64_t d = t.dim(i);
      shape.push_back(d == 64 ? 128 : d == 96 ? 256 : d == 32 ? 64 : d);
      n *= shape.back();
    }
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = (t.ndim() == 1 ? 1.f : 0.f) + dist(rng);
    out.push_back({name, "F32", shape, Bytes(v.data(), v.size() * 4)});
  }
  json config = *LoadJsonFile((src / "config.json").string());
  config["hidden_size"] = 128;
  config["intermediate_size"] = 256;
  config["head_dim"] = 32;
  testing::WriteBytes(dir + "/config.json", config.dump());
  testing::WriteBytes(dir + "/model.safetensors", testing::MakeSafetensors(out));
}

// Writes the llama in `src` (the golden one, or WriteWideLlama's for kBlock128) as an FP8
// checkpoint (`fp8_dir`) and as the checkpoint of its dequantized weights (`ref_dir`: bf16, f32 for
// kBlock128).
void WriteCheckpoints(Scheme scheme, const std::filesystem::path& src, const std::string& fp8_dir,
                      const std::string& ref_dir) {
  StatusOr<SafetensorsModel> st = SafetensorsModel::Open(src.string());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  std::vector<testing::StTensor> fp8, ref;
  const bool blocks = scheme != Scheme::kPerRow;
  const int br0 = scheme == Scheme::kBlock128 ? 128 : 16;
  for (const std::string& name : st->names()) {
    Tensor t = *st->GetTensor(name);
    ASSERT_EQ(t.dtype(), DType::kF32);
    std::vector<int64_t> shape;
    for (int i = 0; i < t.ndim(); ++i) shape.push_back(t.dim(i));
    const std::string raw = Bytes(t.data(), t.nbytes());
    if (!IsProjection(name)) {
      fp8.push_back({name, "F32", shape, raw});
      ref.push_back({name, "F32", shape, raw});
      continue;
    }
    const int64_t rows = t.dim(0), cols = t.dim(1);
    const int64_t br = scheme == Scheme::kBlock16 ? 16 : scheme == Scheme::kBlock128 ? 128 : 1;
    const int64_t bc = scheme == Scheme::kBlock16 ? 16 : scheme == Scheme::kBlock128 ? 128 : cols;
    const int64_t sr = (rows + br - 1) / br, sc = (cols + bc - 1) / bc;
    const float* w = t.data_as<float>();
    std::vector<float> scales(static_cast<size_t>(sr * sc));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        float& s = scales[(r / br) * sc + c / bc];
        s = std::max(s, std::fabs(w[r * cols + c]) / 448.0f);
      }
    }
    std::string codes(static_cast<size_t>(rows * cols), '\0');
    std::vector<uint16_t> deq(static_cast<size_t>(rows * cols));
    std::vector<float> deq32(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const float s = scales[(r / br) * sc + c / bc];
        const uint8_t q = F32ToF8E4M3(s > 0 ? w[r * cols + c] / s : 0.0f);
        codes[r * cols + c] = static_cast<char>(q);
        deq32[r * cols + c] = F8E4M3ToF32(q) * s;
        deq[r * cols + c] = F32ToBf16(deq32[r * cols + c]);
      }
    }
    fp8.push_back({name, "F8_E4M3", shape, codes});
    if (blocks) {
      fp8.push_back(
          {name + "_scale_inv", "F32", {sr, sc}, Bytes(scales.data(), scales.size() * 4)});
    } else {  // compressed-tensors: a [rows, 1] bf16 scale (the scale rounded as stored)
      std::vector<uint16_t> s16(scales.size());
      for (size_t i = 0; i < scales.size(); ++i) {
        s16[i] = F32ToBf16(scales[i]);
        const float s = Bf16ToF32(s16[i]);
        for (int64_t c = 0; c < cols; ++c) {
          const size_t at = i * static_cast<size_t>(cols) + static_cast<size_t>(c);
          deq[at] = F32ToBf16(F8E4M3ToF32(static_cast<uint8_t>(codes[at])) * s);
        }
      }
      fp8.push_back({name + "_scale", "BF16", {rows, 1}, Bytes(s16.data(), s16.size() * 2)});
    }
    if (scheme == Scheme::kBlock128) {
      ref.push_back({name, "F32", shape, Bytes(deq32.data(), deq32.size() * 4)});
    } else {
      ref.push_back({name, "BF16", shape, Bytes(deq.data(), deq.size() * 2)});
    }
  }
  StatusOr<json> config = LoadJsonFile((src / "config.json").string());
  ASSERT_TRUE(config.ok());
  json quantized = *config;
  if (blocks) {
    quantized["quantization_config"] = {{"quant_method", "fp8"},
                                        {"fmt", "e4m3"},
                                        {"activation_scheme", "dynamic"},
                                        {"weight_block_size", {br0, br0}}};
  } else {
    quantized["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "float-quantized"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}}}}}}},
        {"ignore", {"lm_head"}}};
  }
  testing::WriteBytes(fp8_dir + "/config.json", quantized.dump());
  testing::WriteBytes(fp8_dir + "/model.safetensors", testing::MakeSafetensors(fp8));
  testing::WriteBytes(ref_dir + "/config.json", config->dump());
  testing::WriteBytes(ref_dir + "/model.safetensors", testing::MakeSafetensors(ref));
}

std::vector<float> Logits(const std::string& dir, CpuBackend* be, const WeightOptions& options = {},
                          DType* main_dtype = nullptr) {
  StatusOr<std::unique_ptr<Model>> model = LoadModel(dir, be, nullptr, options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  if (main_dtype != nullptr) *main_dtype = (*model)->weights().dtype;
  std::vector<int32_t> ids = {1, 17, 42, 3, 99, 7, 250, 12};
  std::vector<int32_t> blocks = {0};
  std::vector<KvLayer> kv = (*model)->AllocateKv(2, 16, DType::kF32);
  return golden::ForwardLogits(**model, kv, {SeqSlice{ids, 0, blocks, true}}, 16, true);
}

class Fp8CheckpointTest : public ::testing::TestWithParam<Scheme> {};

TEST_P(Fp8CheckpointTest, LoadsAsItsDequantizedWeights) {
  const std::string root = testing::ScratchDir();
  std::filesystem::create_directories(root + "/fp8");
  std::filesystem::create_directories(root + "/ref");
  std::filesystem::path src = golden::ModelDir("llama");
  if (GetParam() == Scheme::kBlock128) {
    std::filesystem::create_directories(root + "/wide");
    WriteWideLlama(root + "/wide");
    src = root + "/wide";
  }
  WriteCheckpoints(GetParam(), src, root + "/fp8", root + "/ref");
  CpuBackend be(2);
  DType dtype = DType::kF32;
  std::vector<float> fp8 = Logits(root + "/fp8", &be, {}, &dtype), ref = Logits(root + "/ref", &be);
  ASSERT_FALSE(fp8.empty());
  ASSERT_EQ(fp8, ref);
  // Kept as fp8 blocks only where whole 128-runs share a scale.
  EXPECT_EQ(dtype, GetParam() == Scheme::kBlock128 ? DType::kFP8 : DType::kBF16);
  if (GetParam() == Scheme::kBlock128) return;
  // And FP8 stays near the f32 model's logits: e4m3's 3 mantissa bits round these weights by ~2.5%
  // RMS, which this tiny random model amplifies to 6-9% RMS in its logits. A sanity bound; the
  // exact comparison above is the check of the layout.
  std::vector<float> f32 = Logits(golden::ModelDir("llama").string(), &be);
  double err = 0, norm = 0;
  for (size_t i = 0; i < f32.size(); ++i) {
    err += (fp8[i] - f32[i]) * static_cast<double>(fp8[i] - f32[i]);
    norm += f32[i] * static_cast<double>(f32[i]);
  }
  std::printf("  relative RMS error of the FP8 logits: %.4f\n", std::sqrt(err / norm));
  EXPECT_LT(std::sqrt(err / norm), 0.15);
}

INSTANTIATE_TEST_SUITE_P(Schemes, Fp8CheckpointTest,
                         ::testing::Values(Scheme::kBlock16, Scheme::kPerRow, Scheme::kBlock128),
                         [](const ::testing::TestParamInfo<Scheme>& p) {
                           return p.param == Scheme::kBlock16  ? std::string("fp8_blocks_16")
                                  : p.param == Scheme::kPerRow ? std::string("per_row_scale")
                                                               : std::string("fp8_blocks_128");
                         });

// --quantize fp8 on an f32 checkpoint: the projections become QuantizeRow(kFP8) blocks (one scale
// per 128 of a row), the embedding, output head and norms stay: exactly the logits of an f32
// checkpoint holding those dequantized projections.
TEST(QuantizeAtLoadTest, Fp8GivesTheLogitsOfItsDequantizedProjections) {
  const std::string root = testing::ScratchDir();
  std::filesystem::create_directories(root + "/wide");
  std::filesystem::create_directories(root + "/ref");
  WriteWideLlama(root + "/wide");
  StatusOr<SafetensorsModel> st = SafetensorsModel::Open(root + "/wide");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  std::vector<testing::StTensor> ref;
  for (const std::string& name : st->names()) {
    Tensor t = *st->GetTensor(name);
    std::vector<int64_t> shape;
    for (int i = 0; i < t.ndim(); ++i) shape.push_back(t.dim(i));
    std::vector<float> v(t.data_as<float>(), t.data_as<float>() + t.numel());
    if (IsProjection(name)) {
      const int64_t cols = t.dim(1);
      std::vector<uint8_t> q(RowBytes(DType::kFP8, cols));
      for (int64_t r = 0; r < t.dim(0); ++r) {
        QuantizeRow(DType::kFP8, v.data() + r * cols, q.data(), cols);
        DequantizeRow(DType::kFP8, q.data(), v.data() + r * cols, cols);
      }
    }
    ref.push_back({name, "F32", shape, Bytes(v.data(), v.size() * 4)});
  }
  std::filesystem::copy_file(root + "/wide/config.json", root + "/ref/config.json");
  testing::WriteBytes(root + "/ref/model.safetensors", testing::MakeSafetensors(ref));
  CpuBackend be(2);
  DType dtype = DType::kF32;
  std::vector<float> fp8 = Logits(root + "/wide", &be, WeightOptions{DType::kFP8}, &dtype);
  std::vector<float> want = Logits(root + "/ref", &be);
  ASSERT_FALSE(fp8.empty());
  EXPECT_EQ(fp8, want);
  EXPECT_EQ(dtype, DType::kFP8);
  EXPECT_NE(fp8, Logits(root + "/wide", &be));  // the rounding is visible
  // Only fp8 is a --quantize target.
  EXPECT_TRUE(testing::HasError(
      LoadModel(root + "/wide", &be, nullptr, WeightOptions{DType::kQ4_K}).status(),
      StatusCode::kInvalidArgument, {"--quantize q4_K", "fp8"}));
}

// loom quantize HF_DIR OUT FP8 (io/hf_fp8_quantize.h) writes what WriteCheckpoints' kBlock128 FP8
// checkpoint holds: the same codes and 128 x 128 scales byte for byte, so loom loads it into the
// logits of the dequantized f32 checkpoint. Quantizing an FP8 checkpoint again, or into a model
// directory, is refused.
TEST(HfFp8QuantizeTest, WritesTheBlockFp8CheckpointOfTheModel) {
  const std::string root = testing::ScratchDir();
  for (const char* d : {"/wide", "/fp8", "/ref"}) std::filesystem::create_directories(root + d);
  WriteWideLlama(root + "/wide");
  WriteCheckpoints(Scheme::kBlock128, root + "/wide", root + "/fp8", root + "/ref");
  int quantized = 0;
  HfFp8Options options;
  options.threads = 2;
  options.progress = [&](const std::string&, bool q) { quantized += q ? 1 : 0; };
  StatusOr<HfFp8Result> r = QuantizeHfToFp8(root + "/wide", root + "/loom", options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->quantized, 3 * 7);  // 3 layers x q, k, v, o, gate, up, down
  EXPECT_EQ(quantized, 3 * 7);
  StatusOr<SafetensorsModel> want = SafetensorsModel::Open(root + "/fp8");
  StatusOr<SafetensorsModel> got = SafetensorsModel::Open(root + "/loom");
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(got->names(), want->names());
  for (const std::string& name : want->names()) {
    Tensor a = *want->GetTensor(name), b = *got->GetTensor(name);
    ASSERT_EQ(a.dtype(), b.dtype()) << name;
    ASSERT_EQ(a.nbytes(), b.nbytes()) << name;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << name;
  }
  CpuBackend be(2);
  DType dtype = DType::kF32;
  std::vector<float> logits = Logits(root + "/loom", &be, {}, &dtype);
  ASSERT_FALSE(logits.empty());
  EXPECT_EQ(logits, Logits(root + "/ref", &be));
  EXPECT_EQ(dtype, DType::kFP8);
  EXPECT_TRUE(testing::HasError(QuantizeHfToFp8(root + "/loom", root + "/again", options).status(),
                                StatusCode::kInvalidArgument, {"already quantized"}));
  EXPECT_TRUE(testing::HasError(QuantizeHfToFp8(root + "/wide", root + "/loom", options).status(),
                                StatusCode::kInvalidArgument, {"already holds a model"}));
}

TEST(Fp8CheckpointErrorsTest, NameTheTensorOrTheMethod) {
  const std::string root = testing::ScratchDir();
  std::filesystem::create_directories(root + "/fp8");
  std::filesystem::create_directories(root + "/ref");
  WriteCheckpoints(Scheme::kBlock16, golden::ModelDir("llama"), root + "/fp8", root + "/ref");
  CpuBackend be(2);
  const std::string dir = root + "/fp8";
  json config = *LoadJsonFile(dir + "/config.json");
  // An unsupported method.
  json awq = config;
  awq["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}};
  testing::WriteBytes(dir + "/config.json", awq.dump());
  StatusOr<std::unique_ptr<Model>> m = LoadModel(dir, &be);
  EXPECT_TRUE(testing::HasError(m.status(), StatusCode::kUnimplemented, {"'awq'", "fp8"}));
  // Blocks that do not match the scales' shape.
  json wrong = config;
  wrong["quantization_config"]["weight_block_size"] = {32, 32};
  testing::WriteBytes(dir + "/config.json", wrong.dump());
  m = LoadModel(dir, &be);
  EXPECT_TRUE(testing::HasError(m.status(), StatusCode::kInvalidArgument,
                                {"F8_E4M3 tensor", "_scale_inv'", "32x32 block"}));
  // An e5m2 format.
  json e5 = config;
  e5["quantization_config"]["fmt"] = "e5m2";
  testing::WriteBytes(dir + "/config.json", e5.dump());
  EXPECT_TRUE(
      testing::HasError(LoadModel(dir, &be).status(), StatusCode::kUnimplemented, {"'e5m2'"}));
}

}  // namespace
}  // namespace loom
