#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/fp8_gemv.cuh"
#include "backend/cuda/gemv_epilogue.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/quant_gemv.cuh"
#include "backend/cuda/quant_layout.h"

namespace loom::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 4;
constexpr uint32_t kLowNibbles = 0x0F0F0F0Fu;

// One row of x, one group of 32: the int8 scale and the sums of the codes of its two halves.
struct XGroup {
  float d;
  int16_t s0, s1;
};

__device__ __forceinline__ float F16At(const uint8_t* p) {
  return __half2float(*reinterpret_cast<const __half*>(p));
}

// Byte i (0..15) of a 16-byte vector, i known only at run time.
__device__ __forceinline__ uint32_t ByteOf(const uint4& v, int i) {
  const uint32_t w = (i & 8) ? ((i & 4) ? v.w : v.z) : ((i & 4) ? v.y : v.x);
  return (w >> ((i & 3) * 8)) & 0xFFu;
}

// q4_K sub-block j's 6-bit scale and min from the 12 scale bytes at bytes 4..15 of `meta`.
__device__ __forceinline__ void ScaleMinK4(const uint4& meta, int j, uint32_t* sc, uint32_t* mn) {
  auto q = [&](int i) { return ByteOf(meta, 4 + i); };
  if (j < 4) {
    *sc = q(j) & 63u;
    *mn = q(j + 4) & 63u;
  } else {
    *sc = (q(j + 4) & 0xFu) | ((q(j - 4) >> 6) << 4);
    *mn = (q(j + 4) >> 4) | ((q(j) >> 6) << 4);
  }
}

// 16 bytes at p, which may be unaligned (the dequantize path takes rows of any width).
__device__ __forceinline__ uint4 Load16(const uint8_t* p) {
  if (reinterpret_cast<uintptr_t>(p) % 16 == 0) return *reinterpret_cast<const uint4*>(p);
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    w[i] = p[4 * i] | (p[4 * i + 1] << 8) | (p[4 * i + 2] << 16) | (uint32_t{p[4 * i + 3]} << 24);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ int Dot16(const uint4& a, const int4& x, int s) {
  s = __dp4a(static_cast<int>(a.x), x.x, s);
  s = __dp4a(static_cast<int>(a.y), x.y, s);
  s = __dp4a(static_cast<int>(a.z), x.z, s);
  return __dp4a(static_cast<int>(a.w), x.w, s);
}

// The 4-bit codes of a group (nib plane, 16 bytes) dotted with the group's quantized x.
__device__ __forceinline__ int DotNib(const uint4& a, const int8_t* xq) {
  const int4 lo = *reinterpret_cast<const int4*>(xq);
  const int4 hi = *reinterpret_cast<const int4*>(xq + 16);
  const uint4 l =
      make_uint4(a.x & kLowNibbles, a.y & kLowNibbles, a.z & kLowNibbles, a.w & kLowNibbles);
  const uint4 h = make_uint4((a.x >> 4) & kLowNibbles, (a.y >> 4) & kLowNibbles,
                             (a.z >> 4) & kLowNibbles, (a.w >> 4) & kLowNibbles);
  return Dot16(h, hi, Dot16(l, lo, 0));
}

// A format's unit: the weights one lane loads with one 16-byte load of its first plane (16
// elements of q8_0, a group of 32 otherwise). Load reads unit u of a row (device layout, k
// elements) and its scales; Dot returns its f32 dot with one row of quantized x; Decode writes
// its elements as DequantizeRow computes them.
template <DType F>
struct Unit;

template <>
struct Unit<DType::kQ8_0> {
  static constexpr int kElems = 16;
  uint4 a;
  float d;
  __device__ __forceinline__ void Load(const uint8_t* row, int64_t k, int64_t u) {
    a = __ldcs(reinterpret_cast<const uint4*>(row) + u);
    d = F16At(row + k + 2 * (u / 2));
  }
  __device__ __forceinline__ float Dot(const int8_t* xq, const XGroup* xg, int64_t u) const {
    const int s = Dot16(a, *reinterpret_cast<const int4*>(xq + 16 * u), 0);
    return d * xg[u / 2].d * static_cast<float>(s);
  }
  __device__ static void Decode(const uint8_t* row, int64_t k, int64_t u, float* y) {
    const uint4 v = Load16(row + 16 * u);
    const float dd = F16At(row + k + 2 * (u / 2));
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      y[i] = __fmul_rn(dd, static_cast<float>(static_cast<int8_t>(ByteOf(v, i))));
    }
  }
};

