#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/gemv_epilogue.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/small_batch_gemm.cuh"
#include "backend/cuda/stream_gemv.cuh"

namespace loom::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 4;

// S warps share one output column (each takes every S-th 512-byte chunk of the row; partial sums
// meet in shared memory), so a block of kWarps warps computes kWarps / S columns. S > 1 puts
// enough blocks and loads in flight on the GPU when m is small (k/v projections: m = 512..1024).
//
// Launched with PDL (launch.cuh): the first kUnroll weight vectors of every thread are loaded
// before PdlWait (weights are never written by a step), so the block starts with its loads in
// flight while the kernel that produces x is still finishing.
// Epi: kNone writes the m columns; kAddTo adds them to out (a residual stream); kSiluMul /
// kGeluTanhMul read w's rows as (gate, up) pairs (FuseGateUp's interleaved layout) and write
// act(gate) * up to m / 2 columns: the pair sits in one block (kCols is even).
// kNorm (N = 1): x is RMSNorm'ed in the prologue (NormalizeInput).
template <int N, int S, typename Out, GemvEpilogue Epi, bool kNorm>
__global__ void __launch_bounds__(kThreads)
    SmallBatchGemmKernel(const uint4* __restrict__ x, const uint4* __restrict__ w, Out* out,
                         int64_t m, int64_t k_vec, GemvNorm norm) {
  constexpr int kCols = kWarps / S;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int part = warp % S;
  const int64_t col = blockIdx.x * int64_t{kCols} + warp / S;
  constexpr int64_t kStride = 32 * S;
  const uint4* wr = w + col * k_vec;
  int64_t i = part * 32 + lane;
  uint4 wv[kUnroll];
  bool prefetched = col < m && i + kStride * (kUnroll - 1) < k_vec;
  if (prefetched) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wr + i + kStride * u);  // streamed once
  }
  PdlWait();
  PdlLaunchDependents();
  if constexpr (kNorm) {
    static_assert(N == 1, "the norm prologue holds one row");
    __shared__ uint4 xs[kGemvNormMaxK / 8];
    x = NormalizeInput<kThreads>(x, k_vec, norm, xs);
  }
  float acc[N];
#pragma unroll
  for (int r = 0; r < N; ++r) acc[r] = 0.f;
  if (col < m) {
    for (; i + kStride * (kUnroll - 1) < k_vec; i += kStride * kUnroll) {
      if (!prefetched) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wr + i + kStride * u);
      }
      prefetched = false;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        float wf[8];
        UnpackBf16x8(wv[u], wf);
#pragma unroll
        for (int r = 0; r < N; ++r) {
          float xf[8];
          UnpackBf16x8(x[r * k_vec + i + kStride * u], xf);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r] += wf[e] * xf[e];
        }
      }
    }
    for (; i < k_vec; i += kStride) {
      float wf[8];
      UnpackBf16x8(wr[i], wf);
#pragma unroll
      for (int r = 0; r < N; ++r) {
        float xf[8];
        UnpackBf16x8(x[r * k_vec + i], xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r] += wf[e] * xf[e];
      }
    }
  }
  if constexpr (S == 1 && (Epi == GemvEpilogue::kNone || Epi == GemvEpilogue::kAddTo)) {
#pragma unroll
    for (int r = 0; r < N; ++r) {
      const float sum = WarpSum(acc[r]);
      if (lane == 0 && col < m) StoreColumn<Out, Epi>(out, r * m + col, sum);
    }
  } else {
    SharedMemoryEpilogue<kWarps, N, S, Out, Epi>(acc, out, m, blockIdx.x * int64_t{kCols}, N, lane,
                                                 warp);
  }
}

struct Call {
  const void* x;
  const void* w;
  void* out;
  DType out_dtype;
  int64_t m, k;
  GemvNorm norm;
  cudaStream_t stream;
  bool pdl;
};

template <int N, int S, GemvEpilogue Epi, bool kNorm>
void LaunchNS(const Call& c) {
  constexpr int kCols = kWarps / S;
  const unsigned blocks = static_cast<unsigned>((c.m + kCols - 1) / kCols);
  const auto* xv = static_cast<const uint4*>(c.x);
  const auto* wv = static_cast<const uint4*>(c.w);
  if constexpr (Epi == GemvEpilogue::kNone) {
    if (c.out_dtype == DType::kF32) {
      LaunchPdl(SmallBatchGemmKernel<N, S, float, Epi, kNorm>, dim3(blocks), dim3(kThreads), 0,
                c.stream, c.pdl, xv, wv, static_cast<float*>(c.out), c.m, c.k / 8, c.norm);
      return;
    }
  }
  LaunchPdl(SmallBatchGemmKernel<N, S, __nv_bfloat16, Epi, kNorm>, dim3(blocks), dim3(kThreads), 0,
            c.stream, c.pdl, xv, wv, static_cast<__nv_bfloat16*>(c.out), c.m, c.k / 8, c.norm);
}

