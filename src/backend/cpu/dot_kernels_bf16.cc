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
  const char* pfp = pf.p;
  int64_t i = 0;
  for (; i + 16 <= k; i += 16, pfp += per_step) {
    for (int64_t b = 0; b < per_step; b += 64) _mm_prefetch(pfp + b, _MM_HINT_T0);
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
    case 1: return DotBf16ActN<1>(w, x, k, pf, out);
    case 2: return DotBf16ActN<2>(w, x, k, pf, out);
    case 3: return DotBf16ActN<3>(w, x, k, pf, out);
    case 4: return DotBf16ActN<4>(w, x, k, pf, out);
    case 5: return DotBf16ActN<5>(w, x, k, pf, out);
    default: return DotBf16ActN<6>(w, x, k, pf, out);
  }
}

}  // namespace

DotTileB Bf16ActDotKernel() {
  static const bool ok = __builtin_cpu_supports("avx512f") &&
                         __builtin_cpu_supports("avx512vl") &&
                         __builtin_cpu_supports("avx512bf16");
  return ok ? DotBf16ActRows : nullptr;
}

}  // namespace loom::cpu
