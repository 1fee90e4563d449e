#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/fp8_gemv.cuh"
#include "backend/cuda/gemv_epilogue.cuh"
#include "backend/cuda/launch.cuh"
#include "base/hash_uniform.h"

namespace loom::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 4;
constexpr int kBlock = 128;  // elements per scale (tensor/quant.h BlockFP8)

// The 16 e4m3 codes of v as f32 (exact: e4m3 -> f16 is exact, f16 -> f32 too).
__device__ __forceinline__ void DecodeFp8x16(const uint4& v, float (&f)[16]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const auto pair = static_cast<__nv_fp8x2_storage_t>(words[w] >> (16 * h));
      const __half2 hv = __half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3));
      const float2 fv = __half22float2(hv);
      f[4 * w + 2 * h] = fv.x;
      f[4 * w + 2 * h + 1] = fv.y;
    }
  }
}

// Blocks of kWarps warps; S warps share a weight row (each every S-th 16-byte unit of its codes;
// partial sums meet in shared memory), kWarps / S rows a block. Unit u of a row holds elements
// 16u..16u+15, under scale u / 8; it meets x's vectors 2u and 2u + 1 (8 bf16 each).
template <int N, int S, typename Out, GemvEpilogue Epi, bool kNorm>
__global__ void __launch_bounds__(kThreads)
    Fp8GemvKernel(const uint4* __restrict__ x, const uint8_t* __restrict__ w, Out* out, int64_t m,
                  int64_t k, GemvNorm norm) {
  constexpr int kCols = kWarps / S;
  constexpr int64_t kStride = 32 * S;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, part = warp % S;
  const int64_t col = blockIdx.x * int64_t{kCols} + warp / S;
  const int64_t units = k / 16, row_bytes = k + 4 * (k / kBlock);
  const uint4* codes = reinterpret_cast<const uint4*>(w + col * row_bytes);
  const float* scales = reinterpret_cast<const float*>(w + col * row_bytes + k);
  int64_t i = part * 32 + lane;
  uint4 wv[kUnroll];
  bool prefetched = col < m && i + kStride * (kUnroll - 1) < units;
  if (prefetched) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(codes + i + kStride * u);  // streamed once
  }
  PdlWait();
  PdlLaunchDependents();
  const int64_t k_vec = k / 8;
  if constexpr (kNorm) {
    static_assert(N == 1, "the norm prologue holds one row");
    __shared__ uint4 xs[kGemvNormMaxK / 8];
    x = NormalizeInput<kThreads>(x, k_vec, norm, xs);
  }
  float acc[N];
#pragma unroll
  for (int r = 0; r < N; ++r) acc[r] = 0.f;
  auto dot_unit = [&](const uint4& v, int64_t u) {
    float wf[16];
    DecodeFp8x16(v, wf);
    const float d = __ldg(scales + u / 8);
#pragma unroll
    for (int r = 0; r < N; ++r) {
      float x0[8], x1[8];
      UnpackBf16x8(x[r * k_vec + 2 * u], x0);
      UnpackBf16x8(x[r * k_vec + 2 * u + 1], x1);
      float part_sum = 0.f;
#pragma unroll
      for (int e = 0; e < 8; ++e) part_sum += wf[e] * x0[e];
#pragma unroll
      for (int e = 0; e < 8; ++e) part_sum += wf[8 + e] * x1[e];
      acc[r] += d * part_sum;
    }
  };
  if (col < m) {
    for (; i + kStride * (kUnroll - 1) < units; i += kStride * kUnroll) {
      if (!prefetched) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(codes + i + kStride * u);
      }
      prefetched = false;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) dot_unit(wv[u], i + kStride * u);
    }
    for (; i < units; i += kStride) dot_unit(__ldcs(codes + i), i);
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
  const auto blocks = static_cast<unsigned>((c.m + kCols - 1) / kCols);
  const auto* xv = static_cast<const uint4*>(c.x);
  const auto* wb = static_cast<const uint8_t*>(c.w);
  if constexpr (Epi == GemvEpilogue::kNone) {
    if (c.out_dtype == DType::kF32) {
      LaunchPdl(Fp8GemvKernel<N, S, float, Epi, kNorm>, dim3(blocks), dim3(kThreads), 0, c.stream,
                c.pdl, xv, wb, static_cast<float*>(c.out), c.m, c.k, c.norm);
      return;
    }
  }
  LaunchPdl(Fp8GemvKernel<N, S, __nv_bfloat16, Epi, kNorm>, dim3(blocks), dim3(kThreads), 0,
            c.stream, c.pdl, xv, wb, static_cast<__nv_bfloat16*>(c.out), c.m, c.k, c.norm);
}

