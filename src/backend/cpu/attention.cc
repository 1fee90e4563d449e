#include "backend/cpu/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/check.h"

#define LOOM_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace loom::cpu {
namespace {

// ---- vector helpers: scalar and AVX2 flavours (same results up to f32 rounding) ----
// dots / axpys take up to kKeys keys at once: the AVX2 ones run the keys' independent FMA chains
// interleaved (one key's 8-step dependent chain alone is latency-bound), each key's arithmetic
// exactly that of a one-key call; axpys applies its keys to y in order, keeping y in registers.

constexpr int kKeys = 8;

float DotScalar(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
void AxpyScalar(float a, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}
void DotsScalar(const float* q, const float* const* k, int nk, int n, float* out) {
  for (int j = 0; j < nk; ++j) out[j] = DotScalar(q, k[j], n);
}
void AxpysScalar(const float* a, const float* const* x, int nx, float* y, int n) {
  for (int j = 0; j < nx; ++j) AxpyScalar(a[j], x[j], y, n);
}
void ToF32Scalar(DType t, const void* src, float* dst, int n) {
  if (t == DType::kF16) {
    for (int i = 0; i < n; ++i) dst[i] = F16ToF32(static_cast<const uint16_t*>(src)[i]);
  } else {
    for (int i = 0; i < n; ++i) dst[i] = Bf16ToF32(static_cast<const uint16_t*>(src)[i]);
  }
}

// out[j] = dot(q, k[j]) for j < N: one 8-lane accumulator per key, reduced as
// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), then the n % 8 tail in order.
struct DotsAvx2 {
  template <int N>
  LOOM_AVX2 static void Run(const float* q, const float* const* k, int n, float* out) {
    __m256 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 qv = _mm256_loadu_ps(q + i);
      for (int j = 0; j < N; ++j) acc[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[j] + i), acc[j]);
    }
    for (int j = 0; j < N; ++j) {
      const __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1));
      const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
      float r = _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
      for (int ii = i; ii < n; ++ii) r += q[ii] * k[j][ii];
      out[j] = r;
    }
  }
};
// y += a[j] * x[j] for j = 0 .. N - 1 in that order.
struct AxpysAvx2 {
  template <int N>
  LOOM_AVX2 static void Run(const float* a, const float* const* x, float* y, int n) {
    __m256 av[N];
    for (int j = 0; j < N; ++j) av[j] = _mm256_set1_ps(a[j]);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256 yv = _mm256_loadu_ps(y + i);
      for (int j = 0; j < N; ++j) yv = _mm256_fmadd_ps(av[j], _mm256_loadu_ps(x[j] + i), yv);
      _mm256_storeu_ps(y + i, yv);
    }
    for (; i < n; ++i) {
      for (int j = 0; j < N; ++j) y[i] += a[j] * x[j][i];
    }
  }
};
// K::Run<count>(args...) for count in 1..kKeys.
template <class K, class... Args>
LOOM_AVX2 void ForCount(int count, Args... args) {
  switch (count) {
    case 1: return K::template Run<1>(args...);
    case 2: return K::template Run<2>(args...);
    case 3: return K::template Run<3>(args...);
    case 4: return K::template Run<4>(args...);
    case 5: return K::template Run<5>(args...);
    case 6: return K::template Run<6>(args...);
    case 7: return K::template Run<7>(args...);
    default: return K::template Run<8>(args...);
  }
}
static_assert(kKeys == 8, "ForCount covers 1..8");
LOOM_AVX2 void DotsAvx2All(const float* q, const float* const* k, int nk, int n, float* out) {
  ForCount<DotsAvx2>(nk, q, k, n, out);
}
LOOM_AVX2 void AxpysAvx2All(const float* a, const float* const* x, int nx, float* y, int n) {
  ForCount<AxpysAvx2>(nx, a, x, y, n);
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
  void (*dots)(const float*, const float* const*, int, int, float*);  // nk <= kKeys
  void (*axpys)(const float*, const float* const*, int, float*, int);  // nx <= kKeys
  void (*to_f32)(DType, const void*, float*, int);
};

