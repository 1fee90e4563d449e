#include "backend/cpu/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "backend/cpu/e4m3_x86.h"
#include "base/check.h"
#include "tensor/kv_quant.h"

#define LOOM_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace loom::cpu {
namespace {

// ---- vector helpers: scalar and AVX2 flavours (same results up to f32 rounding) ----

float DotScalar(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
void AxpyScalar(float a, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}
void ToF32Scalar(DType t, const void* src, float* dst, int n) {
  if (t == DType::kF16) {
    for (int i = 0; i < n; ++i) dst[i] = F16ToF32(static_cast<const uint16_t*>(src)[i]);
  } else {
    for (int i = 0; i < n; ++i) dst[i] = Bf16ToF32(static_cast<const uint16_t*>(src)[i]);
  }
}

LOOM_AVX2 float DotAvx2(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  float r = _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}
LOOM_AVX2 void AxpyAvx2(float a, const float* x, float* y, int n) {
  const __m256 av = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * x[i];
}
LOOM_AVX2 void ToF32Avx2(DType t, const void* src, float* dst, int n) {
  const auto* h = static_cast<const uint16_t*>(src);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i));
    const __m256 f = t == DType::kF16
                         ? _mm256_cvtph_ps(v)
                         : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
    _mm256_storeu_ps(dst + i, f);
  }
  ToF32Scalar(t, h + i, dst + i, n - i);
}

struct Helpers {
  float (*dot)(const float*, const float*, int);
  void (*axpy)(float, const float*, float*, int);
  void (*to_f32)(DType, const void*, float*, int);
};

// One pool as the kernels read it: rows of head_dim values of dtype (f32, f16, bf16), or
// quantized rows (tensor/kv_quant.h), their codes and scales apart in each block.
struct PoolView {
  const char* base;
  DType dtype;
  KvQuant quant;
  int block_size, num_kv_heads;
  size_t row_bytes;    // plain rows
  KvQuantBlock blk;    // quantized rows
  size_t block_bytes;  // quantized: blk.BlockBytes()
  // The row (or its codes) of token `off` of block `block`, kv head h.
  const char* Row(int64_t block, int off, int h) const {
    if (quant == KvQuant::kNone) {
      return base + static_cast<size_t>((block * block_size + off) * num_kv_heads + h) * row_bytes;
    }
    return base + static_cast<size_t>(block) * block_bytes + blk.Codes(off, h);
  }
  // A quantized row's scales (null for plain rows).
  const char* Scales(int64_t block, int off, int h) const {
    if (quant == KvQuant::kNone) return nullptr;
    return base + static_cast<size_t>(block) * block_bytes + blk.Scales(off, h);
  }
};

PoolView ViewPool(const Tensor& pool, KvQuant quant, int head_dim) {
  const int bs = static_cast<int>(pool.dim(1)), kvh = static_cast<int>(pool.dim(2));
  const KvQuantBlock blk =
      quant == KvQuant::kNone ? KvQuantBlock{} : KvQuantBlock(quant, head_dim, bs, kvh);
  return PoolView{static_cast<const char*>(pool.data()), pool.dtype(), quant,           bs, kvh,
                  RowBytes(pool.dtype(), pool.dim(3)),   blk,          blk.BlockBytes()};
}

// Returns a pointer to the f32 values of a pool row (the row itself for f32, else `buf`).
const float* RowF32(const Helpers& h, const PoolView& pool, int64_t block, int off, int head,
                    int dim, float* buf) {
  const char* p = pool.Row(block, off, head);
  if (pool.quant != KvQuant::kNone) {
    DequantizeKvRow(pool.quant, reinterpret_cast<const uint8_t*>(p),
                    reinterpret_cast<const uint8_t*>(pool.Scales(block, off, head)), dim, buf);
    return buf;
  }
  if (pool.dtype == DType::kF32) return reinterpret_cast<const float*>(p);
  h.to_f32(pool.dtype, p, buf, dim);
  return buf;
}

