#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/decode_attention.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/ktrace.cuh"
#include "backend/cuda/launch.cuh"

namespace loom::cuda {
LOOM_KTRACE_TU(decode_attention)
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxSplits = 64;
// A split of fewer keys costs more in launch/merge than it gains in parallelism (1 x 512 on
// the H200: 8 splits of 64 keys 19.0 us, 4 of 128 keys 21.1 us).
constexpr int kMinKeysPerSplit = 64;
constexpr float kLog2e = 1.4426950408889634f;
constexpr unsigned kFullMask = 0xffffffffu;

// Splits merged in a cluster: 2..kMaxClusterSplits (more than the 8 portable blocks per cluster
// needs cudaFuncAttributeNonPortableClusterSizeAllowed; the H200 takes 16).
// CudaTuning::attn_cluster_splits: the most splits a cluster takes (at most kMaxClusterSplits,
// the default). H200, 1B batch 1 at 512-640 tokens (keys go in chunks of 64, so 9-11 splits
// have keys either way): 12 gave 1,356.5 / 1,356.8 tok/s, 16 1,339.2 / 1,339.0 (run 110); but
// one sequence at 8192 keys took 31.3 us a call with 12 against 26.7 with 16 (cuda_attn_bench),
// so the default stays 16 (the short-context gain without that cost: branch h-skip).
constexpr int kMaxClusterSplits = 16;

// n / d for 0 <= n < 2^31 as a multiply-high and a shift (Granlund-Montgomery): a division by
// the runtime block size would be ~20 instructions per key.
struct FastDiv {
  int d;
  uint32_t mul, shift;
};

FastDiv MakeFastDiv(int d) {
  uint32_t shift = 0;
  while ((uint64_t{1} << shift) < static_cast<uint64_t>(d)) ++shift;
  const uint64_t mul = ((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1;
  return FastDiv{d, static_cast<uint32_t>(mul), shift};
}

__device__ __forceinline__ int Div(const FastDiv& f, int n) {
  return static_cast<int>((__umulhi(static_cast<uint32_t>(n), f.mul) + static_cast<uint32_t>(n)) >>
                          f.shift);
}

struct DecodeArgs : PagedKernelTables {
  int num_splits;
  FastDiv block_size;
  // Applied to q: the softmax scale, times log2(e) when there is no softcap so the dot product
  // lands directly in the exp2 domain.
  float q_scale;
  int64_t num_rows;  // num_tokens * num_heads
  float* partial;
  float* lse;
  int cluster_merge;  // the splits are one thread-block cluster (StoreBlockResult)
  int early_kv;       // mma kernel: first K/V loads before PdlWait (attn_early_kv=0: after)
};

// exp2(x - max) with the convention that an all-masked row (max = -inf) weighs nothing.
__device__ __forceinline__ float SafeBase(float m) { return m == -INFINITY ? 0.f : m; }

// Per lane-group online-softmax state of G rows over the lane's 8 dims.
template <int G>
struct RowState {
  float m[G], l[G], acc[G][8];

  __device__ __forceinline__ void Init() {
#pragma unroll
    for (int r = 0; r < G; ++r) {
      m[r] = -INFINITY;
      l[r] = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[r][j] = 0.f;
    }
  }

  // Folds in U keys: scores sc (log2 domain, -inf when masked) and their V slices.
  template <int U>
  __device__ __forceinline__ void Update(const float (&sc)[G][U], const float (&vf)[U][8]) {
#pragma unroll
    for (int r = 0; r < G; ++r) {
      float mx = sc[r][0];
#pragma unroll
      for (int u = 1; u < U; ++u) mx = fmaxf(mx, sc[r][u]);
      const float m_new = fmaxf(m[r], mx);
      const float base = SafeBase(m_new);
      const float alpha = exp2f(m[r] - base);
      float p[U], sum = 0.f;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        p[u] = exp2f(sc[r][u] - base);
        sum += p[u];
      }
      l[r] = l[r] * alpha + sum;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float v = acc[r][j] * alpha;
#pragma unroll
        for (int u = 0; u < U; ++u) v += p[u] * vf[u][j];
        acc[r][j] = v;
      }
      m[r] = m_new;
    }
  }

  // Merges the state of the lane `offset` away (another lane group of the warp).
  __device__ __forceinline__ void MergeXor(int offset) {
#pragma unroll
    for (int r = 0; r < G; ++r) {
      const float m_o = __shfl_xor_sync(kFullMask, m[r], offset);
      const float l_o = __shfl_xor_sync(kFullMask, l[r], offset);
      const float m_new = fmaxf(m[r], m_o);
      const float base = SafeBase(m_new);
      const float a_self = exp2f(m[r] - base), a_o = exp2f(m_o - base);
      l[r] = l[r] * a_self + l_o * a_o;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float acc_o = __shfl_xor_sync(kFullMask, acc[r][j], offset);
        acc[r][j] = acc[r][j] * a_self + acc_o * a_o;
      }
      m[r] = m_new;
    }
  }
};

// Key range of (sequence, split): the keys the decode token sees (causal: all kv_len keys; a
// sliding window keeps the last `window`), cut into num_splits chunks of whole block iterations.
struct KeyRange {
  int begin, end;
};

__device__ __forceinline__ KeyRange SplitKeyRange(int kv_len, int window, int num_splits, int split,
                                                  int keys_per_iter) {
  const int lo = window > 0 ? max(0, kv_len - window) : 0;
  const int range = max(kv_len - lo, 0);
  int chunk = (range + num_splits - 1) / num_splits;
  chunk = (chunk + keys_per_iter - 1) / keys_per_iter * keys_per_iter;
  const int begin = lo + split * chunk;
  return KeyRange{begin, min(kv_len, begin + chunk)};
}

// How many splits have keys (SplitKeyRange's chunks from the window's start; at least 1, the
// leader, which writes a zero row when there are none).
__device__ __forceinline__ int ActiveSplits(int kv_len, int window, int num_splits,
                                            int keys_per_iter) {
  const int lo = window > 0 ? max(0, kv_len - window) : 0;
  const int range = max(kv_len - lo, 0);
  int chunk = (range + num_splits - 1) / num_splits;
  chunk = (chunk + keys_per_iter - 1) / keys_per_iter * keys_per_iter;
  return chunk == 0 ? 1 : max(1, min(num_splits, (range + chunk - 1) / chunk));
}

// q . k for U keys and G rows: partial dot products over this lane's 8 dims, summed over the
// D / 8 lanes of the key's lane group (a butterfly: every lane of the group gets the sums).
template <int D, int G, int U>
__device__ __forceinline__ void Scores(const float (&q)[G][8], const uint4 (&kr)[U],
                                       float (&sc)[G][U]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    float kf[8];
    UnpackBf16x8(kr[u], kf);
#pragma unroll
    for (int r = 0; r < G; ++r) {
      float d = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) d += q[r][j] * kf[j];
      sc[r][u] = d;
    }
  }
#pragma unroll
  for (int o = D / 16; o > 0; o >>= 1) {
#pragma unroll
    for (int r = 0; r < G; ++r) {
#pragma unroll
      for (int u = 0; u < U; ++u) sc[r][u] += __shfl_xor_sync(kFullMask, sc[r][u], o);
    }
  }
}

