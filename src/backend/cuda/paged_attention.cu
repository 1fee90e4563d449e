#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/decode_attention.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/flash_prefill.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/paged_attention.cuh"

namespace loom::cuda {
namespace {

constexpr int kKeyTile = 64;
constexpr int kThreads = 256;
constexpr int kMaxRows = kAttnMaxRows;
constexpr int kSmallRows = 8;  // decode tiles: q_per_tile 1 x GQA group <= 8
constexpr int kTinyRows = 4;   // ... group <= 4 (Llama 3, Qwen3, Gemma 3)
constexpr float kLog2e = 1.4426950408889634f;

struct KernelArgs : PagedKernelTables {
  const int32_t* tile_start;
  int num_seqs, block_size, q_per_tile, num_splits;
  float scale;
  int64_t num_rows;  // num_tokens * num_heads
  float* partial;
  float* lse;
};

// R: rows per block (kMaxRows, or kTinyRows / kSmallRows for decode tiles: less shared memory,
// so more blocks per SM, and fewer idle row slots in the score and P @ V loops).
template <int D, int R>
constexpr size_t SharedBytes() {
  return 2 * kKeyTile * (D + 8) * sizeof(__nv_bfloat16) + R * D * sizeof(float) +
         R * kKeyTile * sizeof(float) + 3 * R * sizeof(float);
}

// Prefix sum of query tiles per sequence: one block, a shared-memory scan per 256 sequences
// (a one-thread loop cost ~10 us a layer at 64 sequences: 64 dependent global loads).
constexpr int kScanThreads = 256;
__global__ void __launch_bounds__(kScanThreads)
    TileStartKernel(const int32_t* query_start, int num_seqs, int q_per_tile, int32_t* tile_start) {
  PdlWait();  // launched with PDL (launch.cuh)
  PdlLaunchDependents();
  __shared__ int buf[kScanThreads];
  int carry = 0;  // tiles of the sequences before this chunk (same in every thread)
  for (int base = 0; base < num_seqs; base += kScanThreads) {
    const int s = base + static_cast<int>(threadIdx.x);
    const int v =
        s < num_seqs ? (query_start[s + 1] - query_start[s] + q_per_tile - 1) / q_per_tile : 0;
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int off = 1; off < kScanThreads; off <<= 1) {  // inclusive Hillis-Steele scan
      const int t = static_cast<int>(threadIdx.x) >= off ? buf[threadIdx.x - off] : 0;
      __syncthreads();
      buf[threadIdx.x] += t;
      __syncthreads();
    }
    if (s < num_seqs) tile_start[s] = carry + buf[threadIdx.x] - v;
    carry += buf[kScanThreads - 1];
    __syncthreads();  // buf is rewritten by the next chunk
  }
  if (threadIdx.x == 0) tile_start[num_seqs] = carry;
}

template <int D, int R>
__global__ void __launch_bounds__(kThreads) PagedAttentionKernel(KernelArgs a) {
  PdlWait();  // launched with PDL (launch.cuh)
  PdlLaunchDependents();
  constexpr int kRowStride = D + 8;  // bf16 per shared K/V row: 16 B of padding against conflicts
  constexpr int kVec = D / 8;        // 16-byte vectors per row
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* k_s = reinterpret_cast<__nv_bfloat16*>(smem);         // [kKeyTile][kRowStride]
  __nv_bfloat16* v_s = k_s + kKeyTile * kRowStride;                    // [kKeyTile][kRowStride]
  float* q_s = reinterpret_cast<float*>(v_s + kKeyTile * kRowStride);  // [R][D], scaled
  float* s_s = q_s + R * D;                                            // [R][kKeyTile]
  float* m_s = s_s + R * kKeyTile;                                     // running max (log2)
  float* l_s = m_s + R;                                                // running sum
  float* alpha_s = l_s + R;                                            // this tile's rescale

  const int tile = blockIdx.x, g = blockIdx.y, split = blockIdx.z;
  if (tile >= a.tile_start[a.num_seqs]) return;
  const int s = SequenceOfTile(a.tile_start, a.num_seqs, tile);
  const int q0 = a.query_start[s];
  const int q_len = a.query_start[s + 1] - q0;
  const int t0 = q0 + (tile - a.tile_start[s]) * a.q_per_tile;
  const int ntok = min(a.q_per_tile, q0 + q_len - t0);
  const int group = a.group, H = a.num_heads, KVH = a.num_kv_heads, bs = a.block_size;
  const int M = ntok * group;
  const int pos0 = a.kv_len[s] - q_len + (t0 - q0);  // position of the tile's first token

  // Keys any row of the tile may see, then this split's share of them.
  const int range_lo = a.window > 0 ? max(0, pos0 - a.window + 1) : 0;
  const int range_hi = pos0 + ntok;
  const int range = max(range_hi - range_lo, 0);
  int chunk = (range + a.num_splits - 1) / a.num_splits;
  chunk = (chunk + kKeyTile - 1) / kKeyTile * kKeyTile;
  const int k_begin = range_lo + split * chunk;
  const int k_end = min(range_hi, k_begin + chunk);

  for (int i = threadIdx.x; i < R * D; i += kThreads) {
    const int r = i / D, d = i % D;
    float v = 0.f;
    if (r < M) {
      const int64_t t = t0 + r / group, h = int64_t{g} * group + r % group;
      v = __bfloat162float(a.q[(t * H + h) * D + d]) * a.scale;
    }
    q_s[i] = v;
  }
  if (threadIdx.x < R) {
    m_s[threadIdx.x] = -INFINITY;
    l_s[threadIdx.x] = 0.f;
  }

  constexpr int kPairs = D / 2;               // P @ V: threads per row, 2 dims each
  constexpr int kGroups = kThreads / kPairs;  // rows in flight
  constexpr int kRowsPerThread = (R + kGroups - 1) / kGroups;
  const int pv_col = threadIdx.x % kPairs;
  const int pv_row0 = threadIdx.x / kPairs;
  const bool pv_active = pv_row0 < kGroups;
  float acc[kRowsPerThread][2];
#pragma unroll
  for (int j = 0; j < kRowsPerThread; ++j) acc[j][0] = acc[j][1] = 0.f;

  constexpr int kScoreGroups = kThreads / kKeyTile;  // 4
  constexpr int kScoreRows = R / kScoreGroups;
  const int sc_key = threadIdx.x % kKeyTile;
  const int sc_row0 = threadIdx.x / kKeyTile;  // uniform within a warp
  const int32_t* pages = a.page_indices + a.page_indptr[s];
  __syncthreads();

  for (int kt = k_begin; kt < k_end; kt += kKeyTile) {
    // Gather this tile's K and V rows (zeros past the range: their P is 0, and 0 * 0 is no NaN).
    for (int i = threadIdx.x; i < kKeyTile * kVec; i += kThreads) {
      const int kk = i / kVec, part = i % kVec;
      const int p = kt + kk;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (p < k_end) {
        const int64_t block = pages[p / bs];
        const int64_t row = (block * bs + p % bs) * KVH + g;
        kv = a.k_desc.quantized() ? LoadDequantBf16x8(reinterpret_cast<const uint8_t*>(a.k_pool),
                                                      a.k_desc, block, p % bs, g, KVH, bs, part * 8)
                                  : reinterpret_cast<const uint4*>(a.k_pool + row * D)[part];
        vv = a.v_desc.quantized() ? LoadDequantBf16x8(reinterpret_cast<const uint8_t*>(a.v_pool),
                                                      a.v_desc, block, p % bs, g, KVH, bs, part * 8)
                                  : reinterpret_cast<const uint4*>(a.v_pool + row * D)[part];
      }
      *reinterpret_cast<uint4*>(k_s + kk * kRowStride + part * 8) = kv;
      *reinterpret_cast<uint4*>(v_s + kk * kRowStride + part * 8) = vv;
    }
    __syncthreads();

    // Scores: thread (key, row group) dots its key with rows sc_row0, sc_row0 + 4, ...
    {
      float dot[kScoreRows];
#pragma unroll
      for (int j = 0; j < kScoreRows; ++j) dot[j] = 0.f;
      const __nv_bfloat16* krow = k_s + sc_key * kRowStride;
#pragma unroll 4
      for (int d = 0; d < D; d += 8) {
        const uint4 raw = *reinterpret_cast<const uint4*>(krow + d);
        const __nv_bfloat162* k2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
        float kf[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 f = __bfloat1622float2(k2[i]);
          kf[2 * i] = f.x;
          kf[2 * i + 1] = f.y;
        }
#pragma unroll
        for (int j = 0; j < kScoreRows; ++j) {
          const int r = sc_row0 + j * kScoreGroups;
          if (r < M) {
            const float4 qa = *reinterpret_cast<const float4*>(q_s + r * D + d);
            const float4 qb = *reinterpret_cast<const float4*>(q_s + r * D + d + 4);
            dot[j] += qa.x * kf[0] + qa.y * kf[1] + qa.z * kf[2] + qa.w * kf[3] + qb.x * kf[4] +
                      qb.y * kf[5] + qb.z * kf[6] + qb.w * kf[7];
          }
        }
      }
      const int p = kt + sc_key;
#pragma unroll
      for (int j = 0; j < kScoreRows; ++j) {
        const int r = sc_row0 + j * kScoreGroups;
        float sc = -INFINITY;
        if (r < M && p < k_end) {
          const int pos = pos0 + r / group;
          if (p <= pos && (a.window <= 0 || p > pos - a.window)) {
            float v = dot[j];
            if (a.softcap > 0.f) v = a.softcap * tanhf(v / a.softcap);
            sc = v * kLog2e;
          }
        }
        s_s[r * kKeyTile + sc_key] = sc;
      }
    }
    __syncthreads();

    // Online softmax, one warp per row.
    {
      const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
      for (int r = warp; r < M; r += kThreads / 32) {
        const float s0 = s_s[r * kKeyTile + lane], s1 = s_s[r * kKeyTile + lane + 32];
        const float m_old = m_s[r];
        const float m_new = fmaxf(m_old, WarpMax(fmaxf(s0, s1)));
        float p0 = 0.f, p1 = 0.f, alpha = 1.f;
        if (m_new != -INFINITY) {
          p0 = exp2f(s0 - m_new);
          p1 = exp2f(s1 - m_new);
          alpha = exp2f(m_old - m_new);
        }
        const float sum = WarpSum(p0 + p1);
        s_s[r * kKeyTile + lane] = p0;
        s_s[r * kKeyTile + lane + 32] = p1;
        if (lane == 0) {
          m_s[r] = m_new;
          l_s[r] = l_s[r] * alpha + sum;
          alpha_s[r] = alpha;
        }
      }
    }
    __syncthreads();

    // acc = acc * alpha + P @ V.
    if (pv_active) {
#pragma unroll
      for (int j = 0; j < kRowsPerThread; ++j) {
        const int r = pv_row0 + j * kGroups;
        if (r < M) {
          acc[j][0] *= alpha_s[r];
          acc[j][1] *= alpha_s[r];
        }
      }
      const int kmax = min(kKeyTile, k_end - kt);
      for (int kk = 0; kk < kmax; ++kk) {
        const float2 v = __bfloat1622float2(
            *reinterpret_cast<const __nv_bfloat162*>(v_s + kk * kRowStride + 2 * pv_col));
#pragma unroll
        for (int j = 0; j < kRowsPerThread; ++j) {
          const int r = pv_row0 + j * kGroups;
          if (r < M) {
            const float p = s_s[r * kKeyTile + kk];
            acc[j][0] += p * v.x;
            acc[j][1] += p * v.y;
          }
        }
      }
    }
    __syncthreads();
  }

  if (!pv_active) return;
#pragma unroll
  for (int j = 0; j < kRowsPerThread; ++j) {
    const int r = pv_row0 + j * kGroups;
    if (r >= M) continue;
    const int64_t t = t0 + r / group, h = int64_t{g} * group + r % group;
    const int64_t row = t * H + h;
    const float l = l_s[r];
    // One split: the sink joins the sum here; several: the combine kernel adds it.
    const float lt = a.num_splits == 1 ? l + SinkWeight(a.sinks, h, SafeMax(m_s[r])) : l;
    const float inv = lt > 0.f ? 1.f / lt : 0.f;
    if (a.num_splits == 1) {
      *reinterpret_cast<__nv_bfloat162*>(a.out + row * D + 2 * pv_col) =
          __floats2bfloat162_rn(acc[j][0] * inv, acc[j][1] * inv);
    } else {
      const int64_t prow = split * a.num_rows + row;
      *reinterpret_cast<float2*>(a.partial + prow * D + 2 * pv_col) =
          make_float2(acc[j][0] * inv, acc[j][1] * inv);
      if (pv_col == 0) a.lse[prow] = l > 0.f ? m_s[r] + log2f(l) : -INFINITY;
    }
  }
}

// Merges the splits' normalized partials by their log2-sum-exps. One block per (token, head).
__global__ void CombineKernel(const float* partial, const float* lse, int num_splits,
                              int64_t num_rows, int D, const float* sinks, int num_heads,
                              __nv_bfloat16* out) {
  PdlWait();  // launched with PDL (launch.cuh)
  PdlLaunchDependents();
  const int64_t row = blockIdx.x;
  float m = -INFINITY;
  for (int sp = 0; sp < num_splits; ++sp) m = fmaxf(m, lse[sp * num_rows + row]);
  float wsum = 0.f;
  for (int sp = 0; sp < num_splits; ++sp) {
    const float e = lse[sp * num_rows + row];
    wsum += m == -INFINITY ? 0.f : exp2f(e - m);
  }
  wsum += SinkWeight(sinks, row % num_heads, SafeMax(m));
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.f;
    for (int sp = 0; sp < num_splits; ++sp) {
      const float e = lse[sp * num_rows + row];
      if (e == -INFINITY) continue;
      acc += exp2f(e - m) * partial[(sp * num_rows + row) * D + d];
    }
    out[row * D + d] = __float2bfloat16_rn(acc * inv);
  }
}