template <>
struct Unit<DType::kQ4_0> {
  static constexpr int kElems = 32;
  uint4 a;
  float d;
  __device__ __forceinline__ void Load(const uint8_t* row, int64_t k, int64_t u) {
    a = __ldcs(reinterpret_cast<const uint4*>(row) + u);
    d = F16At(row + k / 2 + 2 * u);
  }
  __device__ __forceinline__ float Dot(const int8_t* xq, const XGroup* xg, int64_t u) const {
    const XGroup g = xg[u];
    const int s = DotNib(a, xq + 32 * u) - 8 * (g.s0 + g.s1);
    return d * g.d * static_cast<float>(s);
  }
  __device__ static void Decode(const uint8_t* row, int64_t k, int64_t u, float* y) {
    const uint4 v = Load16(row + 16 * u);
    const float dd = F16At(row + k / 2 + 2 * u);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int b = static_cast<int>(ByteOf(v, i));
      y[i] = __fmul_rn(static_cast<float>((b & 0xF) - 8), dd);
      y[i + 16] = __fmul_rn(static_cast<float>((b >> 4) - 8), dd);
    }
  }
};

// fp8 (fp8_gemv.cu has its GEMV): 16 codes of a row's code plane; Decode only (the prefill path).
template <>
struct Unit<DType::kFP8> {
  static constexpr int kElems = 16;
  __device__ static void Decode(const uint8_t* row, int64_t k, int64_t u, float* y) {
    const uint4 v = Load16(row + 16 * u);
    const float d = *reinterpret_cast<const float*>(row + k + 4 * (u / 8));
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const __half h =
          __half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(ByteOf(v, i)), __NV_E4M3));
      y[i] = __fmul_rn(__half2float(h), d);
    }
  }
};

// d * scale and dmin * min of group u's sub-block, from the q4_K / q5_K meta plane at `meta`.
__device__ __forceinline__ void KScales(const uint8_t* meta_plane, int64_t u, float* dsc,
                                        float* dmn) {
  const uint4 meta = *reinterpret_cast<const uint4*>(meta_plane + 16 * (u / 8));
  uint32_t sc, mn;
  ScaleMinK4(meta, static_cast<int>(u % 8), &sc, &mn);
  *dsc = __fmul_rn(__half2float(__ushort_as_half(static_cast<unsigned short>(meta.x))),
                   static_cast<float>(sc));
  *dmn = __fmul_rn(__half2float(__ushort_as_half(static_cast<unsigned short>(meta.x >> 16))),
                   static_cast<float>(mn));
}

template <>
struct Unit<DType::kQ4_K> {
  static constexpr int kElems = 32;
  uint4 a;
  float dsc, dmn;  // d * scale and dmin * min of the unit's sub-block
  __device__ __forceinline__ void Load(const uint8_t* row, int64_t k, int64_t u) {
    a = __ldcs(reinterpret_cast<const uint4*>(row) + u);
    KScales(row + k / 2, u, &dsc, &dmn);
  }
  __device__ __forceinline__ float Dot(const int8_t* xq, const XGroup* xg, int64_t u) const {
    const XGroup g = xg[u];
    const int s = DotNib(a, xq + 32 * u);
    return g.d * (dsc * static_cast<float>(s) - dmn * static_cast<float>(g.s0 + g.s1));
  }
  __device__ static void Decode(const uint8_t* row, int64_t k, int64_t u, float* y) {
    const uint4 v = Load16(row + 16 * u);
    float d1, m1;
    KScales(row + k / 2, u, &d1, &m1);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint32_t b = ByteOf(v, i);
      y[i] = __fsub_rn(__fmul_rn(d1, static_cast<float>(b & 0xFu)), m1);
      y[i + 16] = __fsub_rn(__fmul_rn(d1, static_cast<float>(b >> 4)), m1);
    }
  }
};

