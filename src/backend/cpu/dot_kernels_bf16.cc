// The opt-in bf16-activation dot kernel (dot_kernels.h: DotTileB): bf16 weight rows against
// activation rows already rounded to bf16, through AVX512-BF16's vdpbf16ps, which multiplies 16
// bf16 pairs and adds them into 8 f32 lanes in one instruction: twice the multiply-adds per
// instruction of the f32 FMA kernels (measured on the dev VM's Zen 4: 109 vs 59 GMAC/s a core in
// a register-only loop). Batched decode on the CPU is bound by those instructions once a few
// rows share each weight load, so this is the mode for throughput at concurrency (134M bf16,
// 2 threads, concurrency 8: 683-690 vs 541-586 tok/s); the default f32 numerics stay exact
// against the goldens. llama.cpp likewise rounds activations to bf16 for bf16 weights.
//
// Layout per call: kDotTileRows weight rows x A activation rows, R * A ymm accumulators (A <= 6
// keeps them within AVX-512VL's 32 registers), 16 elements per step; the k % 16 tail in scalar
// f32 (bf16 products are exact in f32), then the same 8-lane reduction for every A, so a row's
// result does not depend on how many rows share the call.
#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/dot_kernels.h"
#include "tensor/dtype.h"

namespace loom::cpu {
namespace {

#define LOOM_BF16_TARGET __attribute__((target("avx2,fma,avx512f,avx512vl,avx512bf16")))

constexpr int R = kDotTileRows;

LOOM_BF16_TARGET inline float Reduce8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

template <int A>
LOOM_BF16_TARGET void DotBf16ActN(const void* const* w, const uint16_t* const* x, int64_t k,
                                  const DotPrefetch& pf, float* out) {
  const uint16_t* wr[R];
  __m256 acc[A][R];
  for (int r = 0; r < R; ++r) wr[r] = static_cast<const uint16_t*>(w[r]);
  for (int a = 0; a < A; ++a) {
    for (int r = 0; r < R; ++r) acc[a][r] = _mm256_setzero_ps();
  }
  const int64_t per_step = (pf.bytes + k / 16 - 1) / std::max<int64_t>(k / 16, 1);
  // One row (concurrency 1): MatMul's share of the next tile, into L1. Several rows: into L2,
  // one share further ahead. Measured in the engine (134M bf16, 2 threads, concurrency 8, 6
  // alternated rounds, medians): 795 vs 742 tok/s (this VM's noise is +-10%); L2 for one row
  // too cost concurrency 1 ~8% (124-149 vs 136-149), so one-row calls keep L1.
  const char* pfp = A == 1 ? pf.p : pf.p + pf.bytes;
  int64_t i = 0;
  for (; i + 16 <= k; i += 16, pfp += per_step) {
    for (int64_t b = 0; b < per_step; b += 64) {
      _mm_prefetch(pfp + b, A == 1 ? _MM_HINT_T0 : _MM_HINT_T1);
    }
    __m256bh xv[A];
    for (int a = 0; a < A; ++a) {
      xv[a] = reinterpret_cast<__m256bh>(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[a] + i)));
    }
    for (int r = 0; r < R; ++r) {
      const __m256bh wv = reinterpret_cast<__m256bh>(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[r] + i)));
      for (int a = 0; a < A; ++a) acc[a][r] = _mm256_dpbf16_ps(acc[a][r], wv, xv[a]);
    }
  }
  for (int a = 0; a < A; ++a) {
    for (int r = 0; r < R; ++r) {
      float s = Reduce8(acc[a][r]);
      for (int64_t j = i; j < k; ++j) s += Bf16ToF32(wr[r][j]) * Bf16ToF32(x[a][j]);
      out[a * R + r] = s;
    }
  }
}

LOOM_BF16_TARGET void DotBf16ActRows(const void* const* w, const uint16_t* const* x, int num_x,
                                     int64_t k, DotPrefetch pf, float* out) {
  switch (num_x) {
    case 1:
      return DotBf16ActN<1>(w, x, k, pf, out);
    case 2:
      return DotBf16ActN<2>(w, x, k, pf, out);
    case 3:
      return DotBf16ActN<3>(w, x, k, pf, out);
    case 4:
      return DotBf16ActN<4>(w, x, k, pf, out);
    case 5:
      return DotBf16ActN<5>(w, x, k, pf, out);
    default:
      return DotBf16ActN<6>(w, x, k, pf, out);
  }
}

// F32ToBf16 (round to nearest even, NaN kept quiet) 16 floats at a time in the same integer
// steps, so the bits are F32ToBf16's for every input (denormals included, unlike
// vcvtneps2bf16). AVX2 integer ops: GCC 12's 512-bit shift intrinsics trip -Wmaybe-uninitialized.
LOOM_BF16_TARGET inline __m256i RoundToBf16x8(__m256i b) {
  const __m256i abs_bits = _mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(abs_bits, _mm256_set1_epi32(0x7f800000));  // both >= 0
  const __m256i hi = _mm256_srli_epi32(b, 16);
  const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  return _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
}
LOOM_BF16_TARGET void RoundRowsToBf16(const float* x, uint16_t* out, int64_t count) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i lo = RoundToBf16x8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    const __m256i hi =
        RoundToBf16x8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 8)));
    // packus works within 128-bit lanes: [lo0-3 hi0-3 lo4-7 hi4-7] -> lanes 0, 2, 1, 3.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  for (; i < count; ++i) out[i] = F32ToBf16(x[i]);
}

}  // namespace

Bf16RoundFn Bf16RoundRowsKernel() {
  return Bf16ActDotKernel() != nullptr ? RoundRowsToBf16 : nullptr;
}

DotTileB Bf16ActDotKernel() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                         __builtin_cpu_supports("avx512bf16");
  return ok ? DotBf16ActRows : nullptr;
}

}  // namespace loom::cpu
