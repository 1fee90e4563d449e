// The CUDA backend's fused ops (one kernel each) vs the CPU backend running the backend's
// default implementations of the same ops (the unfused sequences they replace: backend.cc), on
// awkward sizes. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <string>

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
          // f32 out (the final norm and the logits projection).
          Tensor gf = gpu_->AllocScratch(DType::kF32, Shape{n, 2 * m});
          Poison(*gpu_, gf);
          gpu_->RmsNormMatMul(gx, gn, gpu_->Upload(HostF32(Shape{2 * m, k}, wv)), Tensor(), gf);
          EXPECT_LT(NormalizedError(GpuValues(*gpu_, gf), CpuValues(cout)), kTolReRounded)
              << "f32 out: n " << n << " k " << k << " offset " << offset;
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

// A QkvRopeStore problem: head layout, rope variant and per-head norms.
struct RopeCase {
  int heads, kv_heads, head_dim, rotary_dim;
  bool interleaved, qk_norm;
  float factor, norm_offset;
};

// A case's random per-head norm weights and KV pools and its rope table, built on any backend
// through `upload`.
struct RopeFixture {
  RopeFixture(const RopeCase& rc, std::mt19937& rng, int num_blocks, int block_size)
      : c(rc), pool{num_blocks, block_size, rc.kv_heads, rc.head_dim} {
    inv.resize(static_cast<size_t>(c.rotary_dim / 2));
    for (size_t j = 0; j < inv.size(); ++j) {
      inv[j] = std::pow(10000.f, -2.f * static_cast<float>(j) / c.rotary_dim);
    }
    qn = RandBf16(rng, c.head_dim, 0.3f);
    kn = RandBf16(rng, c.head_dim, 0.3f);
    kpool = RandBf16(rng, pool.numel());
    vpool = RandBf16(rng, pool.numel());
  }
  template <typename Upload>
  Backend::QkvLayout Layout(Upload upload) const {
    Backend::QkvLayout l;
    l.num_heads = c.heads;
    l.num_kv_heads = c.kv_heads;
    l.head_dim = c.head_dim;
    if (c.qk_norm) {
      l.q_norm = upload(HostF32(Shape{c.head_dim}, qn));
      l.k_norm = upload(HostF32(Shape{c.head_dim}, kn));
    }
    l.eps = 1e-6f;
    l.norm_offset = c.norm_offset;
    return l;
  }
  template <typename Upload>
  RopeTable Rope(Upload upload) const {
    return RopeTable{upload(HostF32(Shape{c.rotary_dim / 2}, inv)), c.rotary_dim, c.factor,
                     c.interleaved};
  }
  template <typename Upload>
  KvLayer Pools(Upload upload) const {
    return KvLayer{upload(HostF32(pool, kpool)), upload(HostF32(pool, vpool))};
  }

  RopeCase c;
  Shape pool;
  std::vector<float> inv, qn, kn, kpool, vpool;
};