template <>
struct Unit<DType::kQ5_K> {
  static constexpr int kElems = 32;
  uint4 a;
  uint32_t hb;     // the group's 5th bits (quant_layout.h)
  float dsc, dmn;  // as q4_K
  // Codes 4j..4j+3 (Lo) and 16+4j..16+4j+3 (Hi) of the group: nib word aj with its 5th bits.
  __device__ static uint32_t Lo(uint32_t aj, uint32_t hb, int j) {
    return (aj & kLowNibbles) | (((hb >> j) & 0x01010101u) << 4);
  }
  __device__ static uint32_t Hi(uint32_t aj, uint32_t hb, int j) {
    return ((aj >> 4) & kLowNibbles) | (((hb >> (4 + j)) & 0x01010101u) << 4);
  }
  __device__ __forceinline__ void Load(const uint8_t* row, int64_t k, int64_t u) {
    a = __ldcs(reinterpret_cast<const uint4*>(row) + u);
    hb = __ldcs(reinterpret_cast<const uint32_t*>(row + k / 2) + u);
    KScales(row + k / 2 + k / 8, u, &dsc, &dmn);
  }
  __device__ __forceinline__ float Dot(const int8_t* xq, const XGroup* xg, int64_t u) const {
    const XGroup g = xg[u];
    const int4 xl = *reinterpret_cast<const int4*>(xq + 32 * u);
    const int4 xh = *reinterpret_cast<const int4*>(xq + 32 * u + 16);
    const uint4 l = make_uint4(Lo(a.x, hb, 0), Lo(a.y, hb, 1), Lo(a.z, hb, 2), Lo(a.w, hb, 3));
    const uint4 h = make_uint4(Hi(a.x, hb, 0), Hi(a.y, hb, 1), Hi(a.z, hb, 2), Hi(a.w, hb, 3));
    const int s = Dot16(h, xh, Dot16(l, xl, 0));
    return g.d * (dsc * static_cast<float>(s) - dmn * static_cast<float>(g.s0 + g.s1));
  }
  __device__ static void Decode(const uint8_t* row, int64_t k, int64_t u, float* y) {
    const uint4 v = Load16(row + 16 * u);
    const uint8_t* hp = row + k / 2 + 4 * u;
    const uint32_t h = hp[0] | (hp[1] << 8) | (hp[2] << 16) | (uint32_t{hp[3]} << 24);
    float d1, m1;
    KScales(row + k / 2 + k / 8, u, &d1, &m1);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t lo = Lo(words[j], h, j), hi = Hi(words[j], h, j);
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        y[4 * j + b] = __fsub_rn(__fmul_rn(d1, static_cast<float>((lo >> (8 * b)) & 31u)), m1);
        y[16 + 4 * j + b] = __fsub_rn(__fmul_rn(d1, static_cast<float>((hi >> (8 * b)) & 31u)), m1);
      }
    }
  }
};

