// AVX2 + FMA + F16C kernels (runtime-dispatched; see dot_kernels.h for the shared numerics).
// Decode is a memory-bound GEMV: each weight byte is loaded once per tile and decoded in
// registers; the activation block is loaded once per tile of kDotTileRows weight rows. Quantized
// kernels use llama.cpp's int8 trick: |w| (u8) x sign(x, w) (i8) through maddubs, then madd.
// Every kernel is a template over A, the activation rows of the call: each decoded weight vector
// feeds A accumulators (A = 1 is the single-row GEMV kernel).
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
// turns the access stream linear. (A prefetch past the end of the weights is harmless.) With
// A > 1 activation rows MatMul calls the kernel several times per tile; the first call brings the
// next tile in, the later calls' prefetches hit cached lines (redundant, kept for simplicity: not
// measured separately).
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

// Plain weight dtypes: Load8 decodes 8 consecutive elements to f32, Load1 one element.
struct F32W {
  using T = float;
  LOOM_AVX2 static __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
  LOOM_AVX2 static float Load1(const float* p) { return *p; }
};
struct F16W {
  using T = uint16_t;
  LOOM_AVX2 static __m256 Load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  LOOM_AVX2 static float Load1(const uint16_t* p) { return _cvtsh_ss(*p); }
};
struct BF16W {
  using T = uint16_t;
  LOOM_AVX2 static __m256 Load8(const uint16_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  LOOM_AVX2 static float Load1(const uint16_t* p) { return Bf16ToF32(*p); }
};

// R weight rows x A activation rows: R * A accumulators, each weight vector decoded once.
template <class W, int A>
LOOM_AVX2 void DotPlainN(const void* const* w, const float* const* x, int64_t k, float* out) {
  using T = typename W::T;
  const T* wr[R];
  const float* xr[A];
  __m256 acc[A][R];
  for (int r = 0; r < R; ++r) wr[r] = static_cast<const T*>(w[r]);
  for (int a = 0; a < A; ++a) {
    xr[a] = x[a];
    for (int r = 0; r < R; ++r) acc[a][r] = _mm256_setzero_ps();
  }
  const char* next = NextTile(w[R - 1], sizeof(T) * static_cast<size_t>(k));
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    PrefetchSpan(next + R * sizeof(T) * i, static_cast<int>(R * 8 * sizeof(T)));
    __m256 xv[A];
    for (int a = 0; a < A; ++a) xv[a] = _mm256_loadu_ps(xr[a] + i);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = W::Load8(wr[r] + i);
      for (int a = 0; a < A; ++a) acc[a][r] = _mm256_fmadd_ps(wv, xv[a], acc[a][r]);
    }
  }
  for (int a = 0; a < A; ++a) {
    for (int r = 0; r < R; ++r) {
      float s = Reduce8(acc[a][r]);
      for (int64_t j = i; j < k; ++j) s += W::Load1(wr[r] + j) * xr[a][j];
      out[a * R + r] = s;
    }
  }
}

template <class W>
LOOM_AVX2 void DotPlain(const void* const* w, const float* const* x, int num_x, int64_t k,
                        float* out) {
  switch (num_x) {
    case 1:
      return DotPlainN<W, 1>(w, x, k, out);
    case 2:
      return DotPlainN<W, 2>(w, x, k, out);
    case 3:
      return DotPlainN<W, 3>(w, x, k, out);
    default:
      return DotPlainN<W, 4>(w, x, k, out);
  }
}