// A scaled q.k (times the softmax scale, and log2(e) unless soft-capped) as the exp2-domain
// logit: soft-capped if asked, -inf for a key outside the range.
__device__ __forceinline__ float Logit(const DecodeArgs& a, float dot, bool valid) {
  if (a.softcap > 0.f) dot = a.softcap * tanhf(dot / a.softcap) * kLog2e;
  return valid ? dot : -INFINITY;
}

// --- The splits of one (sequence, kv head) as a thread-block cluster (rank = split) ---
// Every split pushes its normalized rows and log2-sum-exps into the leader's (rank 0's) shared
// memory with st.async, which counts the bytes on the leader's mbarrier; the other blocks leave at
// once, and the leader, when the bytes are in, merges the splits the way DecodeCombineKernel does
// (same order, same arithmetic: bit-identical to it). The merge buffer is the kernel's dynamic
// shared memory: MergeBufferBytes.
// H200, 1B batch 1 (tools/cuda/ktrace.py): pulling every split's rows from the others' shared
// memory between two cluster.sync()s took 4.3 us after the block's own result (2.6 us in the
// first sync alone); the syncs wait on every block of the cluster and on each other.

// The address of the same shared variable in block `rank` of the cluster.
__device__ __forceinline__ uint32_t MapToRank(uint32_t addr, uint32_t rank) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(out) : "r"(addr), "r"(rank));
  return out;
}

__device__ __forceinline__ void StAsync(uint32_t remote, float v, uint32_t remote_bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(remote),
      "r"(__float_as_uint(v)), "r"(remote_bar)
      : "memory");
}

// Four consecutive floats, 16-byte aligned at `remote`, in one message.
__device__ __forceinline__ void StAsyncV4(uint32_t remote, const float (&v)[4],
                                          uint32_t remote_bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, "
      "[%5];" ::"r"(remote),
      "r"(__float_as_uint(v[0])), "r"(__float_as_uint(v[1])), "r"(__float_as_uint(v[2])),
      "r"(__float_as_uint(v[3])), "r"(remote_bar)
      : "memory");
}

__device__ __forceinline__ uint64_t* MergeBarrier() {
  __shared__ __align__(8) uint64_t bar;
  return &bar;
}

// Called by every block of a cluster-merge launch at its start: the leader's mbarrier is set up
// and the cluster barrier armed; ClusterMergeReady waits on it, before PdlWait where the kernel
// allows, so the wait overlaps the previous kernel instead of the block's own critical path.
__device__ __forceinline__ void ClusterMergeBegin(const DecodeArgs& a) {
  if (!(a.num_splits > 1 && a.cluster_merge)) return;
  if (threadIdx.x == 0) {
    MbarInit(MergeBarrier(), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}

// Every block's ClusterMergeBegin has run: the leader's mbarrier may take remote bytes.
__device__ __forceinline__ void ClusterMergeReady(const DecodeArgs& a) {
  if (!(a.num_splits > 1 && a.cluster_merge)) return;
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The leader's buffer: rows [split][group * D] then lse [split][group], f32.
__host__ __device__ constexpr int MergeRowsFloats(int splits, int group, int d) {
  return splits * group * d;
}
constexpr size_t MergeBufferBytes(int splits, int group, int d) {
  return static_cast<size_t>(MergeRowsFloats(splits, group, d) + splits * group) * 4;
}
// Clusters only where the buffer is at most this (16 splits x GQA 4 x head_dim 128: 33 KB), so
// the block still fits beside a streamed GEMV's ring under PDL; MaxClusterSplits opts the kernel
// in to it beyond the 48 KB default with its static arrays.
constexpr size_t kMaxMergeBytes = 48 * 1024;

// The block's result: its warps' (max, sum, P.V) merged per row, written as the output row
// (one split), as a normalized partial row and its log2-sum-exp for the combine kernel, or, when
// the splits are a cluster, pushed to the leader, which merges them (see above). Each thread
// takes 4 consecutive dims of a row, so a split's push is group * D / 4 16-byte st.async (H200,
// 1B batch 1: 4-byte pushes, 260 a split, took ~1 us from a split's result to the leader's
// mbarrier completing).
template <int D, int G>
__device__ __forceinline__ void StoreBlockResult(const DecodeArgs& a, float (&acc_s)[kWarps][G][D],
                                                 const float (&m_s)[kWarps][G],
                                                 const float (&l_s)[kWarps][G], int64_t row0,
                                                 int split, int active) {
  extern __shared__ __align__(16) float merge_buf[];
  const bool cluster = a.num_splits > 1 && a.cluster_merge;
  // A cluster's splits without keys (past `active`) push nothing and the leader merges only the
  // others: their rows were zeros of weight 0, which left the sums' bits as they are.
  if (cluster && split >= active) return;
  const int splits = a.num_splits, rows_n = a.group * D;
  float* lse_buf = merge_buf + MergeRowsFloats(splits, a.group, D);
  uint32_t remote_rows = 0, remote_lse = 0, remote_bar = 0;
  if (cluster) {  // ClusterMergeReady has run
    if (split != 0) {
      remote_rows = MapToRank(SmemAddress(merge_buf + split * rows_n), 0);
      remote_lse = MapToRank(SmemAddress(lse_buf + split * a.group), 0);
      remote_bar = MapToRank(SmemAddress(MergeBarrier()), 0);
    } else if (threadIdx.x == 0) {
      const uint32_t bytes = static_cast<uint32_t>((active - 1) * (rows_n + a.group) * 4);
      MbarArriveExpectTx(MergeBarrier(), bytes);
    }
  }
  for (int i = 4 * static_cast<int>(threadIdx.x); i < rows_n; i += 4 * kThreads) {
    const int r = i / D, d = i % D;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, m_s[w][r]);
    const float base = SafeBase(m);
    float e[kWarps];
    float l = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      e[w] = exp2f(m_s[w][r] - base);
      l += l_s[w][r] * e[w];
    }
    // One split: the sink (gpt-oss) joins the sum here; several: where they are merged.
    const float lt =
        a.num_splits == 1 ? l + SinkWeight(a.sinks, (row0 + r) % a.num_heads, base) : l;
    const float inv = lt > 0.f ? 1.f / lt : 0.f;  // empty key range: a zero row
    const float lse = l > 0.f ? m + log2f(l) : -INFINITY;
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float acc = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) acc += acc_s[w][r][d + j] * e[w];
      v[j] = acc * inv;
    }
    const int64_t row = row0 + r;
    if (a.num_splits == 1) {
#pragma unroll
      for (int j = 0; j < 4; ++j) a.out[row * D + d + j] = __float2bfloat16_rn(v[j]);
    } else if (cluster) {
      if (split != 0) {
        StAsyncV4(remote_rows + 4 * i, v, remote_bar);
        if (d == 0) StAsync(remote_lse + 4 * r, lse, remote_bar);
      } else {
        *reinterpret_cast<float4*>(merge_buf + i) = make_float4(v[0], v[1], v[2], v[3]);
        if (d == 0) lse_buf[r] = lse;
      }
    } else {
      const int64_t prow = split * a.num_rows + row;
      *reinterpret_cast<float4*>(a.partial + prow * D + d) = make_float4(v[0], v[1], v[2], v[3]);
      if (d == 0) a.lse[prow] = lse;
    }
  }
  if (cluster && split != 0) KTRACE_MARK(2);  // pushed (diagnostic)
  if (!cluster || split != 0) return;
  // The leader: every other split's bytes in, then the merge.
  const uint32_t bar = SmemAddress(MergeBarrier());
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar)
        : "memory");
  } while (done == 0);
  __syncthreads();  // the leader's own rows (plain stores above)
  KTRACE_MARK(3);
  // Each split's weight per row once (one thread per (split, row)), then every output element
  // sums over the splits with every load issued before the sums (H200: a loop that loaded and
  // branched split by split took 1.2 us per element, two to four elements a thread). The order
  // and the arithmetic are the combine kernel's: an empty split (lse = -inf, skipped there) has
  // weight 0 and a zero row here, and adding those zeros leaves both sums' bits unchanged.
  __shared__ float w_s[kMaxClusterSplits][8];
  __shared__ float sink_s[8];
  const int t = static_cast<int>(threadIdx.x);
  if (t < splits * a.group) {
    const int sp = t / a.group, r = t % a.group;
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < kMaxClusterSplits; ++j) {
      if (j < active) m = fmaxf(m, lse_buf[j * a.group + r]);
    }
    const float e = sp < active ? lse_buf[sp * a.group + r] : -INFINITY;
    w_s[sp][r] = e == -INFINITY ? 0.f : exp2f(e - SafeBase(m));
    if (sp == 0) sink_s[r] = SinkWeight(a.sinks, (row0 + r) % a.num_heads, SafeBase(m));
  }
  __syncthreads();
  KTRACE_MARK(2);  // the leader's split weights are in (diagnostic: where its merge time goes)
  for (int i = 4 * t; i < rows_n; i += 4 * kThreads) {
    const int r = i / D;
    float w[kMaxClusterSplits];
    float4 v[kMaxClusterSplits];
#pragma unroll
    for (int sp = 0; sp < kMaxClusterSplits; ++sp) {
      w[sp] = sp < active ? w_s[sp][r] : 0.f;
      v[sp] = sp < active ? *reinterpret_cast<const float4*>(merge_buf + sp * rows_n + i)
                          : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float acc[4] = {0.f, 0.f, 0.f, 0.f}, wsum = 0.f;
#pragma unroll
    for (int sp = 0; sp < kMaxClusterSplits; ++sp) {
      wsum += w[sp];
      acc[0] += w[sp] * v[sp].x;
      acc[1] += w[sp] * v[sp].y;
      acc[2] += w[sp] * v[sp].z;
      acc[3] += w[sp] * v[sp].w;
    }
    wsum += sink_s[r];
    const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
    __nv_bfloat16* out = a.out + (row0 + r) * D + i % D;
#pragma unroll
    for (int j = 0; j < 4; ++j) out[j] = __float2bfloat16_rn(acc[j] * inv);
  }
}