template <>
struct Unit<DType::kQ6_K> {
  static constexpr int kElems = 32;
  uint4 a;
  uint2 h;
  int sc0, sc1;
  float d;
  // The q6_K planes after the nib plane: hi (8 bytes a group), scales (2 a group), d (2 a
  // super-block).
  __device__ static const uint8_t* Hi(const uint8_t* row, int64_t k) { return row + k / 2; }
  __device__ static const uint8_t* Sc(const uint8_t* row, int64_t k) { return row + k / 2 + k / 4; }
  __device__ static float D(const uint8_t* row, int64_t k, int64_t u) {
    return F16At(row + k / 2 + k / 4 + k / 16 + 2 * (u / 8));
  }
  // Codes 4j..4j+3 (lo) and 16+4j..16+4j+3 (hi) of the group: nib word aj with the hi bits.
  __device__ static uint32_t Lo(uint32_t aj, uint32_t h0, int j) {
    return (aj & kLowNibbles) | (((h0 >> (2 * j)) & 0x03030303u) << 4);
  }
  __device__ static uint32_t HiCodes(uint32_t aj, uint32_t h1, int j) {
    return ((aj >> 4) & kLowNibbles) | (((h1 >> (2 * j)) & 0x03030303u) << 4);
  }
  __device__ __forceinline__ void Load(const uint8_t* row, int64_t k, int64_t u) {
    a = __ldcs(reinterpret_cast<const uint4*>(row) + u);
    h = __ldcs(reinterpret_cast<const uint2*>(Hi(row, k)) + u);
    const auto s = *reinterpret_cast<const uint16_t*>(Sc(row, k) + 2 * u);
    sc0 = static_cast<int8_t>(s & 0xFF);
    sc1 = static_cast<int8_t>(s >> 8);
    d = D(row, k, u);
  }
  __device__ __forceinline__ float Dot(const int8_t* xq, const XGroup* xg, int64_t u) const {
    const XGroup g = xg[u];
    const int4 xl = *reinterpret_cast<const int4*>(xq + 32 * u);
    const int4 xh = *reinterpret_cast<const int4*>(xq + 32 * u + 16);
    const uint4 l = make_uint4(Lo(a.x, h.x, 0), Lo(a.y, h.x, 1), Lo(a.z, h.x, 2), Lo(a.w, h.x, 3));
    const uint4 hc = make_uint4(HiCodes(a.x, h.y, 0), HiCodes(a.y, h.y, 1), HiCodes(a.z, h.y, 2),
                                HiCodes(a.w, h.y, 3));
    const int s0 = Dot16(l, xl, 0) - 32 * g.s0;
    const int s1 = Dot16(hc, xh, 0) - 32 * g.s1;
    return d * g.d * static_cast<float>(sc0 * s0 + sc1 * s1);
  }
  __device__ static void Decode(const uint8_t* row, int64_t k, int64_t u, float* y) {
    const uint4 v = Load16(row + 16 * u);
    const uint8_t* hp = Hi(row, k) + 8 * u;
    uint32_t hw[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      hw[i] = hp[4 * i] | (hp[4 * i + 1] << 8) | (hp[4 * i + 2] << 16) |
              (uint32_t{hp[4 * i + 3]} << 24);
    }
    const auto* sc = reinterpret_cast<const int8_t*>(Sc(row, k)) + 2 * u;
    const float dd = D(row, k, u);
    const float d0 = __fmul_rn(dd, static_cast<float>(sc[0]));
    const float d1 = __fmul_rn(dd, static_cast<float>(sc[1]));
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t lo = Lo(words[j], hw[0], j), hi = HiCodes(words[j], hw[1], j);
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        y[4 * j + b] =
            __fmul_rn(d0, static_cast<float>(static_cast<int>((lo >> (8 * b)) & 63u) - 32));
        y[16 + 4 * j + b] =
            __fmul_rn(d1, static_cast<float>(static_cast<int>((hi >> (8 * b)) & 63u) - 32));
      }
    }
  }
};

