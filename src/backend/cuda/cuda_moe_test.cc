// CudaBackend::MoeMlp (moe.cuh) against the CPU backend's on identical bf16-exact inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cuda/cuda_test_util.h"

namespace loom {
namespace {

using cuda_test::CpuValues;
using cuda_test::GpuTest;
using cuda_test::GpuValues;
using cuda_test::HostF32;
using cuda_test::NormalizedError;
using cuda_test::Poison;
using cuda_test::RandBf16;

class CudaMoeTest : public GpuTest {};

struct MoeCase {
  int64_t n, experts;
  int top_k;
  int64_t hidden, f, shared_f;  // shared_f 0: no shared expert
  bool norm_topk_prob;
  Backend::GatedAct act;
  float swiglu_limit = 0.f;  // > 0: gpt-oss's experts (biases, clamped SwiGLU)
};

// Rows whose routing is decided by more than rounding: every gap between consecutive logits of
// the top k + 1 (the chosen experts' order and the first one left out) is at least twice the
// rounding of the row's largest logit (bf16: 2^-8 relative; f32 logits: summation order only,
// 1e-5 relative), plus 1e-3 (bf16) or 1e-5 absolute.
std::vector<bool> DecisiveRows(const std::vector<float>& logits, int64_t n, int64_t experts,
                               int top_k, bool bf16) {
  std::vector<bool> ok(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float> l(logits.begin() + i * experts, logits.begin() + (i + 1) * experts);
    float largest = 0.f;
    for (float v : l) largest = std::max(largest, std::fabs(v));
    const float margin = bf16 ? largest / 128.f + 1e-3f : largest * 2e-5f + 1e-5f;
    std::sort(l.begin(), l.end(), std::greater<float>());
    bool decisive = true;
    for (int j = 0; j < top_k && j + 1 < experts; ++j) decisive &= l[j] - l[j + 1] >= margin;
    ok[static_cast<size_t>(i)] = decisive;
  }
  return ok;
}

// Every kernel (cuda::MoeTilingFor): GEMVs (n 1, 5, 20, 3), 16-row tensor-core tiles (n 37,
// 100) and 64-row ones, segments that end inside a tile, column tiles cut at 16 (hidden 80, f
// 48) and a k loop ending on a half step (f 48); routing in one block (n <= 512) and in three
// kernels (n 1000); softmax and renormalized weights, SiLU and GELU, with and without a shared
// expert.
TEST_F(CudaMoeTest, MatchesTheCpuBackend) {
  std::mt19937 rng(11);
  const std::vector<MoeCase> cases = {
      {1, 8, 2, 64, 32, 0, true, Backend::GatedAct::kSilu},
      {5, 8, 2, 80, 48, 0, true, Backend::GatedAct::kSilu},
      {37, 64, 8, 128, 48, 0, true, Backend::GatedAct::kSilu},
      {300, 8, 2, 80, 48, 0, true, Backend::GatedAct::kSilu},
      {300, 8, 2, 64, 32, 48, false, Backend::GatedAct::kSilu},
      {70, 16, 4, 96, 64, 32, false, Backend::GatedAct::kGeluTanh},
      {1000, 128, 8, 64, 32, 0, true, Backend::GatedAct::kSilu},
      {20, 128, 8, 128, 64, 0, true, Backend::GatedAct::kSilu},
      {3, 16, 4, 80, 48, 32, false, Backend::GatedAct::kGeluTanh},
      {100, 16, 2, 64, 48, 0, true, Backend::GatedAct::kSilu},
      // gpt-oss: biased router and experts, clamped SwiGLU (a limit the values cross), as GEMVs
      // and on tensor cores.
      {3, 32, 4, 64, 64, 0, true, Backend::GatedAct::kSilu, 0.3f},
      {200, 32, 4, 128, 64, 0, true, Backend::GatedAct::kSilu, 0.3f},
  };
  for (const MoeCase& c : cases) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " experts " + std::to_string(c.experts) + " k " +
                 std::to_string(c.top_k) + " hidden " + std::to_string(c.hidden) + " f " +
                 std::to_string(c.f) + " shared " + std::to_string(c.shared_f));
    const int64_t n = c.n, e = c.experts, d = c.hidden, f = c.f, fs = c.shared_f;
    std::vector<float> xv = RandBf16(rng, n * d);
    // Router logits of spread ~2 per token: decisive for most rows at bf16 precision.
    std::vector<float> router = RandBf16(rng, e * d, 2.f / std::sqrt(static_cast<float>(d)));
    std::vector<float> gate = RandBf16(rng, e * f * d, 0.1f), up = RandBf16(rng, e * f * d, 0.1f);
    std::vector<float> down = RandBf16(rng, e * d * f, 0.1f);
    std::vector<float> sg = RandBf16(rng, fs * d, 0.1f), su = RandBf16(rng, fs * d, 0.1f);
    std::vector<float> sd = RandBf16(rng, d * fs, 0.1f), sr = RandBf16(rng, d, 0.2f);