// D: head_dim; G: rows held per lane (>= the GQA group; extra rows have q = 0 and are not
// written); U: keys per lane group per iteration (U K and U V loads in flight per lane); PF:
// prefetch the next iteration's K/V (twice the loads in flight).
template <int D, int G, int U, bool PF>
__global__ void __launch_bounds__(kThreads) DecodeAttentionKernel(DecodeArgs a) {
  ClusterMergeBegin(a);
  ClusterMergeReady(a);
  PdlWait();  // launched with PDL (launch.cuh)
  PdlLaunchDependents();
  constexpr int T = D / 8;               // lanes per key: 8 dims (16 bytes) each
  constexpr int NG = 32 / T;             // lane groups per warp
  constexpr int KB = kWarps * NG * U;    // keys per block iteration
  __shared__ float acc_s[kWarps][G][D];  // per-warp results for the final merge
  __shared__ float m_s[kWarps][G], l_s[kWarps][G];

  // blockIdx.x enumerates (sequence, kv head), a sequence's kv heads adjacent: blocks running at
  // the same time read neighbouring slices of the same pages. (Measured neutral against the
  // other order on the H200, kept because it is never worse for DRAM locality.)
  const int x = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const int s = x / a.num_kv_heads, g = x % a.num_kv_heads;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int grp = lane / T, sub = lane % T;
  const int t = a.query_start[s];
  if (a.query_start[s + 1] == t) return;  // no query token for this sequence this step
  const int kv_len = a.kv_len[s];
  const KeyRange keys = SplitKeyRange(kv_len, a.window, a.num_splits, split, KB);
  const int64_t row0 = int64_t{t} * a.num_heads + int64_t{g} * a.group;  // first output row

  // This lane's 8 dims of every row's query, scaled.
  float q[G][8];
#pragma unroll
  for (int r = 0; r < G; ++r) {
    if (r < a.group) {
      UnpackBf16x8(reinterpret_cast<const uint4*>(a.q + (row0 + r) * D)[sub], q[r]);
#pragma unroll
      for (int j = 0; j < 8; ++j) q[r][j] *= a.q_scale;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) q[r][j] = 0.f;
    }
  }
  RowState<G> st;
  st.Init();

  // Pool row of each of the group's U keys, looked up one iteration before its K/V loads are
  // issued, so the loads never wait on the page table.
  const int32_t* pages = a.page_indices + a.page_indptr[s];
  const int bs = a.block_size.d;
  int page[U], off[U];
  auto lookup = [&](int p0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int p = p0 + u;
      if (p < keys.end) {
        const int idx = Div(a.block_size, p);
        off[u] = p - idx * bs;
        page[u] = pages[idx];
      }
    }
  };
  // This lane's 16 bytes of K and V of keys p0 .. p0 + U - 1 (zeros past the range: their P is 0
  // and 0 * 0 is no NaN). Streaming loads: every byte is read once per step.
  auto load = [&](int p0, uint4(&kr)[U], uint4(&vr)[U]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
      if (p0 + u < keys.end) {
        const int64_t row = (int64_t{page[u]} * bs + off[u]) * a.num_kv_heads + g;
        kr[u] = __ldcs(reinterpret_cast<const uint4*>(a.k_pool + row * D) + sub);
        vr[u] = __ldcs(reinterpret_cast<const uint4*>(a.v_pool + row * D) + sub);
      }
    }
  };

  // PF: the next iteration's K/V loads are issued before this iteration's math, so every warp
  // keeps loads in flight while it computes (costs 8 * U registers).
  const int first = keys.begin + (warp * NG + grp) * U;  // this group's first key
  uint4 kr[U], vr[U];
  lookup(first);
  if constexpr (PF) {
    load(first, kr, vr);
    lookup(first + KB);
  }
  // The loop bound is per warp (not per group): the shuffles below need the whole warp.
  for (int wbase = keys.begin + warp * NG * U; wbase < keys.end; wbase += KB) {
    const int p0 = wbase + grp * U;
    [[maybe_unused]] uint4 kn[U], vn[U];
    if constexpr (PF) {
      load(p0 + KB, kn, vn);
      lookup(p0 + 2 * KB);
    } else {
      load(p0, kr, vr);
      lookup(p0 + KB);
    }
    float sc[G][U];
    Scores<D, G, U>(q, kr, sc);
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int r = 0; r < G; ++r) sc[r][u] = Logit(a, sc[r][u], p0 + u < keys.end);
    }
    float vf[U][8];
#pragma unroll
    for (int u = 0; u < U; ++u) UnpackBf16x8(vr[u], vf[u]);
    st.template Update<U>(sc, vf);
    if constexpr (PF) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        kr[u] = kn[u];
        vr[u] = vn[u];
      }
    }
  }

  // Merge the warp's lane groups, then the warps through shared memory.