TEST_F(CudaFusedOpsTest, QkvRopeStoreMatchesCopyNormRopeStore) {
  std::mt19937 rng(12);
  const RopeCase cases[] = {
      {32, 8, 128, 128, false, false, 1.f, 0.f},  // Llama 3
      {16, 8, 128, 128, false, true, 1.f, 0.f},   // Qwen3: per-head norms
      {8, 4, 256, 256, false, true, 1.f, 1.f},    // Gemma 3: (1 + w) norms, d 256
      {4, 4, 96, 48, true, false, 1.2f, 0.f},     // partial, interleaved rotary, yarn factor
      {6, 2, 80, 80, false, true, 1.f, 0.f},      // head_dim not a multiple of 32
  };
  const int block_size = 7, num_blocks = 9;
  for (const RopeCase& c : cases) {
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
      const RopeFixture f(c, rng, num_blocks, block_size);

      auto run = [&](Backend& be, auto upload) {
        AttentionMeta meta;
        meta.slot_mapping = upload(HostI32(slots));
        KvLayer layer = f.Pools(upload);
        Tensor q = be.Alloc(be.act_dtype(), Shape{n, q_dim});
        be.QkvRopeStore(upload(HostF32(Shape{n, width}, qkv)), upload(HostI32(pos)), f.Rope(upload),
                        f.Layout(upload), meta, layer, q);
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

// Into quantized pools (--kv-quant) QkvRopeStore writes each k / v row as QuantizeKvRow does
// from the bf16 row it stores into a bf16 pool: bit for bit, codes and scales where
// tensor/kv_quant.h's block layout puts them.
TEST_F(CudaFusedOpsTest, QkvRopeStoreQuantizesRowsAsQuantizeKvRow) {
  std::mt19937 rng(13);
  const RopeCase cases[] = {
      {16, 8, 128, 128, false, true, 1.f, 0.f},  // Qwen3
      {4, 4, 96, 48, true, false, 1.2f, 0.f},    // groups of 32
      {6, 2, 80, 80, false, true, 1.f, 0.f},     // groups of 16
  };
  const int block_size = 7, num_blocks = 9;
  for (KvQuant kq : {KvQuant::kFp8, KvQuant::kInt8, KvQuant::kInt4}) {
    for (const RopeCase& c : cases) {
      const int64_t n = 23, D = c.head_dim, q_dim = c.heads * D, kv_dim = c.kv_heads * D;
      const int64_t width = q_dim + 2 * kv_dim;
      const std::vector<float> qkv = RandBf16(rng, n * width, 3.f);
      std::vector<int32_t> pos(static_cast<size_t>(n)), slots(static_cast<size_t>(n));
      std::vector<int32_t> all_slots(block_size * num_blocks);
      std::iota(all_slots.begin(), all_slots.end(), 0);
      std::shuffle(all_slots.begin(), all_slots.end(), rng);
      for (int64_t t = 0; t < n; ++t) {
        pos[t] = static_cast<int32_t>(rng() % 40000);
        slots[t] = t % 4 == 3 ? -1 : all_slots[static_cast<size_t>(t)];
      }
      const RopeFixture f(c, rng, num_blocks, block_size);
      const auto upload = [&](const Tensor& t) { return gpu_->Upload(t); };
      AttentionMeta meta;
      meta.slot_mapping = upload(HostI32(slots));
      const Tensor qkv_t = upload(HostF32(Shape{n, width}, qkv));
      const Tensor pos_t = upload(HostI32(pos));
      KvLayer plain = f.Pools(upload);
      const int64_t row_bytes = static_cast<int64_t>(KvQuantRowBytes(kq, static_cast<int>(D)));
      const Shape qshape{num_blocks, block_size, c.kv_heads, row_bytes};
      KvLayer quant{gpu_->Alloc(DType::kU8, qshape), gpu_->Alloc(DType::kU8, qshape), kq, kq};
      Tensor q = gpu_->Alloc(DType::kBF16, Shape{n, q_dim});
      gpu_->QkvRopeStore(qkv_t, pos_t, f.Rope(upload), f.Layout(upload), meta, plain, q);
      gpu_->QkvRopeStore(qkv_t, pos_t, f.Rope(upload), f.Layout(upload), meta, quant, q);
      const KvQuantBlock blk(kq, static_cast<int>(D), block_size, c.kv_heads);
      for (int pool = 0; pool < 2; ++pool) {
        const std::vector<float> rows = GpuValues(*gpu_, pool == 0 ? plain.k : plain.v);
        std::vector<uint8_t> got(static_cast<size_t>(quant.k.nbytes()));
        gpu_->CopyToHost(pool == 0 ? quant.k : quant.v, got.data());
        std::vector<uint8_t> codes(blk.code_bytes), scales(blk.scale_bytes);
        for (int64_t t = 0; t < n; ++t) {
          const int32_t slot = slots[static_cast<size_t>(t)];
          if (slot < 0) continue;
          const int64_t b = slot / block_size;
          const int off = slot % block_size;
          for (int h = 0; h < c.kv_heads; ++h) {
            QuantizeKvRow(kq, rows.data() + (int64_t{slot} * c.kv_heads + h) * D,
                          static_cast<int>(D), codes.data(), scales.data());
            const uint8_t* block = got.data() + b * static_cast<int64_t>(blk.BlockBytes());
            ASSERT_TRUE(std::equal(codes.begin(), codes.end(), block + blk.Codes(off, h)))
                << KvQuantName(kq) << (pool == 0 ? " k" : " v") << " codes, d " << D << " slot "
                << slot << " head " << h;
            ASSERT_TRUE(std::equal(scales.begin(), scales.end(), block + blk.Scales(off, h)))
                << KvQuantName(kq) << (pool == 0 ? " k" : " v") << " scales, d " << D;
          }
        }
      }
    }
  }
}

// RmsNorm(x) @ w_qkv^T and QkvRopeStore in one call: at n = 1 without q/k norms the streamed
// GEMV does the rope and the stores in its epilogue, bit-identical to the two-launch sequence on
// the same backend; elsewhere (n > 1, per-head norms) the default runs. Both vs the CPU.
TEST_F(CudaFusedOpsTest, RmsNormQkvRopeStoreMatchesTwoLaunches) {
  std::mt19937 rng(17);
  const std::pair<RopeCase, int64_t> cases[] = {
      // (heads, hidden size)
      {{32, 8, 128, 128, false, false, 1.f, 0.f}, 512},  // Llama-3.1-8B heads
      {{32, 8, 64, 64, false, false, 1.f, 0.f}, 2048},   // Llama-3.2-1B heads
      {{4, 4, 96, 48, true, false, 1.2f, 0.f}, 264},     // partial, interleaved rotary, yarn
      {{6, 2, 80, 80, false, false, 1.f, 0.f}, 136},     // head_dim not a multiple of 32
      {{16, 8, 128, 128, false, true, 1.f, 0.f}, 256},   // Qwen3 norms: the default sequence
  };
  const int block_size = 7, num_blocks = 9;
  for (const auto& [c, k] : cases) {
    for (int64_t n : {1, 3}) {
      for (int32_t slot0 : {11, -1}) {  // -1: a padding row, no store
        const int64_t D = c.head_dim, q_dim = c.heads * D, kv_dim = c.kv_heads * D;
        const int64_t width = q_dim + 2 * kv_dim;
        std::vector<float> xv = RandBf16(rng, n * k), nw = RandBf16(rng, k, 0.3f),
                           wv = RandBf16(rng, width * k, 0.05f);
        std::vector<int32_t> pos(static_cast<size_t>(n)), slots(static_cast<size_t>(n));
        for (int64_t t = 0; t < n; ++t) {
          pos[t] = static_cast<int32_t>(rng() % 40000);
          slots[t] = t == 0 ? slot0 : static_cast<int32_t>(20 + t);
        }
        const RopeFixture f(c, rng, num_blocks, block_size);
        // fused: one RmsNormQkvRopeStore call; else RmsNormMatMul then QkvRopeStore.
        auto run = [&](Backend& be, auto upload, bool fused) {
          AttentionMeta meta;
          meta.slot_mapping = upload(HostI32(slots));
          KvLayer layer = f.Pools(upload);
          const Backend::NormSpec norm{upload(HostF32(Shape{k}, nw)), 1e-5f, 0.f};
          Tensor x = upload(HostF32(Shape{n, k}, xv)), w = upload(HostF32(Shape{width, k}, wv));
          Tensor positions = upload(HostI32(pos));
          Tensor q = be.Alloc(be.act_dtype(), Shape{n, q_dim});
          Tensor qkv = be.Alloc(be.act_dtype(), Shape{n, width});
          if (fused) {
            be.RmsNormQkvRopeStore(x, norm, w, Tensor(), positions, f.Rope(upload),
                                   f.Layout(upload), meta, layer, qkv, q);
          } else {
            be.RmsNormMatMul(x, norm, w, Tensor(), qkv);
            be.QkvRopeStore(qkv, positions, f.Rope(upload), f.Layout(upload), meta, layer, q);
          }
          return std::vector<Tensor>{q, layer.k, layer.v};
        };
        auto gpu_upload = [&](const Tensor& t) { return gpu_->Upload(t); };
        std::vector<Tensor> ref = run(
            cpu_, [](const Tensor& t) { return t; }, true);
        std::vector<Tensor> fused = run(*gpu_, gpu_upload, true);
        std::vector<Tensor> two = run(*gpu_, gpu_upload, false);
        const char* what[] = {"q", "k pool", "v pool"};
        for (int i = 0; i < 3; ++i) {
          const std::string where = std::string(what[i]) + ": heads " + std::to_string(c.heads) +
                                    "/" + std::to_string(c.kv_heads) + " d " + std::to_string(D) +
                                    " n " + std::to_string(n) + " slot " + std::to_string(slot0);
          EXPECT_EQ(GpuValues(*gpu_, fused[i]), GpuValues(*gpu_, two[i])) << where;
          EXPECT_LT(NormalizedError(GpuValues(*gpu_, fused[i]), CpuValues(ref[i])), kTolReRounded)
              << where;
        }
      }
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
