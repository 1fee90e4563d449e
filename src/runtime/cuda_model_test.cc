// End to end: the decoder (model/decoder.cc) with identical random weights (dummy_weights.h,
// DummyScale::kUnitGain: O(1) activations) on the CPU and the CUDA backend, a prefill step of two
// prompts followed by decode steps, logits compared. Skips without a GPU.
//
// Tolerance: every CUDA op rounds its activations to bf16 (about 2^-9 relative each), about a
// dozen ops per layer compound, and the final logits are a 512-term dot product of those; 3e-2
// normalized error covers that for these 2-layer models, while a wrong mask, position or page
// gives errors of order 1. Argmax agreement is checked only where the CPU's top-2 gap is
// larger than the measured error could bridge.
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cuda/cuda_test_util.h"
#include "model/dummy_weights.h"
#include "runtime/forward_batch.h"
#include "runtime/test_models.h"

namespace loom {
namespace {

using cuda_test::CpuValues;
using cuda_test::GpuValues;
using cuda_test::NormalizedError;

// Llama-3.1-8B's config (llama3 rope scaling) shrunk to 2 layers.
ModelConfig TinyLlama() {
  ModelConfig c = test_models::Llama31_8BConfig();
  c.vocab_size = 1000;
  c.hidden_size = 512;
  c.intermediate_size = 1024;
  c.num_layers = 2;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.rotary_dim = 64;
  c.layer_window.assign(2, 0);
  return c;
}

ModelConfig TinyGemmaLike() {
  ModelConfig c = TinyLlama();
  c.arch = "gemma2";
  c.num_kv_heads = 4;
  c.head_dim = 128;
  c.rotary_dim = 128;
  c.num_heads = 4;
  c.rope = RopeConfig{};
  c.rope_local = RopeConfig{};
  c.rope_local.theta = 10000.f;
  c.rope.theta = 1000000.f;
  c.norm_plus_one = true;
  c.sandwich_norm = true;
  c.qk_norm = true;
  c.activation = Activation::kGeluTanh;
  c.embed_scale = 22.625f;
  c.attn_logit_softcap = 50.f;
  c.final_logit_softcap = 30.f;
  c.tie_word_embeddings = true;
  c.layer_window = {5, 0};
  return c;
}

class CudaModelTest : public cuda_test::GpuTest {
 protected:
  void Compare(const ModelConfig& cfg) {
    auto make = [&](Backend* be) {
      return MakeDummyModelFromConfig(cfg, be, DType::kBF16, 7, "tiny " + cfg.arch,
                                      DummyScale::kUnitGain);
    };
    auto cpu_model = make(&cpu_);
    auto gpu_model = make(gpu_.get());
    constexpr int kBlock = 16;
    std::vector<KvLayer> cpu_kv = cpu_model->AllocateKv(16, kBlock, DType::kBF16);
    std::vector<KvLayer> gpu_kv = gpu_model->AllocateKv(16, kBlock, DType::kBF16);
    std::vector<int32_t> p0(23), p1(40);
    for (size_t i = 0; i < p0.size(); ++i) p0[i] = static_cast<int32_t>((i * 37 + 5) % 1000);
    for (size_t i = 0; i < p1.size(); ++i) p1[i] = static_cast<int32_t>((i * 91 + 2) % 1000);
    const std::vector<int32_t> blocks0 = {9, 2, 14}, blocks1 = {0, 7, 3, 11};
    int len0 = 0, len1 = 0;
    for (int step = 0; step < 4; ++step) {
      std::vector<int32_t> t0 =
          step == 0 ? p0 : std::vector<int32_t>{static_cast<int32_t>(step * 3)};
      std::vector<int32_t> t1 =
          step == 0 ? p1 : std::vector<int32_t>{static_cast<int32_t>(step * 5)};
      std::vector<SeqSlice> seqs = {SeqSlice{t0, len0, blocks0, true},
                                    SeqSlice{t1, len1, blocks1, true}};
      HostForwardBatch hb = BuildHostForwardBatch(seqs, kBlock);
      len0 += static_cast<int>(t0.size());
      len1 += static_cast<int>(t1.size());
      std::vector<float> ref, got;
      {
        ForwardInput in = UploadForwardBatch(hb, kBlock, &cpu_);
        Tensor logits = cpu_.Alloc(DType::kF32, Shape{2, cfg.vocab_size});
        ASSERT_TRUE(cpu_model->Forward(in, cpu_kv, logits).ok());
        ref = CpuValues(logits);
      }
      {
        ForwardInput in = UploadForwardBatch(hb, kBlock, gpu_.get());
        Tensor logits = gpu_->Alloc(DType::kF32, Shape{2, cfg.vocab_size});
        ASSERT_TRUE(gpu_model->Forward(in, gpu_kv, logits).ok());
        got = GpuValues(*gpu_, logits);
      }
      const double err = NormalizedError(got, ref);
      std::printf("  %s step %d: logits normalized error %.2e\n", cfg.arch.c_str(), step, err);
      EXPECT_LT(err, 3e-2) << cfg.arch << " step " << step;
      for (int r = 0; r < 2; ++r) {
        auto row = [&](std::vector<float>& v) {
          return std::vector<float>(v.begin() + r * cfg.vocab_size,
                                    v.begin() + (r + 1) * cfg.vocab_size);
        };
        std::vector<float> rr = row(ref), gr = row(got);
        std::vector<float> sorted = rr;
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
        double scale = 0;
        for (float v : rr) scale = std::max(scale, double{std::fabs(v)});
        if (sorted[0] - sorted[1] > 0.1 * scale) {
          EXPECT_EQ(std::max_element(gr.begin(), gr.end()) - gr.begin(),
                    std::max_element(rr.begin(), rr.end()) - rr.begin())
              << cfg.arch << " step " << step << " row " << r;
        }
      }
    }
  }
};

TEST_F(CudaModelTest, LlamaMatchesCpu) { Compare(TinyLlama()); }
TEST_F(CudaModelTest, GemmaLikeMatchesCpu) { Compare(TinyGemmaLike()); }

}  // namespace
}  // namespace loom