// The block's prologue: rows 0..n-1 of x (bf16 [n, k]) -> xq (int8 [n][k]) and xg ([n][k/32]),
// RMSNorm'ed first (kNorm, n = 1) and rounded to bf16 as a materialized norm output would be.
template <bool kNorm>
__device__ __forceinline__ void QuantizeX(const __nv_bfloat16* x, int n, int64_t k,
                                          const GemvNorm& norm, int8_t* xq, XGroup* xg) {
  float inv = 1.f;
  if constexpr (kNorm) {
    float ss = 0.f;
    for (int64_t v = threadIdx.x; v < k / 8; v += kThreads) {
      float f[8];
      UnpackBf16x8(reinterpret_cast<const uint4*>(x)[v], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) ss += f[e] * f[e];
    }
    inv = rsqrtf(BlockSum<kThreads>(ss) / static_cast<float>(k) + norm.eps);
  }
  const int64_t groups = k / 32;
  for (int64_t t = threadIdx.x; t < n * groups; t += kThreads) {
    const int64_t r = t / groups, gi = t % groups;
    const uint4* xv = reinterpret_cast<const uint4*>(x + r * k + 32 * gi);
    float f[32];
    float amax = 0.f;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float e8[8];
      UnpackBf16x8(xv[q], e8);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        float v = e8[e];
        if constexpr (kNorm) {
          v = __bfloat162float(
              __float2bfloat16_rn(v * inv * (norm.w[32 * gi + 8 * q + e] + norm.offset)));
        }
        f[8 * q + e] = v;
        amax = fmaxf(amax, fabsf(v));
      }
    }
    const float d = amax / 127.f;
    const float id = d > 0.f ? 1.f / d : 0.f;
    uint32_t packed[8];
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      uint32_t word = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int q = __float2int_rn(f[4 * w + b] * id);
        (w < 4 ? s0 : s1) += q;
        word |= (static_cast<uint32_t>(q) & 0xFFu) << (8 * b);
      }
      packed[w] = word;
    }
    uint4* dst = reinterpret_cast<uint4*>(xq + r * k + 32 * gi);
    dst[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    dst[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
    xg[r * groups + gi] = XGroup{d, static_cast<int16_t>(s0), static_cast<int16_t>(s1)};
  }
  __syncthreads();
}

// The column sums of one row group stored under `epi` (uniform over the block).
template <int N, int S>
__device__ __forceinline__ void Epilogue(const float (&acc)[N], void* out, bool out_f32,
                                         GemvEpilogue epi, int64_t m, int64_t first_col, int n,
                                         int lane, int warp) {
  using Bf = __nv_bfloat16;
  if (S == 1 && (epi == GemvEpilogue::kNone || epi == GemvEpilogue::kAddTo)) {
    const int64_t col = first_col + warp;
#pragma unroll
    for (int r = 0; r < N; ++r) {
      const float sum = WarpSum(acc[r]);
      if (lane != 0 || col >= m || r >= n) continue;
      if (out_f32) {
        StoreColumn<float, GemvEpilogue::kNone>(static_cast<float*>(out), r * m + col, sum);
      } else if (epi == GemvEpilogue::kAddTo) {
        StoreColumn<Bf, GemvEpilogue::kAddTo>(static_cast<Bf*>(out), r * m + col, sum);
      } else {
        StoreColumn<Bf, GemvEpilogue::kNone>(static_cast<Bf*>(out), r * m + col, sum);
      }
    }
    return;
  }
  switch (epi) {
    case GemvEpilogue::kNone:
      if (out_f32) {
        SharedMemoryEpilogue<kWarps, N, S, float, GemvEpilogue::kNone>(
            acc, static_cast<float*>(out), m, first_col, n, lane, warp);
      } else {
        SharedMemoryEpilogue<kWarps, N, S, Bf, GemvEpilogue::kNone>(acc, static_cast<Bf*>(out), m,
                                                                    first_col, n, lane, warp);
      }
      break;
    case GemvEpilogue::kAddTo:
      SharedMemoryEpilogue<kWarps, N, S, Bf, GemvEpilogue::kAddTo>(acc, static_cast<Bf*>(out), m,
                                                                   first_col, n, lane, warp);
      break;
    case GemvEpilogue::kSiluMul:
      if constexpr (S <= 4) {
        SharedMemoryEpilogue<kWarps, N, S, Bf, GemvEpilogue::kSiluMul>(acc, static_cast<Bf*>(out),
                                                                       m, first_col, n, lane, warp);
      }
      break;
    case GemvEpilogue::kGeluTanhMul:
      if constexpr (S <= 4) {
        SharedMemoryEpilogue<kWarps, N, S, Bf, GemvEpilogue::kGeluTanhMul>(
            acc, static_cast<Bf*>(out), m, first_col, n, lane, warp);
      }
      break;
  }
  __syncthreads();  // `partial` is reused by the next row group
}