// ---- the AVX2 path for head_dim % 8 == 0: (query row, block of kv heads) tasks, page by page ----
//
// Per page chunk (<= block_size keys): rows are read in place through their format (f32 loads,
// f16/bf16 widened, quantized rows decoded in registers: no copy of the cache); the
// scores of 4 keys at a time come from 4 accumulators reduced together (one horizontal tree per
// 4 scores, not per score); P @ V keeps up to 32 output dims of a head in registers across the
// chunk's keys, with the online-softmax rescale folded into the load. Same math as the generic
// path, summed in a different order (f32 rounding differs); the order depends only on the task's
// own positions, so a row's result is the same in any batch.

LOOM_AVX2 inline __m128 Reduce4x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

LOOM_AVX2 inline float Reduce1x8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// ---- row formats: 8 consecutive f32 values of a pool row, in registers ----
//
// A row format reads elements [e, e + 8) of a raw pool row (e % 8 == 0) given the scales of their
// group (Scales(row's scales, e >> shift)): f32 rows load, f16 / bf16 rows widen (exact), quantized
// rows compute each value exactly as DequantizeKvRow does (one rounding of code * d, fma for int4).
// So the kernels below, which read keys and values only through Load8 and always sum in the
// same order, give the same bits whatever the pool holds as f32 pools of those values do.
// Plain rows have a single "group" (shift 30).

struct NoScales {};

struct F32Rows {
  int shift = 30;
  NoScales Scales(const char*, int) const { return {}; }
  LOOM_AVX2 __m256 Load8(const char* r, int e, NoScales) const {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(r) + e);
  }
};

struct F16Rows {
  int shift = 30;
  NoScales Scales(const char*, int) const { return {}; }
  LOOM_AVX2 __m256 Load8(const char* r, int e, NoScales) const {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2 * e)));
  }
};

struct Bf16Rows {
  int shift = 30;
  NoScales Scales(const char*, int) const { return {}; }
  LOOM_AVX2 __m256 Load8(const char* r, int e, NoScales) const {
    const __m256i v =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2 * e)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
};

inline float ScaleAt(const char* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Bf16ToF32(h);
}

// int8 and fp8 rows: codes x D; scales d bf16 x D / g.
struct Int8Rows {
  int D, shift;
  LOOM_AVX2 __m256 Scales(const char* s, int gi) const {
    return _mm256_set1_ps(ScaleAt(s + 2 * gi));
  }
  LOOM_AVX2 __m256 Load8(const char* r, int e, __m256 d) const {
    const __m256i c =
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r + e)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(c), d);
  }
};

// fp8: each code's value / 256 (E4m3x8Over256, exact) times d * 256 (exact): e4m3(c) * d rounded
// once (the fp8 weight kernels' decode).
struct Fp8Rows {
  int D, shift;
  LOOM_AVX2 __m256 Scales(const char* s, int gi) const {
    return _mm256_set1_ps(ScaleAt(s + 2 * gi) * 256.0f);
  }
  LOOM_AVX2 __m256 Load8(const char* r, int e, __m256 d256) const {
    return _mm256_mul_ps(E4m3x8Over256(reinterpret_cast<const uint8_t*>(r + e)), d256);
  }
};

// int4 rows: codes x D / 2; scales (d, m) bf16 x D / g; in a group, byte j < g / 2 holds element j
// (low nibble) and j + g / 2 (high), so 8 elements never straddle halves (g / 2 % 8 == 0).
struct Int4Rows {
  int D, shift;
  struct DM {
    __m256 d, m;
  };
  LOOM_AVX2 DM Scales(const char* sc, int gi) const {
    const char* s = sc + 4 * gi;
    return {_mm256_set1_ps(ScaleAt(s)), _mm256_set1_ps(ScaleAt(s + 2))};
  }
  LOOM_AVX2 __m256 Load8(const char* r, int e, DM s) const {
    const int g = 1 << shift, half = g / 2;
    const int gi = e >> shift, j = e & (g - 1);
    const __m256i c = _mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r + gi * half + (j & (half - 1)))));
    const __m256i q =
        j < half ? _mm256_and_si256(c, _mm256_set1_epi32(0x0f)) : _mm256_srli_epi32(c, 4);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), s.d, s.m);
  }
};