// Warps per column for n = 1: the fewest that give at least ~4 blocks per SM of a 132-SM H200
// (m * S / kWarps >= 528), so small-m GEMVs do not leave SMs idle. Gated epilogues stop at 4
// (a block must hold whole (gate, up) pairs).
template <int N, GemvEpilogue Epi, bool kNorm>
void LaunchN(const Call& c) {
  if constexpr (N == 1) {
    constexpr int64_t kWantBlocks = 528;
    constexpr bool kGated = Epi == GemvEpilogue::kSiluMul || Epi == GemvEpilogue::kGeluTanhMul;
    if (c.m * 1 >= kWantBlocks * kWarps) return LaunchNS<1, 1, Epi, kNorm>(c);
    if (c.m * 2 >= kWantBlocks * kWarps) return LaunchNS<1, 2, Epi, kNorm>(c);
    if (kGated || c.m * 4 >= kWantBlocks * kWarps) return LaunchNS<1, 4, Epi, kNorm>(c);
    if constexpr (!kGated) return LaunchNS<1, 8, Epi, kNorm>(c);
  } else {
    LaunchNS<N, 1, Epi, false>(c);
  }
}

template <GemvEpilogue Epi>
void LaunchRows(const Call& c, int64_t n, bool norm) {
  if (norm) return LaunchN<1, Epi, true>(c);
  switch (n) {
    case 1:
      LaunchN<1, Epi, false>(c);
      break;
    case 2:
      LaunchN<2, Epi, false>(c);
      break;
    case 3:
      LaunchN<3, Epi, false>(c);
      break;
    case 4:
      LaunchN<4, Epi, false>(c);
      break;
    case 5:
      LaunchN<5, Epi, false>(c);
      break;
    case 6:
      LaunchN<6, Epi, false>(c);
      break;
    case 7:
      LaunchN<7, Epi, false>(c);
      break;
    default:
      LaunchN<8, Epi, false>(c);
      break;
  }
}

}  // namespace

bool SmallBatchGemmApplies(const void* x, const void* w, int64_t n, int64_t k) {
  return n >= 1 && n <= kSmallBatchMaxRows && k % 8 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

bool SmallBatchGemmNormApplies(const void* x, const void* w, int64_t n, int64_t k) {
  return n == 1 && k <= kGemvNormMaxK && SmallBatchGemmApplies(x, w, n, k);
}

void LaunchSmallBatchGemm(const void* x, const void* w, void* out, DType out_dtype, int64_t n,
                          int64_t m, int64_t k, cudaStream_t stream, bool pdl,
                          GemvEpilogue epilogue, const GemvNorm* norm, bool stream_batch1,
                          unsigned* queue) {
  CHECK(SmallBatchGemmApplies(x, w, n, k)) << "SmallBatchGemm: n " << n << " k " << k;
  CHECK(norm == nullptr || SmallBatchGemmNormApplies(x, w, n, k))
      << "SmallBatchGemm norm prologue: n " << n << " k " << k;
  CHECK(out_dtype == DType::kBF16 || (out_dtype == DType::kF32 && epilogue == GemvEpilogue::kNone))
      << "SmallBatchGemm: out " << DTypeName(out_dtype);
  if (stream_batch1 && n == 1 &&
      StreamGemvApplies(x, w, k)) {  // batch 1 on Hopper: the TMA-streamed GEMV
    return LaunchStreamGemv(x, w, out, out_dtype, m, k, stream, pdl, epilogue, norm, queue);
  }
  const Call c{x, w, out, out_dtype, m, k, norm != nullptr ? *norm : GemvNorm{}, stream, pdl};
  const bool normed = norm != nullptr;
  switch (epilogue) {
    case GemvEpilogue::kNone:
      LaunchRows<GemvEpilogue::kNone>(c, n, normed);
      break;
    case GemvEpilogue::kAddTo:
      LaunchRows<GemvEpilogue::kAddTo>(c, n, normed);
      break;
    case GemvEpilogue::kSiluMul:
      CHECK_EQ(m % 2, 0) << "SmallBatchGemm gated: m " << m;
      LaunchRows<GemvEpilogue::kSiluMul>(c, n, normed);
      break;
    case GemvEpilogue::kGeluTanhMul:
      CHECK_EQ(m % 2, 0) << "SmallBatchGemm gated: m " << m;
      LaunchRows<GemvEpilogue::kGeluTanhMul>(c, n, normed);
      break;
  }
}

}  // namespace loom::cuda
