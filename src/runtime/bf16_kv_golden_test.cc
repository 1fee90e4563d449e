// The CPU backend with a bf16 KV cache (`--kv-dtype bf16`) against every architecture's HF
// transformers golden, at the bf16 tolerances of runtime/bf16_golden.h: logits error and KL per
// row, batched vs solo, greedy up to a confirmed near tie. Runs everywhere (the same checks hold
// the CUDA backend in cuda_golden_test).
#include <memory>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "runtime/bf16_golden.h"

namespace loom {
namespace {

class CpuBf16KvGoldenTest : public golden::Bf16GoldenTest {
 protected:
  std::unique_ptr<Backend> MakeBackend(std::string*) override {
    return std::make_unique<CpuBackend>(2);
  }
};

LOOM_BF16_GOLDEN_TESTS(CpuBf16KvGoldenTest);

// The GGUF conversions too (the path cuda_golden_test also takes).
INSTANTIATE_TEST_SUITE_P(Gguf, CpuBf16KvGoldenTest,
                         ::testing::Values("gguf/llama", "gguf/qwen2", "gguf/qwen3",
                                           "gguf/gemma2_gguf", "gguf/gemma3", "gguf/phi3",
                                           "gguf/mixtral", "gguf/gpt_oss"),
                         golden::ParamName);

}  // namespace
}  // namespace loom