#pragma unroll
  for (int o = T; o < 32; o <<= 1) st.MergeXor(o);
  if (grp == 0) {
#pragma unroll
    for (int r = 0; r < G; ++r) {
#pragma unroll
      for (int j = 0; j < 8; ++j) acc_s[warp][r][sub * 8 + j] = st.acc[r][j];
      if (lane == 0) {
        m_s[warp][r] = st.m[r];
        l_s[warp][r] = st.l[r];
      }
    }
  }
  __syncthreads();
  StoreBlockResult<D, G>(a, acc_s, m_s, l_s, row0, split,
                         ActiveSplits(kv_len, a.window, a.num_splits, KB));
}

// ---- Tensor-core variant (CudaTuning::attn_decode_mma, the default for head_dim <= 128) ----
//
// q.K and P.V on mma.sync (bf16 in, f32 accumulate), so a key costs a few mma instructions per
// warp instead of ~70 FMAs/conversions/shuffles per lane. A warp takes 8 keys per mma tile:
//   S = Q K^T, m16n8k16: M = query rows (the GQA group; rows 8..15 zero), N = 8 keys, K = 16
//     dims. Lane (r = lane / 4, t = lane % 4) supplies Q row r and K row "key r" of the tile,
//     16 contiguous bytes at a time: the dot product does not care which physical dims a k-step
//     covers as long as A and B agree, so k-step 2j takes physical dims 32j + 8t + {0..3} and
//     k-step 2j + 1 dims 32j + 8t + {4..7}. The result: lane (r, t) holds row r's logits of
//     keys 2t and 2t + 1.
//   O += P V, m16n8k8: M = query rows, N = 8 output dims, K = the tile's 8 keys. The A fragment
//     (row r, keys 2t, 2t + 1) is exactly S's accumulator layout, rounded to bf16. The B
//     fragment needs V[keys 2t, 2t + 1][one dim per lane r]: lane (r, t) loads 16 contiguous
//     bytes of V for keys 2t and 2t + 1 at dims 64c + 8r .. + 7 and pairs the two keys' values
//     per dim with a byte permute; output tile j = 8c + e then holds dims 64c + 8n + e for
//     columns n.
// Per-row online softmax in registers (a row's 8 keys are spread over the 4 lanes of equal r:
// two shuffles), the same cross-warp merge and split-KV output as the CUDA-core kernel. One
// numerics difference: P enters P.V rounded to bf16 (2^-9 relative per weight, f32 sums); the
// CUDA-core kernel keeps P in f32.
// TILES: 8-key tiles per warp per iteration (one softmax update for all of them); PF: prefetch
// the next iteration's K/V. head_dim 64 or 128 (256 would need 64 accumulator registers).

// Quantized pools (--kv-quant fp8 / int8, KQ): K and V are read as their 1-byte codes (8 bytes
// where bf16 takes 16) and converted exactly to f16, so both mma run in f16 (q rounded to f16
// once: its 11-bit mantissa keeps every bf16 q of normal size). A row's groups of 64 dims each
// have a scale: q.K sums each group in its own accumulator and weighs it by the key's scale in
// f32; P.V folds the scale of each key and group into P (output tile j is dims of group j / 8)
// as p * d * 2^8 rounded to f16 (2^-11 relative; the 2^8 keeps p * d a normal f16 for groups with
// amax >= 1e-4 and finite below 1e5), undone on the result. The lane loading key 2t + h's V also
// loads its K and V scales, where its scores land.

// c[0..1] += A (rows 0..7 only) x B over 16 k; rows 8..15 are zero and their outputs dropped.
// F16: f16 operands, else bf16.
template <bool F16>
__device__ __forceinline__ void MmaK16(float (&c)[2], uint32_t a_lo, uint32_t a_hi, uint32_t b0,
                                       uint32_t b1) {
  [[maybe_unused]] float d2, d3;  // rows 8..15: dropped
  if constexpr (F16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %10, %10};\n"
        : "+f"(c[0]), "+f"(c[1]), "=f"(d2), "=f"(d3)
        : "r"(a_lo), "r"(0u), "r"(a_hi), "r"(0u), "r"(b0), "r"(b1), "f"(0.f));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %10, %10};\n"
        : "+f"(c[0]), "+f"(c[1]), "=f"(d2), "=f"(d3)
        : "r"(a_lo), "r"(0u), "r"(a_hi), "r"(0u), "r"(b0), "r"(b1), "f"(0.f));
  }
}

// c[0..1] += A (rows 0..7 only) x B over 8 k.
template <bool F16>
__device__ __forceinline__ void MmaK8(float (&c)[2], uint32_t a, uint32_t b) {
  [[maybe_unused]] float d2, d3;  // rows 8..15: dropped
  if constexpr (F16) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%0, %1, %7, %7};\n"
        : "+f"(c[0]), "+f"(c[1]), "=f"(d2), "=f"(d3)
        : "r"(a), "r"(0u), "r"(b), "f"(0.f));
  } else {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%0, %1, %7, %7};\n"
        : "+f"(c[0]), "+f"(c[1]), "=f"(d2), "=f"(d3)
        : "r"(a), "r"(0u), "r"(b), "f"(0.f));
  }
}

__device__ __forceinline__ uint32_t Word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// bf16 element e of x (low half) and of y (high half): one B register of P.V.
__device__ __forceinline__ uint32_t PairDim(const uint4& x, const uint4& y, int e) {
  const uint32_t wx = Word(x, e / 2), wy = Word(y, e / 2);
  return (e & 1) ? __byte_perm(wx, wy, 0x7632) : __byte_perm(wx, wy, 0x5410);
}

// The same from 8 codes of each key (x: key 2t, y: key 2t + 1) as f16.
template <KvQuant KQ>
__device__ __forceinline__ uint32_t PairDim(const uint2& x, const uint2& y, int e) {
  const uint32_t wx = e < 4 ? x.x : x.y, wy = e < 4 ? y.x : y.y;
  // Bytes x[a], y[a], x[a + 1], y[a + 1] for the even a <= e of the word.
  const uint32_t both = __byte_perm(wx, wy, (e & 2) ? 0x7362 : 0x5140);
  return CodesToF16x2<KQ>((e & 1) ? both >> 16 : both);
}