// turbo4 / turbo3 rows: BITS-bit codes, 8 elements in BITS bytes (element i at bits BITS * i),
// each a Lloyd-Max level times its group's scale (tensor/kv_quant.h): the level is picked by a
// permute, then one multiply, as DequantizeKvRow computes it.
template <int BITS>
struct LevelRows {
  int D, shift;
  const float* levels;  // 1 << BITS of them
  LOOM_AVX2 __m256 Scales(const char* s, int gi) const {
    return _mm256_set1_ps(ScaleAt(s + 2 * gi));
  }
  LOOM_AVX2 __m256 Load8(const char* r, int e, __m256 sc) const {
    uint32_t w = 0;
    std::memcpy(&w, r + e * BITS / 8, BITS);
    const __m256i shifts =
        _mm256_setr_epi32(0, BITS, 2 * BITS, 3 * BITS, 4 * BITS, 5 * BITS, 6 * BITS, 7 * BITS);
    const __m256i idx =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(w)), shifts),
                         _mm256_set1_epi32((1 << BITS) - 1));
    __m256 v = _mm256_permutevar8x32_ps(_mm256_loadu_ps(levels), idx);
    if constexpr (BITS == 4) {
      const __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(levels + 8), idx);
      v = _mm256_blendv_ps(v, hi,
                           _mm256_castsi256_ps(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(7))));
    }
    return _mm256_mul_ps(v, sc);
  }
};

// scores[h * bs + c] = dot(q + h * D, rows[c]) (scales srows[c]) for h < NH (1 or 2 query heads of
// one kv head: each key is decoded once for both) and c < cnt; D % 8 == 0. Group by group (one
// scale load per key and group), elements in order within; each (head, key) sum is the same
// whatever NH.
template <int NH, class Rows>
LOOM_AVX2 void Scores(const Rows& f, const float* q, const char* const* rows,
                      const char* const* srows, int cnt, int D, int bs, float* scores) {
  const int G = std::min(D, 1 << f.shift);
  int c = 0;
  for (; c + 4 <= cnt; c += 4) {
    __m256 a[NH][4];
    for (int h = 0; h < NH; ++h) {
      for (int k = 0; k < 4; ++k) a[h][k] = _mm256_setzero_ps();
    }
    for (int g0 = 0; g0 < D; g0 += G) {
      const int gi = g0 >> f.shift;
      const auto s0 = f.Scales(srows[c], gi), s1 = f.Scales(srows[c + 1], gi),
                 s2 = f.Scales(srows[c + 2], gi), s3 = f.Scales(srows[c + 3], gi);
      for (int d = g0; d < g0 + G; d += 8) {
        const __m256 k0 = f.Load8(rows[c], d, s0), k1 = f.Load8(rows[c + 1], d, s1),
                     k2 = f.Load8(rows[c + 2], d, s2), k3 = f.Load8(rows[c + 3], d, s3);
        for (int h = 0; h < NH; ++h) {
          const __m256 qv = _mm256_loadu_ps(q + h * D + d);
          a[h][0] = _mm256_fmadd_ps(qv, k0, a[h][0]);
          a[h][1] = _mm256_fmadd_ps(qv, k1, a[h][1]);
          a[h][2] = _mm256_fmadd_ps(qv, k2, a[h][2]);
          a[h][3] = _mm256_fmadd_ps(qv, k3, a[h][3]);
        }
      }
    }
    for (int h = 0; h < NH; ++h) {
      _mm_storeu_ps(scores + h * bs + c, Reduce4x8(a[h][0], a[h][1], a[h][2], a[h][3]));
    }
  }
  for (; c < cnt; ++c) {
    __m256 a[NH];
    for (int h = 0; h < NH; ++h) a[h] = _mm256_setzero_ps();
    for (int g0 = 0; g0 < D; g0 += G) {
      const auto s = f.Scales(srows[c], g0 >> f.shift);
      for (int d = g0; d < g0 + G; d += 8) {
        const __m256 k = f.Load8(rows[c], d, s);
        for (int h = 0; h < NH; ++h) {
          a[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * D + d), k, a[h]);
        }
      }
    }
    for (int h = 0; h < NH; ++h) scores[h * bs + c] = Reduce1x8(a[h]);
  }
}