// Blocks loop over groups of kWarps / S weight rows; S warps share a row (each every S-th unit).
// Before PdlWait the first row group's first units are prefetched into L2 (weights are never
// written by a step).
template <DType F, int N, int S, bool kNorm>
__global__ void __launch_bounds__(kThreads)
    QuantGemvKernel(const __nv_bfloat16* __restrict__ x, const uint8_t* __restrict__ w, void* out,
                    bool out_f32, GemvEpilogue epi, int n, int64_t m, int64_t k, int64_t row_bytes,
                    GemvNorm norm) {
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int kCols = kWarps / S;
  constexpr int64_t kStride = 32 * S;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, part = warp % S;
  const int64_t units = k / Unit<F>::kElems, groups = k / 32;
  const int64_t row_groups = (m + kCols - 1) / kCols;
  {
    const int64_t col = blockIdx.x * int64_t{kCols} + warp / S;
    if (col < m) {
#pragma unroll
      for (int uu = 0; uu < kUnroll; ++uu) {
        const int64_t u = part * 32 + lane + kStride * uu;
        if (u < units) {
          asm volatile("prefetch.global.L2 [%0];" ::"l"(w + col * row_bytes + 16 * u));
        }
      }
    }
  }
  PdlWait();
  PdlLaunchDependents();
  auto* xq = reinterpret_cast<int8_t*>(smem);
  auto* xg = reinterpret_cast<XGroup*>(smem + N * k);
  QuantizeX<kNorm>(x, n, k, norm, xq, xg);
  for (int64_t rg = blockIdx.x; rg < row_groups; rg += gridDim.x) {
    const int64_t col = rg * kCols + warp / S;
    float acc[N];
#pragma unroll
    for (int r = 0; r < N; ++r) acc[r] = 0.f;
    if (col < m) {
      const uint8_t* row = w + col * row_bytes;
      for (int64_t base = part * 32 + lane; base < units; base += kStride * kUnroll) {
        Unit<F> un[kUnroll];
#pragma unroll
        for (int uu = 0; uu < kUnroll; ++uu) {
          if (base + kStride * uu < units) un[uu].Load(row, k, base + kStride * uu);
        }
#pragma unroll
        for (int uu = 0; uu < kUnroll; ++uu) {
          const int64_t u = base + kStride * uu;
          if (u >= units) continue;
#pragma unroll
          for (int r = 0; r < N; ++r) {
            if (r < n) acc[r] += un[uu].Dot(xq + r * k, xg + r * groups, u);
          }
        }
      }
    }
    Epilogue<N, S>(acc, out, out_f32, epi, m, rg * kCols, n, lane, warp);
  }
}

template <DType F>
__global__ void DequantRowsKernel(const uint8_t* __restrict__ w, int64_t w_rows, int64_t k,
                                  int64_t row_bytes, const int32_t* rows, int64_t first_row,
                                  float scale, __nv_bfloat16* __restrict__ out) {
  constexpr int E = Unit<F>::kElems;
  const int64_t i = blockIdx.y, u = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (u >= k / E) return;
  const int64_t r = rows != nullptr ? rows[i] : first_row + i;
  float y[E];
  if (r >= 0 && r < w_rows) {
    Unit<F>::Decode(w + r * row_bytes, k, u, y);
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) y[e] = 0.f;
  }
  uint4* dst = reinterpret_cast<uint4*>(out + i * k + u * E);
#pragma unroll
  for (int v = 0; v < E / 8; ++v) {
    float f[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = y[8 * v + e] * scale;
    dst[v] = PackBf16x8(f);
  }
}

