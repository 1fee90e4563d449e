// FP8 checkpoints (model/hf_quantization.h) through LoadModel: the llama golden's projections
// written as F8_E4M3 with their scales, the way Qwen3-*-FP8 (quant_method fp8, 128x128 blocks of
// weight_scale_inv; 16x16 here so the tiny model has several, ragged, blocks) and
// compressed-tensors FP8 (one weight_scale per output row) checkpoints store them. Each must give
// exactly the logits of a bf16 checkpoint holding the dequantized values (f8 * scale, rounded to
// bf16 once), computed here independently of the loader; bad checkpoints fail naming the tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "io/io_test_util.h"
#include "io/json_file.h"
#include "io/safetensors_model.h"
#include "model/model.h"
#include "runtime/golden_models.h"

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

enum class Scheme { kBlock16, kPerRow };

// Writes the golden llama as an FP8 checkpoint (`fp8_dir`) and as the bf16 checkpoint of its
// dequantized weights (`ref_dir`).
void WriteCheckpoints(Scheme scheme, const std::string& fp8_dir, const std::string& ref_dir) {
  const std::filesystem::path src = golden::ModelDir("llama");
  StatusOr<SafetensorsModel> st = SafetensorsModel::Open(src.string());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  std::vector<testing::StTensor> fp8, ref;
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
    const int64_t br = scheme == Scheme::kBlock16 ? 16 : 1;
    const int64_t bc = scheme == Scheme::kBlock16 ? 16 : cols;
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
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const float s = scales[(r / br) * sc + c / bc];
        const uint8_t q = F32ToF8E4M3(s > 0 ? w[r * cols + c] / s : 0.0f);
        codes[r * cols + c] = static_cast<char>(q);
        deq[r * cols + c] = F32ToBf16(F8E4M3ToF32(q) * s);
      }
    }
    fp8.push_back({name, "F8_E4M3", shape, codes});
    if (scheme == Scheme::kBlock16) {
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
    ref.push_back({name, "BF16", shape, Bytes(deq.data(), deq.size() * 2)});
  }
  StatusOr<json> config = LoadJsonFile((src / "config.json").string());
  ASSERT_TRUE(config.ok());
  json quantized = *config;
  if (scheme == Scheme::kBlock16) {
    quantized["quantization_config"] = {{"quant_method", "fp8"},
                                        {"fmt", "e4m3"},
                                        {"activation_scheme", "dynamic"},
                                        {"weight_block_size", {16, 16}}};
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

std::vector<float> Logits(const std::string& dir, CpuBackend* be) {
  StatusOr<std::unique_ptr<Model>> model = LoadModel(dir, be);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  std::vector<int32_t> ids = {1, 17, 42, 3, 99, 7, 250, 12};
  std::vector<int32_t> blocks = {0};
  std::vector<KvLayer> kv = (*model)->AllocateKv(2, 16, DType::kF32);
  return golden::ForwardLogits(**model, kv, {SeqSlice{ids, 0, blocks, true}}, 16, true);
}

class Fp8CheckpointTest : public ::testing::TestWithParam<Scheme> {};

TEST_P(Fp8CheckpointTest, LoadsAsTheBf16OfItsDequantizedWeights) {
  const std::string root = testing::ScratchDir();
  std::filesystem::create_directories(root + "/fp8");
  std::filesystem::create_directories(root + "/ref");
  WriteCheckpoints(GetParam(), root + "/fp8", root + "/ref");
  CpuBackend be(2);
  std::vector<float> fp8 = Logits(root + "/fp8", &be), ref = Logits(root + "/ref", &be);
  ASSERT_FALSE(fp8.empty());
  ASSERT_EQ(fp8, ref);
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
                         ::testing::Values(Scheme::kBlock16, Scheme::kPerRow),
                         [](const ::testing::TestParamInfo<Scheme>& p) {
                           return p.param == Scheme::kBlock16 ? std::string("fp8_blocks_16")
                                                              : std::string("per_row_scale");
                         });

TEST(Fp8CheckpointErrorsTest, NameTheTensorOrTheMethod) {
  const std::string root = testing::ScratchDir();
  std::filesystem::create_directories(root + "/fp8");
  std::filesystem::create_directories(root + "/ref");
  WriteCheckpoints(Scheme::kBlock16, root + "/fp8", root + "/ref");
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