// For h < NH (1 or 2 query heads of one kv head, each value decoded once for both):
// acc[h * D + 0..D) = acc * alpha[h] + sum_c p[h * bs + c] * rows[c]; D % 8 == 0. Each head's
// sums are the same whatever NH.
template <int NH, class Rows>
LOOM_AVX2 void WeightedSum(const Rows& f, const float* p, int bs, const char* const* rows,
                           const char* const* srows, int cnt, int D, const float* alpha,
                           float* acc) {
  int d = 0;
  for (; d + 32 <= D; d += 32) {
    __m256 r[NH][4];
    for (int h = 0; h < NH; ++h) {
      const __m256 av = _mm256_set1_ps(alpha[h]);
      for (int k = 0; k < 4; ++k) {
        r[h][k] = _mm256_mul_ps(_mm256_loadu_ps(acc + h * D + d + 8 * k), av);
      }
    }
    for (int c = 0; c < cnt; ++c) {
      const char* v = rows[c];
      // Groups of 16 split the 32 elements; groups of 32 or more (and plain rows) do not.
      const auto lo = f.Scales(srows[c], d >> f.shift);
      const auto hi = f.shift >= 5 ? lo : f.Scales(srows[c], (d + 16) >> f.shift);
      const __m256 v0 = f.Load8(v, d, lo), v1 = f.Load8(v, d + 8, lo), v2 = f.Load8(v, d + 16, hi),
                   v3 = f.Load8(v, d + 24, hi);
      for (int h = 0; h < NH; ++h) {
        const __m256 pv = _mm256_set1_ps(p[h * bs + c]);
        r[h][0] = _mm256_fmadd_ps(pv, v0, r[h][0]);
        r[h][1] = _mm256_fmadd_ps(pv, v1, r[h][1]);
        r[h][2] = _mm256_fmadd_ps(pv, v2, r[h][2]);
        r[h][3] = _mm256_fmadd_ps(pv, v3, r[h][3]);
      }
    }
    for (int h = 0; h < NH; ++h) {
      for (int k = 0; k < 4; ++k) _mm256_storeu_ps(acc + h * D + d + 8 * k, r[h][k]);
    }
  }
  for (; d < D; d += 8) {
    __m256 r[NH];
    for (int h = 0; h < NH; ++h) {
      r[h] = _mm256_mul_ps(_mm256_loadu_ps(acc + h * D + d), _mm256_set1_ps(alpha[h]));
    }
    for (int c = 0; c < cnt; ++c) {
      const __m256 v = f.Load8(rows[c], d, f.Scales(srows[c], d >> f.shift));
      for (int h = 0; h < NH; ++h) {
        r[h] = _mm256_fmadd_ps(_mm256_set1_ps(p[h * bs + c]), v, r[h]);
      }
    }
    for (int h = 0; h < NH; ++h) _mm256_storeu_ps(acc + h * D + d, r[h]);
  }
}

// Calls fn(rows) with the row format of `pool` (head_dim D).
template <class Fn>
LOOM_AVX2 void WithRows(const PoolView& pool, int D, Fn&& fn) {
  const int shift =
      pool.quant == KvQuant::kNone ? 30 : std::countr_zero(static_cast<unsigned>(KvQuantGroup(D)));
  switch (pool.quant) {
    case KvQuant::kFp8:
      return fn(Fp8Rows{D, shift});
    case KvQuant::kInt8:
      return fn(Int8Rows{D, shift});
    case KvQuant::kInt4:
      return fn(Int4Rows{D, shift});
    case KvQuant::kRot8:
      return fn(Int8Rows{D, shift});
    case KvQuant::kRot4:
      return fn(LevelRows<4>{D, shift, KvQuantLevels(KvQuant::kRot4)});
    case KvQuant::kRot3:
      return fn(LevelRows<3>{D, shift, KvQuantLevels(KvQuant::kRot3)});
    case KvQuant::kNone:
      break;
  }
  if (pool.dtype == DType::kF16) return fn(F16Rows{});
  if (pool.dtype == DType::kBF16) return fn(Bf16Rows{});
  return fn(F32Rows{});
}

// Scratch of one thread for AttendTaskAvx2.
struct TaskScratch {
  std::vector<float> acc, scores, m, l, alpha;
  TaskScratch(int group, int D, int bs)
      : acc(static_cast<size_t>(group) * D),
        scores(static_cast<size_t>(group) * bs),
        m(static_cast<size_t>(group)),
        l(static_cast<size_t>(group)),
        alpha(static_cast<size_t>(group)) {}
};

