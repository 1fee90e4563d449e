// AVX2 + FMA + F16C kernels (runtime-dispatched; see dot_kernels.h for the shared numerics).
// Decode is a memory-bound GEMV: each weight byte is loaded once per tile and decoded in
// registers; the activation block is loaded once per tile of kDotTileRows weight rows. Quantized
// kernels use llama.cpp's int8 trick: |w| (u8) x sign(x, w) (i8) through maddubs, then madd.
#include <immintrin.h>

#include "backend/cpu/dot_kernels.h"
#include "tensor/quant.h"

#define LOOM_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace loom::cpu {
namespace {

constexpr int R = kDotTileRows;

// The R rows of a tile are read interleaved, a pattern the hardware prefetcher follows poorly
// (measured: half the single-core bandwidth of a linear scan for k = 768 f16 rows). MatMul's
// tiles are consecutive rows, so the next tile starts right after this tile's last row: each
// step prefetches the next tile's bytes in proportion to what it consumes of this one, which
// turns the access stream linear. (A prefetch past the end of the weights is harmless.)
LOOM_AVX2 inline const char* NextTile(const void* last_row, size_t row_bytes) {
  return static_cast<const char*>(last_row) + row_bytes;
}
LOOM_AVX2 inline void PrefetchSpan(const char* p, int bytes) {
  for (int b = 0; b < bytes; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
}

LOOM_AVX2 inline float Reduce8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));  // [s0+s2, s1+s3, ..]
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

LOOM_AVX2 inline __m256 LoadF32(const float* p) { return _mm256_loadu_ps(p); }
LOOM_AVX2 inline __m256 LoadF16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
LOOM_AVX2 inline __m256 LoadBF16(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

LOOM_AVX2 void DotF32(const void* const* w, const float* x, int64_t k, float* out) {
  const float* wr[R];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) {
    wr[r] = static_cast<const float*>(w[r]);
    acc[r] = _mm256_setzero_ps();
  }
  const char* next = NextTile(w[R - 1], 4 * static_cast<size_t>(k));
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    PrefetchSpan(next + R * 4 * i, R * 32);
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(LoadF32(wr[r] + i), xv, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    float s = Reduce8(acc[r]);
    for (int64_t j = i; j < k; ++j) s += wr[r][j] * x[j];
    out[r] = s;
  }
}

LOOM_AVX2 void DotF16(const void* const* w, const float* x, int64_t k, float* out) {
  const uint16_t* wr[R];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) {
    wr[r] = static_cast<const uint16_t*>(w[r]);
    acc[r] = _mm256_setzero_ps();
  }
  const char* next = NextTile(w[R - 1], 2 * static_cast<size_t>(k));
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    PrefetchSpan(next + R * 2 * i, R * 16);
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(LoadF16(wr[r] + i), xv, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    float s = Reduce8(acc[r]);
    for (int64_t j = i; j < k; ++j) s += _cvtsh_ss(wr[r][j]) * x[j];
    out[r] = s;
  }
}

LOOM_AVX2 void DotBF16(const void* const* w, const float* x, int64_t k, float* out) {
  const uint16_t* wr[R];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) {
    wr[r] = static_cast<const uint16_t*>(w[r]);
    acc[r] = _mm256_setzero_ps();
  }
  const char* next = NextTile(w[R - 1], 2 * static_cast<size_t>(k));
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    PrefetchSpan(next + R * 2 * i, R * 16);
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(LoadBF16(wr[r] + i), xv, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    float s = Reduce8(acc[r]);
    for (int64_t j = i; j < k; ++j) s += Bf16ToF32(wr[r][j]) * x[j];
    out[r] = s;
  }
}

// 8 int32 lanes: lane l = sum of w[4l..4l+3] * x[4l..4l+3]; w signed (|w| <= 128), x in -127..127.
LOOM_AVX2 inline __m256 DotSigned32(__m256i w, __m256i x) {
  const __m256i aw = _mm256_sign_epi8(w, w);
  const __m256i sx = _mm256_sign_epi8(x, w);
  const __m256i p16 = _mm256_maddubs_epi16(aw, sx);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}
// Same for w unsigned (0..63).
LOOM_AVX2 inline __m256 DotUnsigned32(__m256i w, __m256i x) {
  const __m256i p16 = _mm256_maddubs_epi16(w, x);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}