// Warps a row: the fewest that give about four blocks an SM of a 132-SM GPU (m * S / kWarps >=
// 528), as the bf16 kernel; gated epilogues stop at 4 (a block holds whole pairs).
template <int N, GemvEpilogue Epi, bool kNorm>
void LaunchN(const Call& c) {
  constexpr int64_t kWant = 528 * kWarps;
  constexpr bool kGated = Epi == GemvEpilogue::kSiluMul || Epi == GemvEpilogue::kGeluTanhMul;
  if (c.m >= kWant) return LaunchNS<N, 1, Epi, kNorm>(c);
  if (c.m * 2 >= kWant) return LaunchNS<N, 2, Epi, kNorm>(c);
  if (kGated || c.m * 4 >= kWant) return LaunchNS<N, 4, Epi, kNorm>(c);
  if constexpr (!kGated) LaunchNS<N, 8, Epi, kNorm>(c);
}

template <GemvEpilogue Epi>
void LaunchRows(const Call& c, int64_t n, bool norm) {
  if (norm) return LaunchN<1, Epi, true>(c);
  if (n == 1) return LaunchN<1, Epi, false>(c);
  if (n == 2) return LaunchN<2, Epi, false>(c);
  if (n <= 4) return LaunchN<4, Epi, false>(c);
  LaunchN<8, Epi, false>(c);
}

// One warp a block of 128 (4 elements a lane): HashUniform's values, amax over the warp, then
// QuantizeRow(kFP8)'s d = amax / 448 and codes x / d rounded to nearest even (IEEE division and
// the saturating e4m3 conversion: the host's bits).
__global__ void FillUniformFp8Kernel(uint8_t* dst, int64_t rows, int64_t k, uint64_t seed, float lo,
                                     float scale) {
  const int64_t blocks_per_row = k / kBlock;
  const int64_t gw = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (gw >= rows * blocks_per_row) return;
  const int64_t r = gw / blocks_per_row, b = gw % blocks_per_row;
  float v[4];
  float amax = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int64_t c = b * kBlock + 4 * lane + e;
    v[e] = HashUniform(seed, static_cast<uint64_t>(r * k + c), lo, scale);
    amax = fmaxf(amax, fabsf(v[e]));
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float d = __fdiv_rn(amax, 448.f);
  uint8_t* row = dst + r * (k + 4 * blocks_per_row);
  uint32_t packed = 0;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const uint32_t code =
        d > 0.f ? __nv_cvt_float_to_fp8(__fdiv_rn(v[e], d), __NV_SATFINITE, __NV_E4M3) : 0u;
    packed |= code << (8 * e);
  }
  reinterpret_cast<uint32_t*>(row + b * kBlock)[lane] = packed;
  if (lane == 0) reinterpret_cast<float*>(row + k)[b] = d;
}

}  // namespace

bool Fp8GemvApplies(const void* x, const void* w, int64_t n, int64_t k, bool norm) {
  if (n < 1 || n > kSmallBatchMaxRows || k <= 0 || k % 512 != 0 ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0) {
    return false;
  }
  return !norm || (n == 1 && k <= kGemvNormMaxK);
}

void LaunchFp8Gemv(const void* x, const void* w, void* out, DType out_dtype, int64_t n, int64_t m,
                   int64_t k, cudaStream_t stream, bool pdl, GemvEpilogue epilogue,
                   const GemvNorm* norm) {
  CHECK(Fp8GemvApplies(x, w, n, k, norm != nullptr)) << "Fp8Gemv: n " << n << " k " << k;
  CHECK(out_dtype == DType::kBF16 || (out_dtype == DType::kF32 && epilogue == GemvEpilogue::kNone))
      << "Fp8Gemv: out " << DTypeName(out_dtype);
  const Call c{x, w, out, out_dtype, m, k, norm != nullptr ? *norm : GemvNorm{}, stream, pdl};
  const bool normed = norm != nullptr;
  switch (epilogue) {
    case GemvEpilogue::kNone:
      return LaunchRows<GemvEpilogue::kNone>(c, n, normed);
    case GemvEpilogue::kAddTo:
      return LaunchRows<GemvEpilogue::kAddTo>(c, n, normed);
    case GemvEpilogue::kSiluMul:
      CHECK_EQ(m % 2, 0) << "Fp8Gemv gated: m " << m;
      return LaunchRows<GemvEpilogue::kSiluMul>(c, n, normed);
    case GemvEpilogue::kGeluTanhMul:
      CHECK_EQ(m % 2, 0) << "Fp8Gemv gated: m " << m;
      return LaunchRows<GemvEpilogue::kGeluTanhMul>(c, n, normed);
  }
}

void LaunchFillUniformFp8(void* dst, int64_t rows, int64_t k, uint64_t seed, float lo, float scale,
                          cudaStream_t stream) {
  CHECK(k % kBlock == 0) << "FillUniformFp8: rows of " << k;
  const int64_t warps = rows * (k / kBlock);
  if (warps == 0) return;
  constexpr int kFillThreads = 256;
  const auto blocks = static_cast<unsigned>((warps * 32 + kFillThreads - 1) / kFillThreads);
  FillUniformFp8Kernel<<<blocks, kFillThreads, 0, stream>>>(static_cast<uint8_t*>(dst), rows, k,
                                                            seed, lo, scale);
  CUDA_CHECK_LAUNCH();
}

}  // namespace loom::cuda