    Backend::MoeParams params;
    params.top_k = c.top_k;
    params.norm_topk_prob = c.norm_topk_prob;
    params.act = c.act;
    params.swiglu_limit = c.swiglu_limit;
    std::vector<float> rb = RandBf16(rng, e, 0.5f), gb = RandBf16(rng, e * f, 0.2f),
                       ub = RandBf16(rng, e * f, 0.2f), db = RandBf16(rng, e * d, 0.2f);
    auto weights = [&](Backend& be, auto&& place) {
      Backend::MoeWeights w;
      if (c.swiglu_limit > 0.f) {  // f32 biases: placed as vectors, then shaped [E, cols]
        w.router_bias = place(HostF32(Shape{e}, rb));
        w.gate_bias = place(HostF32(Shape{e * f}, gb)).Reshape(Shape{e, f});
        w.up_bias = place(HostF32(Shape{e * f}, ub)).Reshape(Shape{e, f});
        w.down_bias = place(HostF32(Shape{e * d}, db)).Reshape(Shape{e, d});
      }
      w.router = place(HostF32(Shape{e, d}, router));
      w.gate = place(HostF32(Shape{e, f, d}, gate));
      w.up = place(HostF32(Shape{e, f, d}, up));
      w.down = place(HostF32(Shape{e, d, f}, down));
      if (fs > 0) {
        w.shared_gate = place(HostF32(Shape{fs, d}, sg));
        w.shared_up = place(HostF32(Shape{fs, d}, su));
        w.shared_down = place(HostF32(Shape{d, fs}, sd));
        w.shared_router = place(HostF32(Shape{1, d}, sr));
      }
      (void)be;
      return w;
    };
    const Backend::MoeWeights cw = weights(cpu_, [](Tensor t) { return t; });
    Tensor cpu_out = cpu_.Alloc(DType::kF32, Shape{n, d});
    Tensor cpu_logits = cpu_.Alloc(DType::kF32, Shape{n, e});
    Tensor cpu_ids = cpu_.Alloc(DType::kI32, Shape{n, c.top_k});
    cpu_.MoeMlp(HostF32(Shape{n, d}, xv), cw, params, cpu_logits, cpu_ids, cpu_out);

    const Backend::MoeWeights gw = weights(*gpu_, [&](Tensor t) { return gpu_->Upload(t); });
    Tensor x = gpu_->Upload(HostF32(Shape{n, d}, xv));
    std::vector<float> first;
    for (int run = 0; run < 2; ++run) {
      Tensor out = gpu_->Alloc(DType::kBF16, Shape{n, d});
      // f32 router logits as the decoder gives them; bf16 in one case (the kernels take both).
      Tensor logits = gpu_->Alloc(&c == &cases[1] ? DType::kBF16 : DType::kF32, Shape{n, e});
      Tensor ids = gpu_->Alloc(DType::kI32, Shape{n, c.top_k});
      Poison(*gpu_, out);
      Poison(*gpu_, ids);
      gpu_->MoeMlp(x, gw, params, logits, ids, out);
      std::vector<float> got = GpuValues(*gpu_, out);
      if (run == 1) {  // the order inside experts' segments varies; the result must not
        EXPECT_EQ(got, first) << "a second run differs";
        break;
      }
      first = got;
      const std::vector<float> ref_logits = CpuValues(cpu_logits);
      EXPECT_LT(NormalizedError(GpuValues(*gpu_, logits), ref_logits),
                logits.dtype() == DType::kF32 ? 1e-5 : cuda_test::kTolRounded);

      const std::vector<bool> decisive =
          DecisiveRows(ref_logits, n, e, c.top_k, logits.dtype() == DType::kBF16);
      std::vector<int32_t> got_ids(static_cast<size_t>(n * c.top_k));
      gpu_->CopyToHost(ids, got_ids.data());
      const int32_t* ref_ids = cpu_ids.data_as<const int32_t>();
      std::vector<float> got_rows, ref_rows;
      const std::vector<float> ref = CpuValues(cpu_out);
      int64_t checked = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (!decisive[static_cast<size_t>(i)]) continue;
        ++checked;
        for (int j = 0; j < c.top_k; ++j) {
          ASSERT_EQ(got_ids[static_cast<size_t>(i * c.top_k + j)], ref_ids[i * c.top_k + j])
              << "row " << i << " expert " << j;
        }
        got_rows.insert(got_rows.end(), got.begin() + i * d, got.begin() + (i + 1) * d);
        ref_rows.insert(ref_rows.end(), ref.begin() + i * d, ref.begin() + (i + 1) * d);
      }
      // Enough rows are decisive for the test to check something (f32 logits: nearly all).
      EXPECT_GE(checked * 4, n * (logits.dtype() == DType::kBF16 ? 1 : 3))
          << checked << " of " << n << " rows decisive";
      // kTolReRounded: the experts' activations and the output are rounded to bf16; with bf16
      // router logits the routing weights also carry the logits' rounding (|dl| <= 2^-8 |l|).
      EXPECT_LT(NormalizedError(got_rows, ref_rows),
                logits.dtype() == DType::kF32 ? cuda_test::kTolReRounded : 1.5e-2);
    }
  }
}

// Expert weights live in 3-D tensors; a shape the kernels cannot tile is refused by name.
TEST_F(CudaMoeTest, RefusesSizesNotMultiplesOf16) {
  Backend::MoeWeights w;
  const int64_t e = 4, d = 40, f = 24;
  w.router = gpu_->Alloc(DType::kBF16, Shape{e, d});
  w.gate = gpu_->Alloc(DType::kBF16, Shape{e, f, d});
  w.up = gpu_->Alloc(DType::kBF16, Shape{e, f, d});
  w.down = gpu_->Alloc(DType::kBF16, Shape{e, d, f});
  Backend::MoeParams params;
  params.top_k = 2;
  Tensor x = gpu_->Alloc(DType::kBF16, Shape{3, d});
  Tensor out = gpu_->Alloc(DType::kBF16, Shape{3, d});
  Tensor logits = gpu_->Alloc(DType::kBF16, Shape{3, e});
  Tensor ids = gpu_->Alloc(DType::kI32, Shape{3, 2});
  EXPECT_DEATH(gpu_->MoeMlp(x, w, params, logits, ids, out), "multiples of 16");
}

}  // namespace
}  // namespace loom