template <int D, int R>
void LaunchForDimRows(const KernelArgs& ka, const PagedAttentionPlan& plan, cudaStream_t stream,
                      bool pdl) {
  constexpr size_t kSmem = SharedBytes<D, R>();
  static bool configured = false;  // per instantiation; the attribute is per-function
  if (!configured) {
    CUDA_CHECK(cudaFuncSetAttribute(PagedAttentionKernel<D, R>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kSmem)));
    configured = true;
  }
  const dim3 grid(static_cast<unsigned>(plan.grid_tiles), static_cast<unsigned>(ka.num_kv_heads),
                  static_cast<unsigned>(plan.num_splits));
  LaunchPdl(PagedAttentionKernel<D, R>, grid, dim3(kThreads), kSmem, stream, pdl, ka);
}

template <int D>
void LaunchForDim(const KernelArgs& ka, const PagedAttentionPlan& plan, cudaStream_t stream,
                  bool pdl) {
  if (plan.rows == kTinyRows) {
    LaunchForDimRows<D, kTinyRows>(ka, plan, stream, pdl);
  } else if (plan.rows == kSmallRows) {
    LaunchForDimRows<D, kSmallRows>(ka, plan, stream, pdl);
  } else {
    LaunchForDimRows<D, kMaxRows>(ka, plan, stream, pdl);
  }
}

}  // namespace