// Raw pool rows (codes) and their scales of tokens [off, off + cnt) of one block, kv head h.
void ChunkRows(const PoolView& pool, int64_t block, int off, int h, int cnt, const char** rows,
               const char** srows) {
  for (int c = 0; c < cnt; ++c) {
    rows[c] = pool.Row(block, off + c, h);
    srows[c] = pool.Scales(block, off + c, h);
  }
}

}  // namespace

void PagedAttention(const Tensor& q, const KvLayer& layer, const AttentionMeta& meta,
                    const AttentionParams& params, const Tensor& out, int num_threads,
                    bool use_avx2) {
  const int H = params.num_heads, KVH = params.num_kv_heads, D = params.head_dim;
  CHECK(H > 0 && KVH > 0 && H % KVH == 0) << "Attention: " << H << " heads, " << KVH << " kv heads";
  const int group = H / KVH;
  const int64_t n = meta.num_tokens;
  CHECK(q.dtype() == DType::kF32 && q.rows() == n && q.cols() == int64_t{H} * D)
      << "Attention: q " << q.DebugString() << " for " << n << " tokens x " << H << "x" << D;
  CHECK(out.dtype() == DType::kF32 && out.shape() == q.shape()) << out.DebugString();
  using PoolOf = std::pair<const Tensor*, KvQuant>;
  for (const auto& [pool, quant] :
       {PoolOf{&layer.k, layer.k_quant}, PoolOf{&layer.v, layer.v_quant}}) {
    CHECK(pool->ndim() == 4 && pool->dim(0) == layer.k.dim(0) && pool->dim(1) == meta.block_size &&
          pool->dim(2) == KVH)
        << "Attention: pool " << pool->DebugString() << " vs block_size " << meta.block_size << ", "
        << KVH << " kv heads";
    if (quant == KvQuant::kNone) {
      const DType t = pool->dtype();
      CHECK(pool->dim(3) == D && (t == DType::kF32 || t == DType::kF16 || t == DType::kBF16))
          << "Attention: pool " << pool->DebugString() << " for head_dim " << D;
    } else {
      CHECK(pool->dtype() == DType::kU8 &&
            pool->dim(3) == static_cast<int64_t>(KvQuantRowBytes(quant, D)))
          << "Attention: " << KvQuantName(quant) << " pool " << pool->DebugString()
          << " for head_dim " << D;
    }
  }
  const PoolView kpool = ViewPool(layer.k, layer.k_quant, D);
  const PoolView vpool = ViewPool(layer.v, layer.v_quant, D);
  const int64_t num_blocks = layer.k.dim(0);
  const int bs = meta.block_size;

  const int32_t* qstart = meta.query_start.data_as<const int32_t>();
  const int32_t* kv_len = meta.kv_len.data_as<const int32_t>();
  const int32_t* indptr = meta.page_indptr.data_as<const int32_t>();
  const int32_t* pages = meta.page_indices.data_as<const int32_t>();
  CHECK_EQ(qstart[meta.num_seqs], n) << "Attention: query_start does not end at num_tokens";
  std::vector<int32_t> token_seq(static_cast<size_t>(n));
  for (int s = 0; s < meta.num_seqs; ++s) {
    const int32_t q_len = qstart[s + 1] - qstart[s];
    CHECK(q_len >= 0 && q_len <= kv_len[s])
        << "Attention: seq " << s << " q_len " << q_len << " kv_len " << kv_len[s];
    CHECK_GE(int64_t{indptr[s + 1] - indptr[s]} * bs, kv_len[s])
        << "Attention: seq " << s << " has too few pages for kv_len " << kv_len[s];
    for (int32_t t = qstart[s]; t < qstart[s + 1]; ++t) token_seq[static_cast<size_t>(t)] = s;
  }

  const Helpers helpers = use_avx2 ? Helpers{DotAvx2, AxpyAvx2, ToF32Avx2}
                                   : Helpers{DotScalar, AxpyScalar, ToF32Scalar};
  const float* qbase = q.data_as<const float>();
  float* obase = out.data_as<float>();
  // Rotated keys (turbo): the scores are those of q turned the same way (q.k = Rq . Rk).
  std::vector<float> q_turned;
  if (KvQuantRotated(layer.k_quant)) {
    q_turned.assign(qbase, qbase + n * H * D);
    for (int64_t r = 0; r < n * H; ++r) RotateKvRow(q_turned.data() + r * D, D);
    qbase = q_turned.data();
  }
  const float cap = params.logit_softcap;
  const float* sinks = nullptr;
  if (params.sinks.defined()) {
    CHECK(params.sinks.dtype() == DType::kF32 && params.sinks.numel() == H)
        << "Attention: sinks " << params.sinks.DebugString() << " for " << H << " heads";
    sinks = params.sinks.data_as<const float>();
  }

  const bool fast = use_avx2 && D % 8 == 0;
  // A task is one query row and a block of consecutive kv heads, visited chunk by chunk with the
  // heads inner: the chunk's rows of neighbouring heads are neighbouring memory, where one head
  // per task swept the whole context at a 3 KB stride (134M, f32 KV). About 2 tasks per thread:
  // the whole row per task once there are enough rows. Every (head, row) is computed exactly as
  // before, so the bits do not depend on the blocking. Measured (dev VM, 134M F16, decode tok/s):
  // 1 thread, 1 row, 1024-token context: 68-70 with 12 heads a task vs 57-58 with 1; 2 threads,
  // 1 row: 93-98 with 3 (4 tasks) vs 83-86; 2 threads, 8 rows, 512 tokens: 310-322 with 12 vs
  // 192-204.
  const int64_t want_blocks = std::clamp<int64_t>((2 * num_threads + n - 1) / n, 1, KVH);
  const int hb = static_cast<int>((KVH + want_blocks - 1) / want_blocks);
  const int64_t nblk = (KVH + hb - 1) / hb;
  const int64_t num_btasks = n * nblk;
#pragma omp parallel num_threads(num_threads)
  {
    TaskScratch ts(group * hb, D, bs);
    std::vector<const char*> krows(static_cast<size_t>(hb * bs)),
        vrows(static_cast<size_t>(hb * bs)), kscales(static_cast<size_t>(hb * bs)),
        vscales(static_cast<size_t>(hb * bs));
    std::vector<float> kbuf(static_cast<size_t>(D)), vbuf(static_cast<size_t>(D));
    float* acc = ts.acc.data();
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < num_btasks; ++task) {
      const int64_t t = task / nblk;
      const int g0 = static_cast<int>(task % nblk) * hb;
      const int ng = std::min(KVH, g0 + hb) - g0;
      const int s = token_seq[static_cast<size_t>(t)];
      const int32_t q_len = qstart[s + 1] - qstart[s];
      const int64_t pos = kv_len[s] - q_len + (t - qstart[s]);
      const int64_t first =
          params.sliding_window > 0 ? std::max<int64_t>(0, pos - params.sliding_window + 1) : 0;
      const int32_t* seq_pages = pages + indptr[s];
      const int rows = ng * group;  // (kv head, group head) pairs of this task
      std::fill(ts.acc.begin(), ts.acc.begin() + rows * D, 0.0f);
      std::fill(ts.m.begin(), ts.m.begin() + rows, -std::numeric_limits<float>::infinity());
      std::fill(ts.l.begin(), ts.l.begin() + rows, 0.0f);
      const float* qg = qbase + t * H * D + static_cast<int64_t>(g0) * group * D;
      for (int64_t p = first; p <= pos;) {
        const int64_t block = seq_pages[p / bs];
        CHECK(block >= 0 && block < num_blocks) << "Attention: block id " << block;
        const int64_t end = std::min(pos + 1, (p / bs + 1) * bs);
        const int cnt = static_cast<int>(end - p);
        for (int gi = 0; gi < ng; ++gi) {
          const int off = static_cast<int>(p % bs), kvh = g0 + gi;  // position p, kv head kvh
          // Raw scores of this page's chunk for every head of the group (one key load per key).
          if (fast) {
            const char** kr = krows.data() + gi * bs;
            const char** ks = kscales.data() + gi * bs;
            ChunkRows(kpool, block, off, kvh, cnt, kr, ks);
            ChunkRows(vpool, block, off, kvh, cnt, vrows.data() + gi * bs,
                      vscales.data() + gi * bs);
            WithRows(kpool, D, [&](const auto& f) {
              int h = 0;
              for (; h + 2 <= group; h += 2) {
                Scores<2>(f, qg + (gi * group + h) * D, kr, ks, cnt, D, bs,
                          ts.scores.data() + (gi * group + h) * bs);
              }
              if (h < group) {
                Scores<1>(f, qg + (gi * group + h) * D, kr, ks, cnt, D, bs,
                          ts.scores.data() + (gi * group + h) * bs);
              }
            });
          } else {
            for (int c = 0; c < cnt; ++c) {
              const float* kr = RowF32(helpers, kpool, block, off + c, kvh, D, kbuf.data());
              for (int h = 0; h < group; ++h) {
                ts.scores[static_cast<size_t>((gi * group + h) * bs + c)] =
                    helpers.dot(qg + (gi * group + h) * D, kr, D);
              }
            }
          }
        }
        // Online softmax per head; the fast path also adds this chunk's P @ V here.
        for (int r = 0; r < rows; ++r) {
          float* sh = ts.scores.data() + r * bs;
          float cm = ts.m[static_cast<size_t>(r)];
          for (int c = 0; c < cnt; ++c) {
            float sc = sh[c] * params.scale;
            if (cap > 0.0f) sc = cap * std::tanh(sc / cap);
            sh[c] = sc;
            cm = std::max(cm, sc);
          }
          const float alpha = std::exp(ts.m[static_cast<size_t>(r)] - cm);  // 0 on the first chunk
          float sum = ts.l[static_cast<size_t>(r)] * alpha;
          for (int c = 0; c < cnt; ++c) {
            sh[c] = std::exp(sh[c] - cm);
            sum += sh[c];
          }
          ts.l[static_cast<size_t>(r)] = sum;
          ts.m[static_cast<size_t>(r)] = cm;
          ts.alpha[static_cast<size_t>(r)] = alpha;
          if (!fast) {
            for (int d = 0; d < D; ++d) acc[r * D + d] *= alpha;
          }
        }
        // The fast path's P @ V: the heads of a kv head two at a time over its values.
        for (int gi = 0; gi < ng && fast; ++gi) {
          WithRows(vpool, D, [&](const auto& f) {
            int h = 0;
            for (; h <= group - 1; h += 2) {
              const int r = gi * group + h;
              if (h + 2 <= group) {
                WeightedSum<2>(f, ts.scores.data() + r * bs, bs, vrows.data() + gi * bs,
                               vscales.data() + gi * bs, cnt, D, ts.alpha.data() + r, acc + r * D);
              } else {
                WeightedSum<1>(f, ts.scores.data() + r * bs, bs, vrows.data() + gi * bs,
                               vscales.data() + gi * bs, cnt, D, ts.alpha.data() + r, acc + r * D);
              }
            }
          });
        }
        for (int gi = 0; gi < ng && !fast; ++gi) {  // generic path: P @ V key by key
          const int off = static_cast<int>(p % bs);
          for (int c = 0; c < cnt; ++c) {
            const float* vr = RowF32(helpers, vpool, block, off + c, g0 + gi, D, vbuf.data());
            for (int h = 0; h < group; ++h) {
              const int r = gi * group + h;
              helpers.axpy(ts.scores[static_cast<size_t>(r * bs + c)], vr, acc + r * D, D);
            }
          }
        }
        p = end;
      }
      for (int r = 0; r < rows; ++r) {
        const int64_t head = static_cast<int64_t>(g0) * group + r;
        float* o = obase + t * H * D + head * D;
        if (sinks != nullptr) {  // one more logit in the softmax, with no value
          const float m = ts.m[static_cast<size_t>(r)];
          const float mm = std::max(m, sinks[head]);
          const float a = std::exp(m - mm);
          const float inv = 1.0f / (ts.l[static_cast<size_t>(r)] * a + std::exp(sinks[head] - mm));
          for (int d = 0; d < D; ++d) o[d] = acc[r * D + d] * a * inv;
          continue;
        }
        const float inv = 1.0f / ts.l[static_cast<size_t>(r)];
        for (int d = 0; d < D; ++d) o[d] = acc[r * D + d] * inv;
      }
    }
  }
  // Rotated values (turbo): the weighted sum is R times the true one.
  if (KvQuantRotated(layer.v_quant)) {
    for (int64_t r = 0; r < n * H; ++r) UnrotateKvRow(obase + r * D, D);
  }
}

}  // namespace loom::cpu