// Returns a pointer to the f32 values of a pool row (the row itself for f32, else `buf`).
const float* RowF32(const Helpers& h, DType t, const char* pool, int64_t row, int dim,
                    float* buf) {
  const size_t elem = t == DType::kF32 ? 4 : 2;
  const char* p = pool + static_cast<size_t>(row) * static_cast<size_t>(dim) * elem;
  if (t == DType::kF32) return reinterpret_cast<const float*>(p);
  h.to_f32(t, p, buf, dim);
  return buf;
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
  const Tensor& kp = layer.k;
  const Tensor& vp = layer.v;
  CHECK(kp.ndim() == 4 && kp.dim(1) == meta.block_size && kp.dim(2) == KVH && kp.dim(3) == D)
      << "Attention: k pool " << kp.DebugString() << " vs block_size " << meta.block_size;
  CHECK(vp.shape() == kp.shape() && vp.dtype() == kp.dtype()) << vp.DebugString();
  const DType kv_t = kp.dtype();
  CHECK(kv_t == DType::kF32 || kv_t == DType::kF16 || kv_t == DType::kBF16) << DTypeName(kv_t);
  const int64_t num_blocks = kp.dim(0);
  const int bs = meta.block_size;

  const int32_t* qstart = meta.query_start.data_as<const int32_t>();
  const int32_t* kv_len = meta.kv_len.data_as<const int32_t>();
  const int32_t* indptr = meta.page_indptr.data_as<const int32_t>();
  const int32_t* pages = meta.page_indices.data_as<const int32_t>();
  CHECK_EQ(qstart[meta.num_seqs], n) << "Attention: query_start does not end at num_tokens";
  std::vector<int32_t> token_seq(static_cast<size_t>(n));
  for (int s = 0; s < meta.num_seqs; ++s) {
    const int32_t q_len = qstart[s + 1] - qstart[s];
    CHECK(q_len >= 0 && q_len <= kv_len[s]) << "Attention: seq " << s << " q_len " << q_len
                                            << " kv_len " << kv_len[s];
    CHECK_GE(int64_t{indptr[s + 1] - indptr[s]} * bs, kv_len[s])
        << "Attention: seq " << s << " has too few pages for kv_len " << kv_len[s];
    for (int32_t t = qstart[s]; t < qstart[s + 1]; ++t) token_seq[static_cast<size_t>(t)] = s;
  }

  const Helpers helpers = use_avx2 ? Helpers{DotsAvx2All, AxpysAvx2All, ToF32Avx2}
                                   : Helpers{DotsScalar, AxpysScalar, ToF32Scalar};
  const char* kbase = static_cast<const char*>(kp.data());
  const char* vbase = static_cast<const char*>(vp.data());
  const float* qbase = q.data_as<const float>();
  float* obase = out.data_as<float>();
  const float cap = params.logit_softcap;
  const int64_t num_tasks = n * KVH;

#pragma omp parallel num_threads(num_threads)
  {
    std::vector<float> acc(static_cast<size_t>(group) * D), kbuf(static_cast<size_t>(kKeys) * D),
        vbuf(static_cast<size_t>(kKeys) * D), scores(static_cast<size_t>(group) * bs);
    std::vector<float> m(static_cast<size_t>(group)), l(static_cast<size_t>(group));
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < num_tasks; ++task) {
      const int64_t t = task / KVH;
      const int g = static_cast<int>(task % KVH);
      const int s = token_seq[static_cast<size_t>(t)];
      const int32_t q_len = qstart[s + 1] - qstart[s];
      const int64_t pos = kv_len[s] - q_len + (t - qstart[s]);
      const int64_t first =
          params.sliding_window > 0 ? std::max<int64_t>(0, pos - params.sliding_window + 1) : 0;
      const int32_t* seq_pages = pages + indptr[s];
      std::fill(acc.begin(), acc.end(), 0.0f);
      std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
      std::fill(l.begin(), l.end(), 0.0f);
      const float* qg = qbase + t * H * D + static_cast<int64_t>(g) * group * D;
      for (int64_t p = first; p <= pos;) {
        const int64_t block = seq_pages[p / bs];
        CHECK(block >= 0 && block < num_blocks) << "Attention: block id " << block;
        const int64_t end = std::min(pos + 1, (p / bs + 1) * bs);
        const int cnt = static_cast<int>(end - p);
        // Scores of this page's chunk for every head of the group (one key load per key), kKeys
        // keys per helper call.
        auto row_of = [&](int c) { return (block * bs + (p + c) % bs) * KVH + g; };
        for (int c0 = 0; c0 < cnt; c0 += kKeys) {
          const int nk = std::min(kKeys, cnt - c0);
          const float* kr[kKeys];
          for (int j = 0; j < nk; ++j) {
            kr[j] = RowF32(helpers, kv_t, kbase, row_of(c0 + j), D, kbuf.data() + j * D);
          }
          for (int h = 0; h < group; ++h) {
            float dots[kKeys];
            helpers.dots(qg + h * D, kr, nk, D, dots);
            for (int j = 0; j < nk; ++j) {
              float sc = dots[j] * params.scale;
              if (cap > 0.0f) sc = cap * std::tanh(sc / cap);
              scores[static_cast<size_t>(h * bs + c0 + j)] = sc;
            }
          }
        }
        for (int h = 0; h < group; ++h) {
          float* sh = scores.data() + h * bs;
          float cm = m[static_cast<size_t>(h)];
          for (int c = 0; c < cnt; ++c) cm = std::max(cm, sh[c]);
          const float alpha = std::exp(m[static_cast<size_t>(h)] - cm);  // 0 on the first chunk
          float* ah = acc.data() + h * D;
          for (int d = 0; d < D; ++d) ah[d] *= alpha;
          float sum = l[static_cast<size_t>(h)] * alpha;
          for (int c = 0; c < cnt; ++c) {
            sh[c] = std::exp(sh[c] - cm);
            sum += sh[c];
          }
          l[static_cast<size_t>(h)] = sum;
          m[static_cast<size_t>(h)] = cm;
        }
        // acc_h += p_c v_c in key order for every element, as one key at a time would.
        for (int c0 = 0; c0 < cnt; c0 += kKeys) {
          const int nk = std::min(kKeys, cnt - c0);
          const float* vr[kKeys];
          for (int j = 0; j < nk; ++j) {
            vr[j] = RowF32(helpers, kv_t, vbase, row_of(c0 + j), D, vbuf.data() + j * D);
          }
          for (int h = 0; h < group; ++h) {
            helpers.axpys(scores.data() + h * bs + c0, vr, nk, acc.data() + h * D, D);
          }
        }
        p = end;
      }
      for (int h = 0; h < group; ++h) {
        float* o = obase + t * H * D + static_cast<int64_t>(g * group + h) * D;
        const float inv = 1.0f / l[static_cast<size_t>(h)];
        for (int d = 0; d < D; ++d) o[d] = acc[static_cast<size_t>(h * D + d)] * inv;
      }
    }
  }
}

}  // namespace loom::cpu