// bf16x2 -> f16x2 (q's A fragments on quantized pools).
__device__ __forceinline__ uint32_t Bf16x2ToF16x2(uint32_t w) {
  const __half2 h = __floats2half2_rn(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Scale of group gi in a key's scale word (bf16 per group).
template <typename W>
__device__ __forceinline__ float GroupScale(W w, int gi) {
  return Bf16BitsToF32((static_cast<uint32_t>(w) >> (16 * gi)) & 0xffffu);
}

constexpr float kPvScale = 256.f;  // P * d * 2^8 in f16 on quantized pools

template <int D, int TILES, bool PF, KvQuant KQ>
__global__ void __launch_bounds__(kThreads) DecodeAttentionMmaKernel(DecodeArgs a) {
  constexpr bool kQuant = KQ != KvQuant::kNone;
  static_assert(!kQuant || KQ == KvQuant::kFp8 || KQ == KvQuant::kInt8, "fp8 / int8 codes");
  using Vec = std::conditional_t<kQuant, uint2, uint4>;  // 8 dims of a key
  constexpr int kGroups = D / 64;                        // scale groups of a quantized row
  using ScaleWord = std::conditional_t<kGroups == 2, uint32_t, uint16_t>;
  constexpr int kKSteps = D / 16;         // k-steps of q.K
  constexpr int kKVecs = D / 32;          // K loads (8 dims) per lane per key
  constexpr int kVVecs = D / 64;          // V loads (8 dims) per lane per key
  constexpr int kOutTiles = D / 8;        // P.V output tiles of 8 dims
  constexpr int KB = kWarps * 8 * TILES;  // keys per block iteration
  constexpr int G = 8;                    // rows of the mma tiles (the group is <= 8)
  __shared__ float acc_s[kWarps][G][D];
  __shared__ float m_s[kWarps][G], l_s[kWarps][G];

  const int x = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const int s = x / a.num_kv_heads, g = x % a.num_kv_heads;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int r = lane / 4, t = lane % 4;
  // Launched with PDL (launch.cuh). The step's tables (query_start, kv_len, pages) come from the
  // host before the step, and the keys before the newest were written by earlier steps: the
  // first iteration's K/V loads go before PdlWait, under the tail of the kernel that writes q
  // and the newest key and value (reloaded after the wait).
  KTRACE_BEGIN();
  ClusterMergeBegin(a);
  if (!a.early_kv) PdlWait();
  const int tok = a.query_start[s];
  if (a.query_start[s + 1] == tok) {  // no query token for this sequence this step
    PdlWait();
    return;
  }
  const int kv_len = a.kv_len[s];
  const KeyRange keys = SplitKeyRange(kv_len, a.window, a.num_splits, split, KB);
  const int64_t row0 = int64_t{tok} * a.num_heads + int64_t{g} * a.group;

  // Where key p's row starts (-1: outside the range): its bf16 row index, or a quantized
  // pool's byte offset of its codes (*scales: of its scales; K and V pools alike).
  const int32_t* pages = a.page_indices + a.page_indptr[s];
  const int bs = a.block_size.d;
  const auto* k_bytes = reinterpret_cast<const uint8_t*>(a.k_pool);
  const auto* v_bytes = reinterpret_cast<const uint8_t*>(a.v_pool);
  auto pool_row = [&](int p, [[maybe_unused]] int64_t* scales) -> int64_t {
    if (p >= keys.end) return -1;
    const int idx = Div(a.block_size, p);
    const int64_t page = pages[idx];
    const int off = p - idx * bs;
    if constexpr (kQuant) {
      if (scales != nullptr) *scales = a.k_desc.ScalesAt(page, off, g, bs);
      return a.k_desc.CodesAt(page, off, g, a.num_kv_heads);
    } else {
      return (page * bs + off) * a.num_kv_heads + g;
    }
  };
  // K of key r and V of keys 2t, 2t + 1 of every tile (with those two keys' scales); looked up
  // one iteration ahead of the loads.
  int64_t k_row[TILES], v_row[TILES][2];
  [[maybe_unused]] int64_t s_row[TILES][2];
  auto lookup = [&](int wbase) {
#pragma unroll
    for (int i = 0; i < TILES; ++i) {
      k_row[i] = pool_row(wbase + 8 * i + r, nullptr);
      v_row[i][0] = pool_row(wbase + 8 * i + 2 * t, &s_row[i][0]);
      v_row[i][1] = pool_row(wbase + 8 * i + 2 * t + 1, &s_row[i][1]);
    }
  };
  // 8 dims of K (or V) of a key from `row` at dim d.
  auto load_k = [&](int64_t row, int d) -> Vec {
    if constexpr (kQuant) {
      return __ldcs(reinterpret_cast<const uint2*>(k_bytes + row + d));
    } else {
      return __ldcs(reinterpret_cast<const uint4*>(a.k_pool + row * D + d));
    }
  };
  auto load_v = [&](int64_t row, int d) -> Vec {
    if constexpr (kQuant) {
      return __ldcs(reinterpret_cast<const uint2*>(v_bytes + row + d));
    } else {
      return __ldcs(reinterpret_cast<const uint4*>(a.v_pool + row * D + d));
    }
  };
  auto zero = []() -> Vec {
    if constexpr (kQuant) {
      return make_uint2(0, 0);
    } else {
      return make_uint4(0, 0, 0, 0);
    }
  };
  // Streaming loads; zeros for keys outside the range (their P is 0, 0 * 0 is no NaN).
  auto load = [&](Vec(&kr)[TILES][kKVecs], Vec(&vr)[TILES][2][kVVecs],
                  [[maybe_unused]] ScaleWord(&ks)[TILES][2],
                  [[maybe_unused]] ScaleWord(&vs)[TILES][2]) {
#pragma unroll
    for (int i = 0; i < TILES; ++i) {
#pragma unroll
      for (int j = 0; j < kKVecs; ++j) {
        kr[i][j] = k_row[i] < 0 ? zero() : load_k(k_row[i], 32 * j + 8 * t);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int c = 0; c < kVVecs; ++c) {
          vr[i][h][c] = v_row[i][h] < 0 ? zero() : load_v(v_row[i][h], 64 * c + 8 * r);
        }
        if constexpr (kQuant) {
          ks[i][h] = v_row[i][h] < 0
                         ? ScaleWord{0}
                         : __ldcs(reinterpret_cast<const ScaleWord*>(k_bytes + s_row[i][h]));
          vs[i][h] = v_row[i][h] < 0
                         ? ScaleWord{0}
                         : __ldcs(reinterpret_cast<const ScaleWord*>(v_bytes + s_row[i][h]));
        }
      }
    }
  };

  float m = -INFINITY, l = 0.f;  // row r's running max and this lane's share of its sum
  float o[kOutTiles][2];
#pragma unroll
  for (int j = 0; j < kOutTiles; ++j) o[j][0] = o[j][1] = 0.f;

  const int wstart = keys.begin + warp * 8 * TILES;
  Vec kr[TILES][kKVecs], vr[TILES][2][kVVecs];
  [[maybe_unused]] ScaleWord ks[TILES][2], vs[TILES][2];
  lookup(wstart);
  load(kr, vr, ks, vs);
  lookup(wstart + KB);

  ClusterMergeReady(a);
  PdlWait();
  KTRACE_WAITED();
  PdlLaunchDependents();
  // The newest key and value (this step's, written by the kernel before): reloaded where the
  // first iteration holds them.
  const int newest = kv_len - 1;
  if (newest >= wstart && newest < wstart + 8 * TILES && newest < keys.end) {
    int64_t sc_row = 0;
    const int64_t row = pool_row(newest, &sc_row);
#pragma unroll
    for (int i = 0; i < TILES; ++i) {
      if (wstart + 8 * i + r == newest) {
#pragma unroll
        for (int j = 0; j < kKVecs; ++j) kr[i][j] = load_k(row, 32 * j + 8 * t);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (wstart + 8 * i + 2 * t + h != newest) continue;
#pragma unroll
        for (int c = 0; c < kVVecs; ++c) vr[i][h][c] = load_v(row, 64 * c + 8 * r);
        if constexpr (kQuant) {
          ks[i][h] = __ldcs(reinterpret_cast<const ScaleWord*>(k_bytes + sc_row));
          vs[i][h] = __ldcs(reinterpret_cast<const ScaleWord*>(v_bytes + sc_row));
        }
      }
    }
  }
  // A fragments of Q (row r): per k-step the low and high k pairs (see the layout above); f16
  // on quantized pools.
  uint32_t qa[kKSteps][2];
#pragma unroll
  for (int j = 0; j < kKVecs; ++j) {
    uint4 w = make_uint4(0, 0, 0, 0);
    if (r < a.group) w = reinterpret_cast<const uint4*>(a.q + (row0 + r) * D + 32 * j + 8 * t)[0];
    if constexpr (kQuant) {
      w = make_uint4(Bf16x2ToF16x2(w.x), Bf16x2ToF16x2(w.y), Bf16x2ToF16x2(w.z),
                     Bf16x2ToF16x2(w.w));
    }
    qa[2 * j][0] = w.x;
    qa[2 * j][1] = w.y;
    qa[2 * j + 1][0] = w.z;
    qa[2 * j + 1][1] = w.w;
  }

  // The loop bound is per warp: mma and the shuffles need the whole warp. kr / vr hold this
  // iteration's keys; with PF the next iteration's load is issued before the math.
  for (int wbase = wstart; wbase < keys.end; wbase += KB) {
    [[maybe_unused]] Vec kn[TILES][kKVecs], vn[TILES][2][kVVecs];
    [[maybe_unused]] ScaleWord ksn[TILES][2], vsn[TILES][2];
    if constexpr (PF) {
      load(kn, vn, ksn, vsn);
      lookup(wbase + 2 * KB);
    }
    // Logits of row r for keys 8i + 2t and 8i + 2t + 1 of each tile.
    float sc[TILES][2];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < TILES; ++i) {
      float dot[2];
      if constexpr (kQuant) {
        float c[kGroups][2];
#pragma unroll
        for (int gi = 0; gi < kGroups; ++gi) c[gi][0] = c[gi][1] = 0.f;
#pragma unroll
        for (int ks_i = 0; ks_i < kKSteps; ++ks_i) {
          const uint32_t w = ks_i % 2 ? kr[i][ks_i / 2].y : kr[i][ks_i / 2].x;
          MmaK16<true>(c[ks_i / (kKSteps / kGroups)], qa[ks_i][0], qa[ks_i][1], CodesToF16x2<KQ>(w),
                       CodesToF16x2<KQ>(w >> 16));
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          dot[h] = 0.f;
#pragma unroll
          for (int gi = 0; gi < kGroups; ++gi) dot[h] += c[gi][h] * GroupScale(ks[i][h], gi);
        }
      } else {
        float c[2] = {0.f, 0.f};
#pragma unroll
        for (int ks_i = 0; ks_i < kKSteps; ++ks_i) {
          const uint4& w = kr[i][ks_i / 2];
          MmaK16<false>(c, qa[ks_i][0], qa[ks_i][1], ks_i % 2 ? w.z : w.x, ks_i % 2 ? w.w : w.y);
        }
        dot[0] = c[0];
        dot[1] = c[1];
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        sc[i][h] = Logit(a, dot[h] * a.q_scale, wbase + 8 * i + 2 * t + h < keys.end);
        mx = fmaxf(mx, sc[i][h]);
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
    const float m_new = fmaxf(m, mx);
    const float base = SafeBase(m_new);
    const float alpha = exp2f(m - base);
    m = m_new;
    l *= alpha;
#pragma unroll
    for (int j = 0; j < kOutTiles; ++j) {
      o[j][0] *= alpha;
      o[j][1] *= alpha;
    }
#pragma unroll
    for (int i = 0; i < TILES; ++i) {
      const float p0 = exp2f(sc[i][0] - base), p1 = exp2f(sc[i][1] - base);
      l += p0 + p1;
      if constexpr (kQuant) {
#pragma unroll
        for (int c = 0; c < kVVecs; ++c) {  // output tiles 8c .. 8c + 7: group c's dims
          const __half2 pp = __floats2half2_rn(p0 * GroupScale(vs[i][0], c) * kPvScale,
                                               p1 * GroupScale(vs[i][1], c) * kPvScale);
          const uint32_t pa = *reinterpret_cast<const uint32_t*>(&pp);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            MmaK8<true>(o[8 * c + e], pa, PairDim<KQ>(vr[i][0][c], vr[i][1][c], e));
          }
        }
      } else {
        const __nv_bfloat162 pp = __floats2bfloat162_rn(p0, p1);
        const uint32_t pa = *reinterpret_cast<const uint32_t*>(&pp);
#pragma unroll
        for (int j = 0; j < kOutTiles; ++j) {
          MmaK8<false>(o[j], pa, PairDim(vr[i][0][j / 8], vr[i][1][j / 8], j % 8));
        }
      }
    }
    if constexpr (!PF) {
      if (wbase + KB < keys.end) {
        load(kr, vr, ks, vs);
        lookup(wbase + 2 * KB);
      }
    } else {
#pragma unroll
      for (int i = 0; i < TILES; ++i) {
#pragma unroll
        for (int j = 0; j < kKVecs; ++j) kr[i][j] = kn[i][j];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int c = 0; c < kVVecs; ++c) vr[i][h][c] = vn[i][h][c];
          if constexpr (kQuant) {
            ks[i][h] = ksn[i][h];
            vs[i][h] = vsn[i][h];
          }
        }
      }
    }
  }

  KTRACE_MARK(0);
  // Row r's sum over its 4 lanes; output column n of tile j = 8c + e is dim 64c + 8n + e, and
  // this lane holds columns 2t and 2t + 1.
  l += __shfl_xor_sync(kFullMask, l, 1);
  l += __shfl_xor_sync(kFullMask, l, 2);
  const float o_scale = kQuant ? 1.f / kPvScale : 1.f;