// 8 int32 lanes as f32: lane l = sum of w[4l..4l+3] * x[4l..4l+3]; w signed (|w| <= 128) with
// aw = |w| precomputed (it is shared by the activation rows), x in -127..127.
LOOM_AVX2 inline __m256 DotSigned32(__m256i aw, __m256i w, __m256i x) {
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

// q8_0 / q4_0: one 32-block per step; Decode yields the block's signed weights.
struct Q8_0W {
  using Block = BlockQ8_0;
  LOOM_AVX2 static __m256i Decode(const BlockQ8_0& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
};
struct Q4_0W {
  using Block = BlockQ4_0;
  LOOM_AVX2 static __m256i Decode(const BlockQ4_0& b) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m256i wq =
        _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
    return _mm256_sub_epi8(wq, _mm256_set1_epi8(8));
  }
};

template <class W, int A>
LOOM_AVX2 void DotQ32N(const void* const* w, const ActQ8Row* x, int64_t k, float* out) {
  using Block = typename W::Block;
  const Block* b[R];
  ActQ8Row xr[A];
  __m256 acc[A][R];
  for (int r = 0; r < R; ++r) b[r] = static_cast<const Block*>(w[r]);
  for (int a = 0; a < A; ++a) {
    xr[a] = x[a];
    for (int r = 0; r < R; ++r) acc[a][r] = _mm256_setzero_ps();
  }
  const char* next = NextTile(w[R - 1], sizeof(Block) * static_cast<size_t>(k / 32));
  for (int64_t i = 0; i < k / 32; ++i) {
    PrefetchSpan(next + R * sizeof(Block) * i, static_cast<int>(R * sizeof(Block)));
    __m256i xq[A];
    for (int a = 0; a < A; ++a) xq[a] = LoadX(xr[a].qs + 32 * i);
    for (int r = 0; r < R; ++r) {
      const __m256i wq = W::Decode(b[r][i]);
      const __m256i aw = _mm256_sign_epi8(wq, wq);
      // scale = d_w * d_x as in a scalar product, but as a vector multiply of two broadcasts
      // (a broadcast from memory costs no ALU slot, a register broadcast does).
      const __m256 wd = _mm256_set1_ps(_cvtsh_ss(b[r][i].d));
      for (int a = 0; a < A; ++a) {
        const __m256 scale = _mm256_mul_ps(wd, _mm256_broadcast_ss(xr[a].d + i));
        acc[a][r] = _mm256_fmadd_ps(scale, DotSigned32(aw, wq, xq[a]), acc[a][r]);
      }
    }
  }
  for (int a = 0; a < A; ++a) {
    for (int r = 0; r < R; ++r) out[a * R + r] = Reduce8(acc[a][r]);
  }
}

// q4_K: one weight row at a time (super-blocks of 256 are decoded once, used by A rows).
template <int A>
LOOM_AVX2 void DotQ4_KN(const void* const* w, const ActQ8Row* x, int64_t k, float* out) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int r = 0; r < R; ++r) {
    const auto* b = static_cast<const BlockQ4_K*>(w[r]);
    __m256 acc[A];
    float mins[A];
    for (int a = 0; a < A; ++a) {
      acc[a] = _mm256_setzero_ps();
      mins[a] = 0.0f;
    }
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
        for (int a = 0; a < A; ++a) {
          const ActQ8Row& xa = x[a];
          acc[a] = _mm256_fmadd_ps(_mm256_set1_ps(d * static_cast<float>(sc[2 * jj]) * xa.d[xb]),
                                   DotUnsigned32(lo, LoadX(xa.qs + 32 * xb)), acc[a]);
          mins[a] += dmin * static_cast<float>(m[2 * jj]) * xa.ds[xb];
          acc[a] =
              _mm256_fmadd_ps(_mm256_set1_ps(d * static_cast<float>(sc[2 * jj + 1]) * xa.d[xb + 1]),
                              DotUnsigned32(hi, LoadX(xa.qs + 32 * (xb + 1))), acc[a]);
          mins[a] += dmin * static_cast<float>(m[2 * jj + 1]) * xa.ds[xb + 1];
        }
      }
    }
    for (int a = 0; a < A; ++a) out[a * R + r] = Reduce8(acc[a]) - mins[a];
  }
}