PagedKernelTables KernelTables(const PagedAttentionArgs& a) {
  PagedKernelTables t;
  t.q = static_cast<const __nv_bfloat16*>(a.q);
  t.k_pool = static_cast<const __nv_bfloat16*>(a.k_pool);
  t.v_pool = static_cast<const __nv_bfloat16*>(a.v_pool);
  t.k_desc = a.k_desc;
  t.v_desc = a.v_desc;
  t.query_start = a.query_start;
  t.kv_len = a.kv_len;
  t.page_indptr = a.page_indptr;
  t.page_indices = a.page_indices;
  t.num_heads = a.num_heads;
  t.num_kv_heads = a.num_kv_heads;
  t.group = a.num_heads / a.num_kv_heads;
  t.window = a.sliding_window;
  t.softcap = a.softcap;
  t.sinks = a.sinks;
  t.out = static_cast<__nv_bfloat16*>(a.out);
  return t;
}

void SizeSplitScratch(const PagedAttentionArgs& a, PagedAttentionPlan* p) {
  if (p->num_splits <= 1) return;
  const int64_t rows = int64_t{a.num_tokens} * a.num_heads;
  p->partial_floats = p->num_splits * rows * a.head_dim;
  p->lse_floats = p->num_splits * rows;
}

PagedAttentionPlan PlanPagedAttention(const PagedAttentionArgs& a, int num_sms,
                                      const CudaTuning& tuning) {
  CHECK(a.num_heads > 0 && a.num_kv_heads > 0 && a.num_heads % a.num_kv_heads == 0)
      << "Attention: " << a.num_heads << " heads, " << a.num_kv_heads << " kv heads";
  // Decode-only steps: the bandwidth-bound decode kernel (attn_decode = false turns it off).
  if (DecodeAttentionApplies(a, tuning)) return PlanDecodeAttention(a, num_sms, tuning);
  const int group = a.num_heads / a.num_kv_heads;
  CHECK_LE(group, kMaxRows) << "Attention: GQA group larger than the CUDA kernel's row tile";
  PagedAttentionPlan p;
  // attn_prefill = false: the CUDA-core kernel (A/B).
  if (tuning.attn_prefill && a.max_query_len > 1 && FlashPrefillSupports(a)) {
    p.flash = true;
    p.flash_tile = FlashPrefillTileFor(a, num_sms, tuning);
    p.q_per_tile = FlashPrefillTokensPerTile(group, p.flash_tile);
    p.grid_tiles = a.num_tokens / p.q_per_tile + a.num_seqs;
    p.tile_start_ints = a.num_seqs + 1;
    return p;
  }
  p.q_per_tile = a.max_query_len <= 1 ? 1 : std::max(1, kMaxRows / group);
  // Decode tiles take the 4- or 8-row instance: the 32-row one spent most of its instructions
  // on empty rows (H200, 8B batch 64: 4,905 vs 7,000 tok/s; its switch, LOOM_ATTN_SMALL_ROWS, is
  // retired).
  const int rows = p.q_per_tile * group;
  p.rows = rows <= kTinyRows ? kTinyRows : rows <= kSmallRows ? kSmallRows : kMaxRows;
  p.grid_tiles = a.num_tokens / p.q_per_tile + a.num_seqs;
  p.tile_start_ints = a.num_seqs + 1;
  // Real tiles (decode: one per sequence); split the keys when they leave SMs idle.
  const int64_t tiles =
      a.max_query_len <= 1 ? a.num_seqs : (a.num_tokens + p.q_per_tile - 1) / p.q_per_tile;
  const int64_t blocks = tiles * a.num_kv_heads;
  const int64_t target = tuning.attn_split_target * int64_t{num_sms};  // blocks to aim for
  if (blocks > 0 && blocks < target) {
    const int64_t want = (target + blocks - 1) / blocks;
    const int64_t key_tiles = (a.max_kv_len + kKeyTile - 1) / kKeyTile;
    p.num_splits = static_cast<int>(std::clamp<int64_t>(std::min(want, key_tiles), 1, 32));
  }
  SizeSplitScratch(a, &p);
  return p;
}