struct Args {
  const void* x;
  const void* w;
  void* out;
  bool out_f32;
  GemvEpilogue epi;
  int n;
  int64_t m, k, row_bytes;
  GemvNorm norm;
  cudaStream_t stream;
  bool pdl;
};

size_t SmemBytes(int rows, int64_t k) {
  return static_cast<size_t>(rows) * static_cast<size_t>(k) * (1 + sizeof(XGroup) / 32.0);
}

int NumSms() {
  thread_local int device = -1, sms = 0;
  int d = 0;
  CUDA_CHECK(cudaGetDevice(&d));
  if (d != device) {
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d));
    device = d;
  }
  return sms;
}

template <DType F, int N, int S, bool kNorm>
void LaunchFNS(const Args& a) {
  auto* kernel = QuantGemvKernel<F, N, S, kNorm>;
  const size_t smem = SmemBytes(N, a.k);
  // Per instantiation: the shared memory the kernel may use, and blocks an SM at that size.
  thread_local size_t allowed = 48 << 10, occupancy_smem = ~size_t{0};
  thread_local int per_sm = 1;
  if (smem > allowed) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
    allowed = smem;
  }
  if (smem != occupancy_smem) {
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
    per_sm = per_sm < 1 ? 1 : per_sm;
    occupancy_smem = smem;
  }
  constexpr int kCols = kWarps / S;
  const int64_t row_groups = (a.m + kCols - 1) / kCols;
  const int64_t max_blocks = int64_t{NumSms()} * per_sm;
  const auto grid = static_cast<unsigned>(row_groups < max_blocks ? row_groups : max_blocks);
  LaunchPdl(kernel, dim3(grid), dim3(kThreads), smem, a.stream, a.pdl,
            static_cast<const __nv_bfloat16*>(a.x), static_cast<const uint8_t*>(a.w), a.out,
            a.out_f32, a.epi, a.n, a.m, a.k, a.row_bytes, a.norm);
}

// Warps a weight row: the fewest that give about four blocks an SM of a 132-SM GPU (m * S /
// kWarps >= 528), as the bf16 kernel; gated epilogues stop at 4 (a block holds whole pairs).
template <DType F, int N, bool kNorm>
void LaunchFN(const Args& a) {
  constexpr int64_t kWant = 528 * kWarps;
  if (a.m >= kWant) return LaunchFNS<F, N, 1, kNorm>(a);
  if (a.m * 2 >= kWant) return LaunchFNS<F, N, 2, kNorm>(a);
  LaunchFNS<F, N, 4, kNorm>(a);
}

template <DType F>
void LaunchF(const Args& a, bool norm) {
  if (norm) return LaunchFN<F, 1, true>(a);
  if (a.n == 1) return LaunchFN<F, 1, false>(a);
  if (a.n == 2) return LaunchFN<F, 2, false>(a);
  if (a.n <= 4) return LaunchFN<F, 4, false>(a);
  LaunchFN<F, 8, false>(a);
}

int TemplateRows(int64_t n) { return n == 1 ? 1 : n == 2 ? 2 : n <= 4 ? 4 : 8; }