// q6_K: one weight row at a time, like q4_K.
template <int A>
LOOM_AVX2 void DotQ6_KN(const void* const* w, const ActQ8Row* x, int64_t k, float* out) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i two = _mm256_set1_epi8(3);
  const __m256i m32 = _mm256_set1_epi8(32);
  for (int r = 0; r < R; ++r) {
    const auto* b = static_cast<const BlockQ6_K*>(w[r]);
    __m256 acc[A];
    for (int a = 0; a < A; ++a) acc[a] = _mm256_setzero_ps();
    for (int64_t i = 0; i < k / kQK_K; ++i) {
      const float d = _cvtsh_ss(b[i].d);
      for (int half = 0; half < 2; ++half) {
        const __m256i ql0 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].ql + 64 * half));
        const __m256i ql1 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].ql + 64 * half + 32));
        const __m256i qh =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qh + 32 * half));
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                               _mm256_slli_epi16(_mm256_and_si256(qh, two), 4));
        q[1] =
            _mm256_or_si256(_mm256_and_si256(ql1, low4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two), 4));
        q[2] =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two), 4));
        q[3] =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two), 4));
        for (int c = 0; c < 4; ++c) {
          const int chunk = half * 4 + c;
          const int64_t xb = i * 8 + chunk;
          const __m256i wq = _mm256_sub_epi8(q[c], m32);
          const __m256i aw = _mm256_sign_epi8(wq, wq);
          for (int a = 0; a < A; ++a) {
            const float s0 = d * static_cast<float>(b[i].scales[2 * chunk]) * x[a].d[xb];
            const float s1 = d * static_cast<float>(b[i].scales[2 * chunk + 1]) * x[a].d[xb];
            const __m256 scale = _mm256_setr_m128(_mm_set1_ps(s0), _mm_set1_ps(s1));
            acc[a] = _mm256_fmadd_ps(scale, DotSigned32(aw, wq, LoadX(x[a].qs + 32 * xb)), acc[a]);
          }
        }
      }
    }
    for (int a = 0; a < A; ++a) out[a * R + r] = Reduce8(acc[a]);
  }
}

// Dispatch on num_x (1..kDotMaxActRows; MatMul never passes more).
template <void (*K1)(const void* const*, const ActQ8Row*, int64_t, float*),
          void (*K2)(const void* const*, const ActQ8Row*, int64_t, float*),
          void (*K3)(const void* const*, const ActQ8Row*, int64_t, float*),
          void (*K4)(const void* const*, const ActQ8Row*, int64_t, float*)>
LOOM_AVX2 void DotQuant(const void* const* w, const ActQ8Row* x, int num_x, int64_t k, float* out) {
  switch (num_x) {
    case 1:
      return K1(w, x, k, out);
    case 2:
      return K2(w, x, k, out);
    case 3:
      return K3(w, x, k, out);
    default:
      return K4(w, x, k, out);
  }
}

static_assert(kDotMaxActRows == 4, "the dispatchers above instantiate A = 1..4");

}  // namespace

const DotKernels* Avx2DotKernels() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                                __builtin_cpu_supports("f16c");
  static const DotKernels k = {
      .isa = "avx2",
      .f32 = DotPlain<F32W>,
      .f16 = DotPlain<F16W>,
      .bf16 = DotPlain<BF16W>,
      .q8_0 = DotQuant<DotQ32N<Q8_0W, 1>, DotQ32N<Q8_0W, 2>, DotQ32N<Q8_0W, 3>, DotQ32N<Q8_0W, 4>>,
      .q4_0 = DotQuant<DotQ32N<Q4_0W, 1>, DotQ32N<Q4_0W, 2>, DotQ32N<Q4_0W, 3>, DotQ32N<Q4_0W, 4>>,
      .q4_K = DotQuant<DotQ4_KN<1>, DotQ4_KN<2>, DotQ4_KN<3>, DotQ4_KN<4>>,
      .q6_K = DotQuant<DotQ6_KN<1>, DotQ6_KN<2>, DotQ6_KN<3>, DotQ6_KN<4>>,
      .plain_act_rows = 3,
      .quant_act_rows = 4,
  };
  return supported ? &k : nullptr;
}

}  // namespace loom::cpu