#pragma unroll
  for (int j = 0; j < kOutTiles; ++j) {
    const int d0 = 64 * (j / 8) + 8 * (2 * t) + j % 8;
    acc_s[warp][r][d0] = o[j][0] * o_scale;
    acc_s[warp][r][d0 + 8] = o[j][1] * o_scale;
  }
  if (t == 0) {
    m_s[warp][r] = m;
    l_s[warp][r] = l;
  }
  __syncthreads();
  KTRACE_MARK(1);
  StoreBlockResult<D, G>(a, acc_s, m_s, l_s, row0, split,
                         ActiveSplits(kv_len, a.window, a.num_splits, KB));
  KTRACE_END(kKTraceDecodeAttention, a.num_splits, kv_len);
}

// Merges the splits' normalized partial rows by their log2-sum-exps: one warp per output row,
// D / 32 dims per lane. Splits with an empty key range (lse = -inf) are skipped unread.
constexpr int kCombineRowsPerBlock = 4;

template <int D>
__global__ void __launch_bounds__(kCombineRowsPerBlock * 32)
    DecodeCombineKernel(const float* partial, const float* lse, int num_splits, int64_t num_rows,
                        const float* sinks, int num_heads, __nv_bfloat16* out) {
  PdlWait();  // launched with PDL (launch.cuh)
  PdlLaunchDependents();
  constexpr int kPer = D / 32;
  const int64_t row = int64_t{blockIdx.x} * kCombineRowsPerBlock + threadIdx.x / 32;
  if (row >= num_rows) return;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  float m = -INFINITY;
  for (int sp = 0; sp < num_splits; ++sp) m = fmaxf(m, lse[sp * num_rows + row]);
  const float base = SafeBase(m);
  float acc[kPer] = {}, wsum = 0.f;
  for (int sp = 0; sp < num_splits; ++sp) {
    const float e = lse[sp * num_rows + row];
    if (e == -INFINITY) continue;
    const float w = exp2f(e - base);
    wsum += w;
    const float* src = partial + (sp * num_rows + row) * D + lane * kPer;
#pragma unroll
    for (int j = 0; j < kPer; ++j) acc[j] += w * src[j];
  }
  wsum += SinkWeight(sinks, row % num_heads, base);
  const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
#pragma unroll
  for (int j = 0; j < kPer; ++j) out[row * D + lane * kPer + j] = __float2bfloat16_rn(acc[j] * inv);
}