template <DType F>
void LaunchDequantF(const void* w, int64_t w_rows, int64_t k, const int32_t* rows,
                    int64_t first_row, int64_t count, float scale, void* out, cudaStream_t stream) {
  constexpr int E = Unit<F>::kElems;
  const int64_t units = k / E;
  const int threads = units < 128 ? 32 * static_cast<int>((units + 31) / 32) : 128;
  const auto bx = static_cast<unsigned>((units + threads - 1) / threads);
  const int64_t rb = static_cast<int64_t>(RowBytes(F, k));
  for (int64_t c0 = 0; c0 < count; c0 += 65535) {
    const int64_t c = count - c0 < 65535 ? count - c0 : 65535;
    DequantRowsKernel<F><<<dim3(bx, static_cast<unsigned>(c)), threads, 0, stream>>>(
        static_cast<const uint8_t*>(w), w_rows, k, rb, rows != nullptr ? rows + c0 : nullptr,
        first_row + c0, scale, static_cast<__nv_bfloat16*>(out) + c0 * k);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

bool QuantGemvApplies(DType wt, const void* x, const void* w, int64_t n, int64_t k, bool norm) {
  if (wt == DType::kFP8) return Fp8GemvApplies(x, w, n, k, norm);
  if (!KeepsQuantized(wt) || n < 1 || n > kQuantGemvMaxRows || k <= 0 ||
      k % QuantRowMultiple(wt) != 0 || RowBytes(wt, k) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0) {
    return false;
  }
  if (norm && (n != 1 || k > kGemvNormMaxK)) return false;
  return SmemBytes(TemplateRows(n), k) <= 200 << 10;
}

void LaunchQuantGemv(DType wt, const void* x, const void* w, void* out, DType out_dtype, int64_t n,
                     int64_t m, int64_t k, cudaStream_t stream, bool pdl, GemvEpilogue epilogue,
                     const GemvNorm* norm) {
  if (wt == DType::kFP8) {
    return LaunchFp8Gemv(x, w, out, out_dtype, n, m, k, stream, pdl, epilogue, norm);
  }
  CHECK(QuantGemvApplies(wt, x, w, n, k, norm != nullptr))
      << "QuantGemv: " << DTypeName(wt) << " n " << n << " k " << k;
  CHECK(out_dtype == DType::kBF16 || (out_dtype == DType::kF32 && epilogue == GemvEpilogue::kNone))
      << "QuantGemv: out " << DTypeName(out_dtype);
  const bool gated = epilogue == GemvEpilogue::kSiluMul || epilogue == GemvEpilogue::kGeluTanhMul;
  CHECK(!gated || m % 2 == 0) << "QuantGemv gated: m " << m;
  const Args a{x,
               w,
               out,
               out_dtype == DType::kF32,
               epilogue,
               static_cast<int>(n),
               m,
               k,
               static_cast<int64_t>(RowBytes(wt, k)),
               norm != nullptr ? *norm : GemvNorm{},
               stream,
               pdl};
  switch (wt) {
    case DType::kQ8_0:
      return LaunchF<DType::kQ8_0>(a, norm != nullptr);
    case DType::kQ4_0:
      return LaunchF<DType::kQ4_0>(a, norm != nullptr);
    case DType::kQ4_K:
      return LaunchF<DType::kQ4_K>(a, norm != nullptr);
    case DType::kQ5_K:
      return LaunchF<DType::kQ5_K>(a, norm != nullptr);
    default:
      return LaunchF<DType::kQ6_K>(a, norm != nullptr);
  }
}

void LaunchDequantRows(DType wt, const void* w, int64_t w_rows, int64_t k, const int32_t* rows,
                       int64_t first_row, int64_t count, float scale, void* out,
                       cudaStream_t stream) {
  CHECK(KeepsQuantized(wt) && k % QuantRowMultiple(wt) == 0)
      << "DequantRows: " << DTypeName(wt) << " k " << k;
  if (count == 0) return;
  switch (wt) {
    case DType::kQ8_0:
      return LaunchDequantF<DType::kQ8_0>(w, w_rows, k, rows, first_row, count, scale, out, stream);
    case DType::kQ4_0:
      return LaunchDequantF<DType::kQ4_0>(w, w_rows, k, rows, first_row, count, scale, out, stream);
    case DType::kQ4_K:
      return LaunchDequantF<DType::kQ4_K>(w, w_rows, k, rows, first_row, count, scale, out, stream);
    case DType::kQ5_K:
      return LaunchDequantF<DType::kQ5_K>(w, w_rows, k, rows, first_row, count, scale, out, stream);
    case DType::kFP8:
      return LaunchDequantF<DType::kFP8>(w, w_rows, k, rows, first_row, count, scale, out, stream);
    default:
      return LaunchDequantF<DType::kQ6_K>(w, w_rows, k, rows, first_row, count, scale, out, stream);
  }
}

}  // namespace loom::cuda
