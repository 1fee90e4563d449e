// The GEMV kernels' epilogues (small_batch_gemm.cu, quant_gemv.cu, fp8_gemv.cu): a warp's column
// sums of up to N rows of x stored under a GemvEpilogue (small_batch_gemm.cuh), either by the warp
// alone or, when a column's sum needs other warps (split columns, gated pairs), through shared
// memory; and the RMSNorm prologue of the bf16-x kernels. .cu files only.
#pragma once

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/small_batch_gemm.cuh"

namespace loom::cuda {

// The input prologue (n = 1): the block normalizes x (RMSNorm with `norm`) into shared memory
// as bf16, as a materialized RmsNorm output would be rounded, and returns it as the GEMV's x.
// Every block repeats this small reduction (x is one hidden-size row, read from L2) instead of
// waiting for a separate norm kernel.
template <int kThreads>
__device__ __forceinline__ const uint4* NormalizeInput(const uint4* x, int64_t k_vec,
                                                       const GemvNorm& norm, uint4* xs) {
  float ss = 0.f;
  for (int64_t v = threadIdx.x; v < k_vec; v += kThreads) {
    float f[8];
    UnpackBf16x8(x[v], f);
#pragma unroll
    for (int e = 0; e < 8; ++e) ss += f[e] * f[e];
  }
  const float total = BlockSum<kThreads>(ss);
  const float inv = rsqrtf(total / static_cast<float>(k_vec * 8) + norm.eps);
  for (int64_t v = threadIdx.x; v < k_vec; v += kThreads) {
    float f[8];
    UnpackBf16x8(x[v], f);
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = f[e] * inv * (norm.w[v * 8 + e] + norm.offset);
    xs[v] = PackBf16x8(f);
  }
  __syncthreads();
  return xs;
}

// out[index] for a column sum `v` under epilogue Epi (kNone / kAddTo).
template <typename Out, GemvEpilogue Epi>
__device__ __forceinline__ void StoreColumn(Out* out, int64_t index, float v) {
  if constexpr (Epi == GemvEpilogue::kAddTo) {
    out[index] = FromF32<Out>(ToF32(out[index]) + v);  // this warp owns out[index]
  } else {
    out[index] = FromF32<Out>(v);
  }
}

// A block of kWarps warps computes kWarps / S columns, starting at column `first_col`; warp
// c * S + p holds part p of the block's column c (`col` = first_col + warp / S). Rows r >= n are
// not stored. Every thread of the block calls this (it synchronizes).
template <int kWarps, int N, int S, typename Out, GemvEpilogue Epi>
__device__ __forceinline__ void SharedMemoryEpilogue(const float (&acc)[N], Out* out, int64_t m,
                                                     int64_t first_col, int n, int lane, int warp) {
  constexpr int kCols = kWarps / S;
  __shared__ float partial[kWarps][N];
#pragma unroll
  for (int r = 0; r < N; ++r) {
    const float sum = WarpSum(acc[r]);
    if (lane == 0) partial[warp][r] = sum;
  }
  __syncthreads();
  auto column_sum = [&](int c, int r) {
    float sum = 0.f;
#pragma unroll
    for (int p = 0; p < S; ++p) sum += partial[c * S + p][r];
    return sum;
  };
  if constexpr (Epi == GemvEpilogue::kNone || Epi == GemvEpilogue::kAddTo) {
    const int64_t col = first_col + warp / S;
    if (warp % S == 0 && lane == 0 && col < m) {
#pragma unroll
      for (int r = 0; r < N; ++r) {
        if (r < n) StoreColumn<Out, Epi>(out, r * m + col, column_sum(warp / S, r));
      }
    }
  } else {
    static_assert(kCols % 2 == 0, "a (gate, up) pair must sit in one block");
    const int t = static_cast<int>(threadIdx.x);
    if (t < kCols / 2 * N) {
      const int pair = t / N, r = t % N;
      const int64_t gate_col = first_col + 2 * pair;
      if (gate_col + 1 < m && r < n) {
        const float g = column_sum(2 * pair, r), u = column_sum(2 * pair + 1, r);
        const float v = Epi == GemvEpilogue::kSiluMul ? SiluMulOp{}(g, u) : GeluTanhMulOp{}(g, u);
        out[r * (m / 2) + gate_col / 2] = FromF32<Out>(v);
      }
    }
  }
}

}  // namespace loom::cuda