using KernelFn = void (*)(DecodeArgs);

template <int D, int U, bool PF>
KernelFn KernelForRows(int rows) {
  switch (rows) {
    case 1:
      return DecodeAttentionKernel<D, 1, U, PF>;
    case 2:
      return DecodeAttentionKernel<D, 2, U, PF>;
    case 4:
      return DecodeAttentionKernel<D, 4, U, PF>;
    default:
      return DecodeAttentionKernel<D, 8, U, PF>;
  }
}

template <int D, bool PF>
KernelFn KernelForUnroll(int rows, int unroll) {
  return unroll == 2 ? KernelForRows<D, 2, PF>(rows) : KernelForRows<D, 4, PF>(rows);
}

template <int D>
KernelFn KernelForDim(int rows, int unroll, bool prefetch) {
  return prefetch ? KernelForUnroll<D, true>(rows, unroll)
                  : KernelForUnroll<D, false>(rows, unroll);
}

// Two tiles with prefetch would spill (255 registers at head_dim 128): PlanDecodeAttention
// never asks for it.
// On quantized pools a key's registers are half as many: 4 tiles (the bytes in flight of 2
// bf16 tiles) are instantiated too.
template <int D, KvQuant KQ>
KernelFn MmaKernelForDim(int tiles, bool prefetch) {
  if constexpr (KQ != KvQuant::kNone) {
    if (tiles == 4) return DecodeAttentionMmaKernel<D, 4, false, KQ>;
  }
  if (tiles == 2) return DecodeAttentionMmaKernel<D, 2, false, KQ>;
  return prefetch ? DecodeAttentionMmaKernel<D, 1, true, KQ>
                  : DecodeAttentionMmaKernel<D, 1, false, KQ>;
}

template <KvQuant KQ>
KernelFn MmaKernelFor(const PagedAttentionPlan& p, int head_dim) {
  return head_dim == 64 ? MmaKernelForDim<64, KQ>(p.decode_unroll, p.decode_prefetch)
                        : MmaKernelForDim<128, KQ>(p.decode_unroll, p.decode_prefetch);
}

KernelFn KernelFor(const PagedAttentionPlan& p, int head_dim, KvQuant kv_quant) {
  if (p.decode_mma) {
    switch (kv_quant) {
      case KvQuant::kFp8:
        return MmaKernelFor<KvQuant::kFp8>(p, head_dim);
      case KvQuant::kInt8:
        return MmaKernelFor<KvQuant::kInt8>(p, head_dim);
      default:
        return MmaKernelFor<KvQuant::kNone>(p, head_dim);
    }
  }
  switch (head_dim) {
    case 64:
      return KernelForDim<64>(p.rows, p.decode_unroll, p.decode_prefetch);
    case 128:
      return KernelForDim<128>(p.rows, p.decode_unroll, p.decode_prefetch);
    default:
      return KernelForDim<256>(p.rows, p.decode_unroll, p.decode_prefetch);
  }
}

// Rows held per lane: the GQA group rounded up to an instantiated size.
int RowCapacity(int group) { return group <= 1 ? 1 : group <= 2 ? 2 : group <= 4 ? 4 : 8; }

// A per-kernel-instance value computed once: query(fn, &value) returns false when there is no
// usable device (a host-only plan test), and then `fallback` is returned and nothing is cached.
template <typename Query>
int CachedPerKernel(KernelFn fn, int fallback, Query query) {
  constexpr int kCache = 64;  // more than the instances
  static KernelFn fns[kCache];
  static int values[kCache];
  for (int i = 0; i < kCache; ++i) {
    if (fns[i] == fn) return values[i];
    if (fns[i] != nullptr) continue;
    int value = 0;
    if (!query(fn, &value)) {
      (void)cudaGetLastError();
      return fallback;
    }
    fns[i] = fn;
    values[i] = value;
    return value;
  }
  return fallback;
}

// Resident blocks per SM of a kernel instance (registers / shared memory bound it); 2 without
// a device.
int ResidentBlocks(KernelFn fn) {
  // Each call site is its own lambda type, so its own cache.
  return CachedPerKernel(fn, 2, [](KernelFn f, int* value) {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, kThreads, 0) != cudaSuccess) {
      return false;
    }
    *value = std::max(n, 1);
    return true;
  });
}

// Fewest splits whose blocks fill the GPU's resident-block slots to >= 85 % averaged over their
// waves (equal-length sequences assumed; a last wave a third full idles most SMs for its whole
// duration), at least kMinKeysPerSplit keys each. H200, 64 x 8192 at 3 blocks/SM: 512 blocks =
// 1.3 waves -> 2 splits (2.47 TB/s vs 2.12 unsplit); 8 x 4096 -> 6 (1.95 TB/s; 4: 1.69, 8: 1.52).
int ChooseSplits(int64_t blocks, int64_t wave, int max_kv_len, int max_splits) {
  const int64_t most = std::clamp<int64_t>(max_kv_len / kMinKeysPerSplit, 1, max_splits);
  int best = 1;
  double best_eff = 0;
  for (int64_t s = 1; s <= most; ++s) {
    const int64_t n = blocks * s;
    const double eff = static_cast<double>(n) / static_cast<double>(wave * ((n + wave - 1) / wave));
    if (eff >= 0.85) return static_cast<int>(s);
    if (eff > best_eff + 1e-9) {
      best_eff = eff;
      best = static_cast<int>(s);
    }
  }
  return best;
}

// The largest cluster of `fn`'s blocks the device can run, capped at kMaxClusterSplits; 0 when
// clusters are unavailable (no device, or the query fails). Cached per kernel instance. Sets the
// kernel's attributes for cluster launches: more than 8 blocks a cluster
// (cudaFuncAttributeNonPortableClusterSizeAllowed) and up to kMaxMergeBytes of dynamic shared
// memory for the merge buffer beside its static arrays.
int MaxClusterSplits(KernelFn fn) {
  return CachedPerKernel(fn, 0, [](KernelFn f, int* value) {
    int size = 0;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(1, kMaxClusterSplits, 1);
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = kMaxMergeBytes;
    if (cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess ||
        cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kMaxMergeBytes)) != cudaSuccess ||
        cudaOccupancyMaxPotentialClusterSize(&size, f, &config) != cudaSuccess) {
      return false;
    }
    *value = std::min(size, kMaxClusterSplits);
    return true;
  });
}

template <int D>
void LaunchCombine(const float* partial, const float* lse, int num_splits, int64_t num_rows,
                   const float* sinks, int num_heads, __nv_bfloat16* out, cudaStream_t stream,
                   bool pdl) {
  const auto blocks =
      static_cast<unsigned>((num_rows + kCombineRowsPerBlock - 1) / kCombineRowsPerBlock);
  LaunchPdl(DecodeCombineKernel<D>, dim3(blocks), dim3(kCombineRowsPerBlock * 32), 0, stream, pdl,
            partial, lse, num_splits, num_rows, sinks, num_heads, out);
}

}  // namespace