void LaunchTileStarts(const PagedAttentionArgs& a, const PagedAttentionPlan& plan,
                      int32_t* tile_start, cudaStream_t stream, bool pdl) {
  if (a.num_tokens == 0 || a.num_seqs == 0 || plan.decode) return;
  LaunchPdl(TileStartKernel, dim3(1), dim3(kScanThreads), 0, stream, pdl, a.query_start, a.num_seqs,
            plan.q_per_tile, tile_start);
}

void LaunchPagedAttention(const PagedAttentionArgs& a, const PagedAttentionPlan& plan,
                          int32_t* tile_start, float* partial, float* lse, cudaStream_t stream,
                          bool pdl) {
  if (a.num_tokens == 0 || a.num_seqs == 0) return;
  if (plan.decode) {
    LaunchDecodeAttention(a, plan, partial, lse, stream, pdl);
    return;
  }
  if (plan.flash) {
    LaunchFlashPrefill(a, plan.flash_tile, tile_start, plan.grid_tiles, stream);
    return;
  }
  KernelArgs ka;
  static_cast<PagedKernelTables&>(ka) = KernelTables(a);
  ka.tile_start = tile_start;
  ka.num_seqs = a.num_seqs;
  ka.block_size = a.block_size;
  ka.q_per_tile = plan.q_per_tile;
  ka.num_splits = plan.num_splits;
  ka.scale = a.scale;
  ka.num_rows = int64_t{a.num_tokens} * a.num_heads;
  ka.partial = partial;
  ka.lse = lse;
  switch (a.head_dim) {  // kPagedAttentionHeadDims
    case 16:
      LaunchForDim<16>(ka, plan, stream, pdl);
      break;
    case 32:
      LaunchForDim<32>(ka, plan, stream, pdl);
      break;
    case 64:
      LaunchForDim<64>(ka, plan, stream, pdl);
      break;
    case 80:
      LaunchForDim<80>(ka, plan, stream, pdl);
      break;
    case 96:
      LaunchForDim<96>(ka, plan, stream, pdl);
      break;
    case 128:
      LaunchForDim<128>(ka, plan, stream, pdl);
      break;
    case 256:
      LaunchForDim<256>(ka, plan, stream, pdl);
      break;
    default:
      CHECK(false) << "Attention: head_dim " << a.head_dim << " not built for CUDA";
  }
  if (plan.num_splits > 1) {
    LaunchPdl(CombineKernel, dim3(static_cast<unsigned>(ka.num_rows)), dim3(128), 0, stream, pdl,
              static_cast<const float*>(partial), static_cast<const float*>(lse), plan.num_splits,
              ka.num_rows, a.head_dim, ka.sinks, a.num_heads, ka.out);
  }
}

}  // namespace loom::cuda
