// Every architecture's HF transformers golden through the CUDA backend, loaded from the same
// safetensors: weights rounded to bf16 on upload, bf16 activations and KV, f32 logits. The
// model-level half of the CUDA backend's proof (issue 7): the checks and their tolerances are in
// runtime/bf16_golden.h. Skips without a GPU this build runs on.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_test_util.h"
#include "io/json_file.h"
#include "model/dummy_weights.h"
#include "model/model.h"
#include "runtime/bf16_golden.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

class CudaGoldenTest : public golden::Bf16GoldenTest {
 protected:
  std::unique_ptr<Backend> MakeBackend(std::string* skip) override {
    std::unique_ptr<CudaBackend> gpu = cuda_test::GpuOrNull();
    if (gpu == nullptr) *skip = CudaBackend::CheckGpu(0).message();
    return gpu;
  }
};

LOOM_BF16_GOLDEN_TESTS(CudaGoldenTest);

// From GGUF conversions: Llama's permuted q/k and interleaved rope (incl. Llama 3.1's
// rope_freqs.weight), Gemma's (1 + w) norms as stored weights, on the CUDA kernels.
INSTANTIATE_TEST_SUITE_P(Gguf, CudaGoldenTest,
                         ::testing::Values("gguf/llama", "gguf/qwen2", "gguf/qwen3",
                                           "gguf/gemma2_gguf", "gguf/gemma3", "gguf/phi3",
                                           "gguf/mixtral", "gguf/qwen2_moe", "gguf/gpt_oss"),
                         golden::ParamName);

// A head_dim without CUDA attention kernels is refused at load, naming it, from a checkpoint
// and from --dummy-weights (before any weight is read or made).
TEST(CudaModelLoad, RefusesAHeadDimWithoutKernels) {
  std::unique_ptr<CudaBackend> gpu = cuda_test::GpuOrNull();
  if (gpu == nullptr) GTEST_SKIP() << CudaBackend::CheckGpu(0).message();
  EXPECT_TRUE(gpu->CheckHeadDim(128).ok());
  const fs::path dir = fs::path(::testing::TempDir()) / "loom_cuda_head_dim_112";
  fs::create_directories(dir);
  auto config = LoadJsonFile((golden::ModelDir("llama") / "config.json").string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  (*config)["head_dim"] = 112;
  std::ofstream(dir / "config.json") << config->dump();
  fs::copy_file(golden::ModelDir("llama") / "model.safetensors", dir / "model.safetensors",
                fs::copy_options::overwrite_existing);
  auto loaded = LoadModel(dir.string(), gpu.get());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(loaded.status().message().find("head_dim 112"), std::string::npos)
      << loaded.status().ToString();
  auto dummy = MakeDummyModel(dir.string(), gpu.get());
  ASSERT_FALSE(dummy.ok());
  EXPECT_NE(dummy.status().message().find("head_dim 112"), std::string::npos)
      << dummy.status().ToString();
}

}  // namespace
}  // namespace loom