bool DecodeAttentionApplies(const PagedAttentionArgs& a, const CudaTuning& t) {
  if (!t.attn_decode || a.max_query_len > 1 || a.block_size <= 0) return false;
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256) return false;
  // Quantized pools: the tensor-core kernel reads fp8 / int8 (keys and values alike) at head_dim
  // 64 / 128; the rest go to the generic kernel, which decodes its tiles.
  if (a.k_desc.quantized() || a.v_desc.quantized()) {
    const KvQuant q = a.k_desc.quant;
    // (Its 8-byte code loads need 8-byte aligned blocks: always at block_size 16.)
    if (a.v_desc.quant != q || (q != KvQuant::kFp8 && q != KvQuant::kInt8) || a.head_dim > 128 ||
        !t.attn_decode_mma || a.k_desc.block_bytes % 8 != 0) {
      return false;
    }
  }
  if (a.num_kv_heads <= 0 || a.num_heads % a.num_kv_heads != 0) return false;
  return a.num_heads / a.num_kv_heads <= 8;
}

PagedAttentionPlan PlanDecodeAttention(const PagedAttentionArgs& a, int num_sms,
                                       const CudaTuning& t) {
  const int group = a.num_heads / a.num_kv_heads;
  PagedAttentionPlan p;
  p.decode = true;
  p.q_per_tile = 1;
  p.rows = RowCapacity(group);
  p.grid_tiles = a.num_seqs;
  p.tile_start_ints = a.num_seqs + 1;  // unused by this kernel; the caller allocates it anyway
  // 4 keys per iteration with prefetch: the fastest variant at GQA 4 on the H200 (64 x 8192:
  // 2.47 TB/s vs 1.69 for 2 keys, 1.95 without prefetch). GQA 8 x 4 keys would need > 255
  // registers.
  const int unroll = t.attn_decode_unroll;
  p.decode_unroll = unroll == 2 || unroll == 4 ? unroll : group <= 4 ? 4 : 2;
  p.decode_prefetch = t.attn_decode_prefetch;
  // Tensor-core variant, the default for head_dim 64 / 128; unroll = 8-key tiles per warp per
  // iteration, 1 or 2. H200, cuda_attn_bench, 2 tiles vs 1 tile + prefetch vs the CUDA-core
  // kernel: 64 x 8192 4.04 / 3.63 / 2.01 TB/s (90 % / 81 % / 45 % of the 4.49 TB/s HBM read
  // rate), 256 x 576 3.19 / 2.94 / 1.79 TB/s.
  p.decode_mma = t.attn_decode_mma && a.head_dim <= 128;
  // On fp8 / int8 pools 1 tile with prefetch is the default: H100, cuda_attn_bench 2026-12-07,
  // fp8 1 tile + prefetch / 2 tiles / 4 tiles: 64 x 8192 474.6 / 498.7 / 488.7 us, 256 x 576
  // 163.7 / 182.5 / 196.5, 8 x 4096 45.1 / 46.6 / 50.5 (bf16 2 tiles: 696.6, 235.5, 61.1).
  if (p.decode_mma) {
    const bool quantized = a.k_desc.quantized();
    p.decode_unroll = unroll == 0                ? (quantized ? 1 : 2)
                      : unroll == 1              ? 1
                      : unroll == 4 && quantized ? 4
                                                 : 2;
    p.decode_prefetch = p.decode_prefetch && p.decode_unroll == 1;
  }
  p.decode_early_kv = t.attn_early_kv && HopperOrNewer();
  const bool cluster = t.attn_cluster_merge && HopperOrNewer();
  const int max_cluster = cluster
                              ? std::min(MaxClusterSplits(KernelFor(p, a.head_dim, a.k_desc.quant)),
                                         t.attn_cluster_splits)
                              : 0;
  if (t.attn_decode_splits > 0) {
    p.num_splits = std::min(t.attn_decode_splits, kMaxSplits);
    p.decode_cluster = p.num_splits > 1 && p.num_splits <= max_cluster &&
                       MergeBufferBytes(p.num_splits, group, a.head_dim) <= kMaxMergeBytes;
  } else {
    const int64_t blocks = int64_t{a.num_seqs} * a.num_kv_heads;
    const int64_t wave =
        int64_t{num_sms} * ResidentBlocks(KernelFor(p, a.head_dim, a.k_desc.quant));
    // Clusters when every split block of the step fits one block per SM (batch 1 with 8 kv
    // heads: 8 x 16): H200, 1B batch 1 1,056-1,093 vs 992-1,000 tok/s with 64 splits and the
    // combine kernel; at batch 8 (64 x 7 blocks) clusters were 5-7 % slower.
    if (max_cluster >= 2 && blocks > 0) {
      p.num_splits = ChooseSplits(blocks, wave, a.max_kv_len, max_cluster);
      p.decode_cluster = p.num_splits > 1 && blocks * p.num_splits <= num_sms &&
                         MergeBufferBytes(p.num_splits, group, a.head_dim) <= kMaxMergeBytes;
    }
    if (!p.decode_cluster) {
      p.num_splits = blocks > 0 ? ChooseSplits(blocks, wave, a.max_kv_len, kMaxSplits) : 1;
    }
  }
  SizeSplitScratch(a, &p);
  return p;
}

void LaunchDecodeAttention(const PagedAttentionArgs& a, const PagedAttentionPlan& plan,
                           float* partial, float* lse, cudaStream_t stream, bool pdl) {
  if (a.num_tokens == 0 || a.num_seqs == 0) return;
  DecodeArgs d;
  static_cast<PagedKernelTables&>(d) = KernelTables(a);
  d.num_splits = plan.num_splits;
  d.block_size = MakeFastDiv(a.block_size);
  d.q_scale = a.softcap > 0.f ? a.scale : a.scale * kLog2e;
  d.num_rows = int64_t{a.num_tokens} * a.num_heads;
  d.partial = partial;
  d.lse = lse;
  d.cluster_merge = plan.decode_cluster ? 1 : 0;
  d.early_kv = plan.decode_early_kv ? 1 : 0;
  const dim3 grid(static_cast<unsigned>(int64_t{a.num_seqs} * a.num_kv_heads),
                  static_cast<unsigned>(plan.num_splits));
  const KernelFn kernel = KernelFor(plan, a.head_dim, a.k_desc.quant);
  if (plan.decode_cluster) {
    LaunchPdlCluster(kernel, grid, dim3(kThreads),
                     MergeBufferBytes(plan.num_splits, a.num_heads / a.num_kv_heads, a.head_dim),
                     stream, pdl, dim3(1, static_cast<unsigned>(plan.num_splits), 1), d);
    return;
  }
  LaunchPdl(kernel, grid, dim3(kThreads), 0, stream, pdl, d);
  if (plan.num_splits > 1) {
    switch (a.head_dim) {
      case 64:
        LaunchCombine<64>(partial, lse, plan.num_splits, d.num_rows, d.sinks, a.num_heads, d.out,
                          stream, pdl);
        break;
      case 128:
        LaunchCombine<128>(partial, lse, plan.num_splits, d.num_rows, d.sinks, a.num_heads, d.out,
                           stream, pdl);
        break;
      default:
        LaunchCombine<256>(partial, lse, plan.num_splits, d.num_rows, d.sinks, a.num_heads, d.out,
                           stream, pdl);
        break;
    }
  }
}

}  // namespace loom::cuda