LOOM_AVX2 inline __m256i LoadX(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

LOOM_AVX2 void DotQ8_0(const void* const* w, const ActQ8Row& x, int64_t k, float* out) {
  const BlockQ8_0* b[R];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) {
    b[r] = static_cast<const BlockQ8_0*>(w[r]);
    acc[r] = _mm256_setzero_ps();
  }
  const char* next = NextTile(w[R - 1], sizeof(BlockQ8_0) * static_cast<size_t>(k / 32));
  for (int64_t i = 0; i < k / 32; ++i) {
    PrefetchSpan(next + R * sizeof(BlockQ8_0) * i, R * sizeof(BlockQ8_0));
    const __m256i xq = LoadX(x.qs + 32 * i);
    for (int r = 0; r < R; ++r) {
      const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[r][i].qs));
      const __m256 scale = _mm256_set1_ps(_cvtsh_ss(b[r][i].d) * x.d[i]);
      acc[r] = _mm256_fmadd_ps(scale, DotSigned32(wq, xq), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = Reduce8(acc[r]);
}

LOOM_AVX2 void DotQ4_0(const void* const* w, const ActQ8Row& x, int64_t k, float* out) {
  const BlockQ4_0* b[R];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) {
    b[r] = static_cast<const BlockQ4_0*>(w[r]);
    acc[r] = _mm256_setzero_ps();
  }
  const char* next = NextTile(w[R - 1], sizeof(BlockQ4_0) * static_cast<size_t>(k / 32));
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i eight = _mm256_set1_epi8(8);
  for (int64_t i = 0; i < k / 32; ++i) {
    PrefetchSpan(next + R * sizeof(BlockQ4_0) * i, R * sizeof(BlockQ4_0));
    const __m256i xq = LoadX(x.qs + 32 * i);
    for (int r = 0; r < R; ++r) {
      const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[r][i].qs));
      __m256i wq = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), low4);
      wq = _mm256_sub_epi8(wq, eight);
      const __m256 scale = _mm256_set1_ps(_cvtsh_ss(b[r][i].d) * x.d[i]);
      acc[r] = _mm256_fmadd_ps(scale, DotSigned32(wq, xq), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = Reduce8(acc[r]);
}

LOOM_AVX2 void DotQ4_K(const void* const* w, const ActQ8Row& x, int64_t k, float* out) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int r = 0; r < R; ++r) {
    const auto* b = static_cast<const BlockQ4_K*>(w[r]);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    for (int64_t i = 0; i < k / kQK_K; ++i) {
      const float d = _cvtsh_ss(b[i].d);
      const float dmin = _cvtsh_ss(b[i].dmin);
      uint8_t sc[8], m[8];
      for (int j = 0; j < 8; ++j) GetScaleMinK4(j, b[i].scales, &sc[j], &m[j]);
      for (int jj = 0; jj < 4; ++jj) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs + 32 * jj));
        const int64_t xb = i * 8 + 2 * jj;
        const __m256i lo = _mm256_and_si256(q, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * static_cast<float>(sc[2 * jj]) * x.d[xb]),
                              DotUnsigned32(lo, LoadX(x.qs + 32 * xb)), acc);
        mins += dmin * static_cast<float>(m[2 * jj]) * x.ds[xb];
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * static_cast<float>(sc[2 * jj + 1]) * x.d[xb + 1]),
                              DotUnsigned32(hi, LoadX(x.qs + 32 * (xb + 1))), acc);
        mins += dmin * static_cast<float>(m[2 * jj + 1]) * x.ds[xb + 1];
      }
    }
    out[r] = Reduce8(acc) - mins;
  }
}

LOOM_AVX2 void DotQ6_K(const void* const* w, const ActQ8Row& x, int64_t k, float* out) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i two = _mm256_set1_epi8(3);
  const __m256i m32 = _mm256_set1_epi8(32);
  for (int r = 0; r < R; ++r) {
    const auto* b = static_cast<const BlockQ6_K*>(w[r]);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < k / kQK_K; ++i) {
      const float d = _cvtsh_ss(b[i].d);
      for (int half = 0; half < 2; ++half) {
        const __m256i ql0 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].ql + 64 * half));
        const __m256i ql1 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].ql + 64 * half + 32));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qh + 32 * half));
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                               _mm256_slli_epi16(_mm256_and_si256(qh, two), 4));
        q[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two), 4));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two), 4));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two), 4));
        for (int c = 0; c < 4; ++c) {
          const int chunk = half * 4 + c;
          const int64_t xb = i * 8 + chunk;
          const float s0 = d * static_cast<float>(b[i].scales[2 * chunk]) * x.d[xb];
          const float s1 = d * static_cast<float>(b[i].scales[2 * chunk + 1]) * x.d[xb];
          const __m256 scale = _mm256_setr_m128(_mm_set1_ps(s0), _mm_set1_ps(s1));
          const __m256i wq = _mm256_sub_epi8(q[c], m32);
          acc = _mm256_fmadd_ps(scale, DotSigned32(wq, LoadX(x.qs + 32 * xb)), acc);
        }
      }
    }
    out[r] = Reduce8(acc);
  }
}

}  // namespace

const DotKernels* Avx2DotKernels() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                                __builtin_cpu_supports("f16c");
  static const DotKernels k = {"avx2", DotF32, DotF16, DotBF16, DotQ8_0, DotQ4_0, DotQ4_K,
                               DotQ6_K};
  return supported ? &k : nullptr;
}

}  // namespace loom::cpu
