// The CUDA backend's fused ops (one kernel each) vs the CPU backend running the backend's
// default implementations of the same ops (the unfused sequences they replace: backend.cc), on
// awkward sizes. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_test_util.h"

namespace loom {
namespace {

using cuda_test::CpuValues;
using cuda_test::GpuValues;
using cuda_test::HostF32;
using cuda_test::HostI32;
using cuda_test::kTolReRounded;
using cuda_test::kTolRounded;
using cuda_test::NormalizedError;
using cuda_test::Poison;
using cuda_test::RandBf16;

class CudaFusedOpsTest : public cuda_test::GpuTest {};

// The vectorized norm kernel's block sizes (<= 1024, <= 4096, <= 8192, <= 16384 columns),
// ragged vector counts per thread, and d % 8 != 0 (the strided kernel); in place too.
TEST_F(CudaFusedOpsTest, RmsNormVectorizedAndStrided) {
  std::mt19937 rng(11);
  for (int64_t d : {8, 136, 1024, 4096, 5120, 8200, 16384, 17}) {
    for (int64_t n : {1, 3, 64}) {
      std::vector<float> xv = RandBf16(rng, n * d), wv = RandBf16(rng, d, 0.3f);
      Tensor cout = cpu_.Alloc(DType::kF32, Shape{n, d});
      cpu_.RmsNorm(HostF32(Shape{n, d}, xv), HostF32(Shape{d}, wv), 1e-5f, 1.f, cout);
      Tensor gx = gpu_->Upload(HostF32(Shape{n, d}, xv));
      gpu_->RmsNorm(gx, gpu_->Upload(HostF32(Shape{d}, wv)), 1e-5f, 1.f, gx);  // in place
      EXPECT_LT(NormalizedError(GpuValues(*gpu_, gx), CpuValues(cout)), kTolRounded)
          << "d " << d << " n " << n;
    }
  }
}

// x + x @ w^T through the GEMV epilogue (n <= 8, every warps-per-column split), cuBLASLt's
// beta = 1 (n > 8), and the composed default (bias).
TEST_F(CudaFusedOpsTest, MatMulAddMatchesMatMulThenAdd) {
  std::mt19937 rng(15);
  for (int64_t n : {1, 3, 8, 9, 64}) {
    for (int64_t m : {64, 1000, 4096}) {
      for (bool bias : {false, true}) {
        const int64_t k = 512;
        std::vector<float> xv = RandBf16(rng, n * k), wv = RandBf16(rng, m * k, 0.05f),
                           av = RandBf16(rng, n * m), bv = RandBf16(rng, m);
        Tensor cacc = HostF32(Shape{n, m}, av);
        cpu_.MatMulAdd(HostF32(Shape{n, k}, xv), HostF32(Shape{m, k}, wv),
                       bias ? HostF32(Shape{m}, bv) : Tensor(), cacc);
        for (bool streamed : {true, false}) {  // n = 1: the streamed GEMV or the small-batch one
          gpu_->set_stream_gemv(streamed);
          Tensor gacc = gpu_->Upload(HostF32(Shape{n, m}, av));
          gpu_->MatMulAdd(gpu_->Upload(HostF32(Shape{n, k}, xv)),
                          gpu_->Upload(HostF32(Shape{m, k}, wv)),
                          bias ? gpu_->Upload(HostF32(Shape{m}, bv)) : Tensor(), gacc);
          EXPECT_LT(NormalizedError(GpuValues(*gpu_, gacc), CpuValues(cacc)), kTolReRounded)
              << "n " << n << " m " << m << " bias " << bias << " streamed " << streamed;
        }
        gpu_->set_stream_gemv(true);
      }
    }
  }
}

// RmsNorm(x) @ w^T (plain and gated): n = 1 takes the GEMV norm prologue (k up to 8192; 8200 is
// past its shared-memory row, so it falls back), n > 1 the norm kernel + GEMV / GEMM.
TEST_F(CudaFusedOpsTest, RmsNormMatMulMatchesNormThenMatMul) {
  std::mt19937 rng(16);
  for (int64_t n : {1, 2, 9}) {
    for (int64_t k : {64, 2048, 8192, 8200}) {
      const int64_t m = 96;
      for (float offset : {0.f, 1.f}) {
        for (bool streamed : {true, false}) {  // n = 1: the streamed GEMV or the small-batch one
          gpu_->set_stream_gemv(streamed);
          std::vector<float> xv = RandBf16(rng, n * k), nw = RandBf16(rng, k, 0.3f),
                             wv = RandBf16(rng, 2 * m * k, 0.05f);
          const Backend::NormSpec cn{HostF32(Shape{k}, nw), 1e-5f, offset};
          const Backend::NormSpec gn{gpu_->Upload(HostF32(Shape{k}, nw)), 1e-5f, offset};
          // Plain.
          Tensor cout = cpu_.Alloc(DType::kF32, Shape{n, 2 * m});
          cpu_.RmsNormMatMul(HostF32(Shape{n, k}, xv), cn, HostF32(Shape{2 * m, k}, wv), Tensor(),
                             cout);
          Tensor gx = gpu_->Upload(HostF32(Shape{n, k}, xv));
          Tensor gout = gpu_->AllocScratch(DType::kBF16, Shape{n, 2 * m});
          Poison(*gpu_, gout);
          gpu_->RmsNormMatMul(gx, gn, gpu_->Upload(HostF32(Shape{2 * m, k}, wv)), Tensor(), gout);
          EXPECT_LT(NormalizedError(GpuValues(*gpu_, gout), CpuValues(cout)), kTolReRounded)
              << "plain: n " << n << " k " << k << " offset " << offset;
          EXPECT_EQ(GpuValues(*gpu_, gx), xv) << "x must not change";
          // Gated (rows [0, m) are gate, [m, 2m) up, fused in each backend's layout).
          std::vector<float> g(wv.begin(), wv.begin() + m * k), u(wv.begin() + m * k, wv.end());
          Tensor cg = cpu_.Alloc(DType::kF32, Shape{n, m});
          cpu_.RmsNormMatMulGated(HostF32(Shape{n, k}, xv), cn,
                                  cpu_.FuseGateUp(HostF32(Shape{m, k}, g), HostF32(Shape{m, k}, u)),
                                  Backend::GatedAct::kSilu, cg);
          Tensor gg = gpu_->AllocScratch(DType::kBF16, Shape{n, m});
          Poison(*gpu_, gg);
          gpu_->RmsNormMatMulGated(gx, gn,
                                   gpu_->FuseGateUp(gpu_->Upload(HostF32(Shape{m, k}, g)),
                                                    gpu_->Upload(HostF32(Shape{m, k}, u))),
                                   Backend::GatedAct::kSilu, gg);
          EXPECT_LT(NormalizedError(GpuValues(*gpu_, gg), CpuValues(cg)), kTolReRounded)
              << "gated: n " << n << " k " << k << " offset " << offset << " streamed " << streamed;
        }
        gpu_->set_stream_gemv(true);
      }
    }
  }
}

TEST_F(CudaFusedOpsTest, QkvRopeStoreMatchesCopyNormRopeStore) {
  std::mt19937 rng(12);
  struct Case {
    int heads, kv_heads, head_dim, rotary_dim;
    bool interleaved, qk_norm;
    float factor, norm_offset;
  };
  const Case cases[] = {
      {32, 8, 128, 128, false, false, 1.f, 0.f},  // Llama 3
      {16, 8, 128, 128, false, true, 1.f, 0.f},   // Qwen3: per-head norms
      {8, 4, 256, 256, false, true, 1.f, 1.f},    // Gemma 3: (1 + w) norms, d 256
      {4, 4, 96, 48, true, false, 1.2f, 0.f},     // partial, interleaved rotary, yarn factor
      {6, 2, 80, 80, false, true, 1.f, 0.f},      // head_dim not a multiple of 32
  };
  const int block_size = 7, num_blocks = 9;
  for (const Case& c : cases) {
    for (int64_t n : {1, 5, 23}) {
      const int64_t D = c.head_dim, q_dim = c.heads * D, kv_dim = c.kv_heads * D;
      const int64_t width = q_dim + 2 * kv_dim;
      std::vector<float> qkv = RandBf16(rng, n * width);
      std::vector<int32_t> pos(static_cast<size_t>(n)), slots(static_cast<size_t>(n));
      std::vector<int32_t> all_slots(block_size * num_blocks);
      for (size_t i = 0; i < all_slots.size(); ++i) all_slots[i] = static_cast<int32_t>(i);
      std::shuffle(all_slots.begin(), all_slots.end(), rng);
      for (int64_t t = 0; t < n; ++t) {
        pos[t] = static_cast<int32_t>(rng() % 40000);
        slots[t] = t % 4 == 3 ? -1 : all_slots[static_cast<size_t>(t)];  // padding rows skip
      }
      std::vector<float> inv(static_cast<size_t>(c.rotary_dim / 2));
      for (size_t j = 0; j < inv.size(); ++j) {
        inv[j] = std::pow(10000.f, -2.f * static_cast<float>(j) / c.rotary_dim);
      }
      std::vector<float> qn = RandBf16(rng, D, 0.3f), kn = RandBf16(rng, D, 0.3f);
      const Shape pool{num_blocks, block_size, c.kv_heads, D};
      std::vector<float> kpool = RandBf16(rng, pool.numel()), vpool = RandBf16(rng, pool.numel());

      auto run = [&](Backend& be, auto upload) {
        Backend::QkvLayout l;
        l.num_heads = c.heads;
        l.num_kv_heads = c.kv_heads;
        l.head_dim = c.head_dim;
        if (c.qk_norm) {
          l.q_norm = upload(HostF32(Shape{D}, qn));
          l.k_norm = upload(HostF32(Shape{D}, kn));
        }
        l.eps = 1e-6f;
        l.norm_offset = c.norm_offset;
        RopeTable rope{upload(HostF32(Shape{c.rotary_dim / 2}, inv)), c.rotary_dim, c.factor,
                       c.interleaved};
        AttentionMeta meta;
        meta.slot_mapping = upload(HostI32(slots));
        KvLayer layer{upload(HostF32(pool, kpool)), upload(HostF32(pool, vpool))};
        Tensor q = be.Alloc(be.act_dtype(), Shape{n, q_dim});
        be.QkvRopeStore(upload(HostF32(Shape{n, width}, qkv)), upload(HostI32(pos)), rope, l, meta,
                        layer, q);
        return std::vector<Tensor>{q, layer.k, layer.v};
      };
      std::vector<Tensor> ref = run(cpu_, [](const Tensor& t) { return t; });
      std::vector<Tensor> got = run(*gpu_, [&](const Tensor& t) { return gpu_->Upload(t); });
      const double tol = c.qk_norm ? kTolReRounded : kTolRounded;
      const char* what[] = {"q", "k pool", "v pool"};
      for (int i = 0; i < 3; ++i) {
        EXPECT_LT(NormalizedError(GpuValues(*gpu_, got[i]), CpuValues(ref[i])), tol)
            << what[i] << ": heads " << c.heads << "/" << c.kv_heads << " d " << c.head_dim << " n "
            << n;
      }
      // The v rows are copies and untouched slots keep their values: exact.
      EXPECT_EQ(GpuValues(*gpu_, got[2]), CpuValues(ref[2]));
    }
  }
}

// The GEMV path with the activation in its epilogue (n <= 8; f small enough for 2 / 4 warps per
// column) and the GEMM + pair-activation path (n > 8), vs the CPU's GEMM, split and multiply.
TEST_F(CudaFusedOpsTest, MatMulGatedMatchesGemmThenActivation) {
  std::mt19937 rng(13);
  for (auto act : {Backend::GatedAct::kSilu, Backend::GatedAct::kGeluTanh}) {
    for (int64_t n : {1, 3, 8, 9, 64}) {
      for (int64_t f : {96, 1000, 1003, 8192}) {
        // f 1003, k 2056: a partial last row group and a partial last slice in the batch-1
        // streamed GEMV (stream_gemv.cu).
        const int64_t k = f == 8192 ? 2048 : (f == 1003 ? 2056 : 64);
        std::vector<float> xv = RandBf16(rng, n * k), gv = RandBf16(rng, f * k, 0.1f),
                           uv = RandBf16(rng, f * k, 0.1f);
        Tensor cout = cpu_.Alloc(DType::kF32, Shape{n, f});
        cpu_.MatMulGated(HostF32(Shape{n, k}, xv),
                         cpu_.FuseGateUp(HostF32(Shape{f, k}, gv), HostF32(Shape{f, k}, uv)), act,
                         cout);
        Tensor w = gpu_->FuseGateUp(gpu_->Upload(HostF32(Shape{f, k}, gv)),
                                    gpu_->Upload(HostF32(Shape{f, k}, uv)));
        for (bool streamed : {true, false}) {  // n = 1: the streamed GEMV or the small-batch one
          gpu_->set_stream_gemv(streamed);
          Tensor gout = gpu_->AllocScratch(DType::kBF16, Shape{n, f});
          Poison(*gpu_, gout);
          gpu_->MatMulGated(gpu_->Upload(HostF32(Shape{n, k}, xv)), w, act, gout);
          EXPECT_LT(NormalizedError(GpuValues(*gpu_, gout), CpuValues(cout)), kTolReRounded)
              << "n " << n << " f " << f << " gelu " << (act == Backend::GatedAct::kGeluTanh)
              << " streamed " << streamed;
        }
        gpu_->set_stream_gemv(true);
      }
    }
  }
}

TEST_F(CudaFusedOpsTest, ConcatRowsIsExact) {
  std::mt19937 rng(14);
  std::vector<float> a = RandBf16(rng, 5 * 24), b = RandBf16(rng, 3 * 24), c = RandBf16(rng, 24);
  Tensor m = gpu_->ConcatRows({gpu_->Upload(HostF32(Shape{5, 24}, a)),
                               gpu_->Upload(HostF32(Shape{3, 24}, b)),
                               gpu_->Upload(HostF32(Shape{1, 24}, c))});
  ASSERT_EQ(m.shape(), (Shape{9, 24}));
  std::vector<float> want = a;
  want.insert(want.end(), b.begin(), b.end());
  want.insert(want.end(), c.begin(), c.end());
  EXPECT_EQ(GpuValues(*gpu_, m), want);
  // 1-D (biases, f32).
  Tensor v = gpu_->ConcatRows({gpu_->Upload(HostF32(Shape{3}, {1.f, 2.f, 3.f})),
                               gpu_->Upload(HostF32(Shape{2}, {4.f, 5.f}))});
  ASSERT_EQ(v.shape(), (Shape{5}));
  EXPECT_EQ(GpuValues(*gpu_, v), (std::vector<float>{1.f, 2.f, 3.f, 4.f, 5.f}));
  // The CPU default gives the same layout.
  Tensor cm = cpu_.ConcatRows({HostF32(Shape{5, 24}, a), HostF32(Shape{3, 24}, b)});
  std::vector<float> cwant(a);
  cwant.insert(cwant.end(), b.begin(), b.end());
  EXPECT_EQ(CpuValues(cm), cwant);
}

}  // namespace
}  // namespace loom
