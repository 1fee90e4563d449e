#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/ktrace.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qkv_rope_store.cuh"
#include "backend/cuda/stream_gemv.cuh"

namespace loom::cuda {
LOOM_KTRACE_TU(stream_gemv)
namespace {

// 16 consumer warps (1 KB-2 KB copies, 544 threads): H200 batch 1, 1B 1,035-1,044 vs 1,178-1,191
// tok/s, 8B 205-207 vs 252.
constexpr int kConsumerWarps = 8;
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kThreads = kConsumers + 32;  // + the producer warp
// A stage: 8 rows x 2048 columns (16 rows x 1024 when gated), 4 KB (2 KB) bulk copies. H200,
// back-to-back GEMVs: 16 KB stages with 2 KB copies cap near 3.3 TB/s whatever the ring depth,
// 32 KB with the copies spread over the producer warp's lanes reach 4.1-4.4 TB/s (cuda_bench gemv).
constexpr int kStageBytes = 32768;
// The ring: 128 KB (4 stages) where x leaves room. H200, engine batch 1 (1B / 8B tok/s),
// session 5: 64 KB 752 / 150, 96 KB 849-864 / 192-194, 128 KB 1,035 / 241-242, 160 KB
// 1,038-1,050 / 241-243. Once the o projection ran as one-stage blocks, 128 KB let the gate/up
// blocks in beside them: 1B 1,356 vs 1,337 tok/s with 160 KB (run 110). The sweep is settled:
// the depth is no longer a switch (it was LOOM_GEMV_RING_KB).
constexpr int kRingBytes = 128 * 1024;
constexpr int kMaxStages = 5;
constexpr int kConsumerBarrier = 1;  // named barrier of the consumer warps (0 is __syncthreads)

// --- mbarrier and bulk-copy primitives (sm_90; MbarInit / MbarArriveExpectTx in
// device_math.cuh) ---
__device__ __forceinline__ void MbarArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(SmemAddress(bar)) : "memory");
}

__device__ __forceinline__ void MbarWait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(SmemAddress(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
}

// Global -> shared bulk copy completing on `bar`; the weights are read once, so they go into L2
// as first to evict (the activations and KV stay).
__device__ __forceinline__ void BulkCopy(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                         uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(SmemAddress(dst)),
      "l"(src), "r"(bytes), "r"(SmemAddress(bar)), "l"(policy)
      : "memory");
}

__device__ __forceinline__ uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

__device__ __forceinline__ void ConsumerSync() {
  asm volatile("bar.sync %0, %1;" ::"n"(kConsumerBarrier), "n"(kConsumers) : "memory");
}

// Sum over the consumer threads (the producer warp does not take part).
__device__ __forceinline__ float ConsumerSum(float v, float* scratch) {
  v = WarpSum(v);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  ConsumerSync();
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < kConsumerWarps; ++i) total += scratch[i];
  return total;
}

// The layout a launch shares between producer and consumers. Rows go in groups of
// kConsumerWarps * R (R rows per consumer warp); a stage holds one group's rows over a slice of
// `slice` columns (the last slice may be shorter), row r of the group at r * slice elements.
template <int R>
struct Plan {
  static constexpr int kGroupRows = kConsumerWarps * R;
  static constexpr int kSlice = kStageBytes / 2 / kGroupRows;  // bf16 columns per row per stage
  int m, k, slices;
  int first_group, stages;  // this block's run

  __device__ Plan(int m_, int k_) : m(m_), k(k_), slices((k_ + kSlice - 1) / kSlice) {
    const int groups = (m + kGroupRows - 1) / kGroupRows;
    const int b = blockIdx.x, g = gridDim.x;
    first_group = static_cast<int>(int64_t{groups} * b / g);
    const int end = static_cast<int>(int64_t{groups} * (b + 1) / g);
    stages = (end - first_group) * slices;
  }
  __device__ int Group(int s) const { return first_group + s / slices; }
  __device__ int Column(int s) const { return s % slices * kSlice; }
  __device__ int Width(int s) const { return min(kSlice, k - Column(s)); }
};

// The rope-store epilogue's rows: pair p of a fused [q | k | v] projection is the two rows one
// rotation mixes (halves (i, i + rotary / 2) or interleaved (2i, 2i + 1)), or two neighbouring
// rows past the rotary dims and in the v heads, so one warp holds both inputs of its outputs.
struct RopePair {
  int head, a, b;  // rows head * D + a and head * D + b
  bool rotate;     // a rotated pair (q / k heads, below the rotary dims)
  int freq;        // its inv_freq index
};

__device__ __forceinline__ RopePair PairOf(const QkvRopeStoreArgs& q, int p) {
  const int half_d = q.head_dim / 2, r2 = q.rotary_dim / 2;
  RopePair rp;
  rp.head = p / half_d;
  const int i = p % half_d;
  rp.freq = i;
  rp.rotate = rp.head < q.num_heads + q.num_kv_heads && i < r2;
  if (rp.rotate) {
    rp.a = q.interleaved ? 2 * i : i;
    rp.b = q.interleaved ? 2 * i + 1 : i + r2;
  } else if (rp.head < q.num_heads + q.num_kv_heads) {
    rp.a = q.rotary_dim + 2 * (i - r2);
    rp.b = rp.a + 1;
  } else {
    rp.a = 2 * i;
    rp.b = 2 * i + 1;
  }
  return rp;
}

// The weight row behind row slot `row` of the plan (the identity but for the rope-store pairs).
template <bool kRope>
__device__ __forceinline__ int64_t WeightRow(const QkvRopeStoreArgs& q, int row) {
  if constexpr (!kRope) {
    return row;
  } else {
    const RopePair rp = PairOf(q, row / 2);
    return int64_t{rp.head} * q.head_dim + (row % 2 == 0 ? rp.a : rp.b);
  }
}

template <int R, bool kRope>
__device__ __forceinline__ void Produce(const Plan<R>& plan, const __nv_bfloat16* w, uint8_t* ring,
                                        int stages, uint64_t* full, uint64_t* empty, int lane,
                                        const QkvRopeStoreArgs& rope) {
  const uint64_t policy = EvictFirstPolicy();
  for (int s = 0; s < plan.stages; ++s) {
    const int slot = s % stages;
    if (s >= stages) MbarWait(&empty[slot], (s / stages - 1) & 1);
    const int row0 = plan.Group(s) * Plan<R>::kGroupRows;
    const int rows = min(Plan<R>::kGroupRows, plan.m - row0);
    const int col = plan.Column(s);
    const uint32_t bytes = static_cast<uint32_t>(plan.Width(s)) * 2;
    if (lane == 0) MbarArriveExpectTx(&full[slot], bytes * rows);
    uint8_t* stage = ring + slot * kStageBytes;
    for (int r = lane; r < rows; r += 32) {  // the copies spread over the warp's lanes
      BulkCopy(stage + r * (Plan<R>::kSlice * 2),
               w + WeightRow<kRope>(rope, row0 + r) * plan.k + col, bytes, &full[slot], policy);
    }
  }
}

// The work-queue producer (kQueue): block b first streams a fixed run of F groups [b * F,
// b * F + F), F = 7/8 of an even share (at least the ring's depth; the first stages are issued
// before the previous kernel ends, as the static plan does), then takes one group at a time from
// queue[0] (F * gridDim.x + a ticket) until the groups run out, and ends
// with a stage whose group is -1 (a plain arrive on its full barrier). Each grab is issued one
// group ahead, so its round trip overlaps the wait for a free slot. The producer grabs only after
// PdlWait: the previous kernel (which may use the same queue) has then reset it. The block whose
// failed grab is the grid's last resets the queue for the next launch.
template <int R>
__device__ __forceinline__ void ProduceQueued(const Plan<R>& plan, const __nv_bfloat16* w,
                                              uint8_t* ring, int stages, uint64_t* full,
                                              uint64_t* empty, int* stage_group, int lane,
                                              unsigned* queue) {
  const uint64_t policy = EvictFirstPolicy();
  constexpr int G = Plan<R>::kGroupRows;
  const int groups = (plan.m + G - 1) / G;
  const int run = max(stages, groups / static_cast<int>(gridDim.x) * 7 / 8);
  const int first = static_cast<int>(blockIdx.x) * run;
  const int fixed = max(0, min(run, groups - first));
  const int queued0 = static_cast<int>(gridDim.x) * run;
  unsigned ticket = 0;
  bool waited = false;
  int s = 0;
  for (int i = 0;; ++i) {
    int g;
    if (i < fixed) {
      g = first + i;
    } else {
      if (!waited) {  // the first grab
        PdlWait();
        waited = true;
        if (lane == 0) ticket = atomicAdd(queue, 1u);
      }
      g = queued0 + static_cast<int>(__shfl_sync(0xffffffffu, ticket, 0));
      if (g < groups && lane == 0) ticket = atomicAdd(queue, 1u);  // the next one, ahead
    }
    const bool last = g >= groups;
    for (int sl = 0; sl < (last ? 1 : plan.slices); ++sl, ++s) {
      const int slot = s % stages;
      if (s >= stages) MbarWait(&empty[slot], (s / stages - 1) & 1);
      if (last) {
        if (lane == 0) {
          stage_group[slot] = -1;
          MbarArrive(&full[slot]);
        }
        break;
      }
      const int row0 = g * G;
      const int rows = min(G, plan.m - row0);
      const int col = sl * Plan<R>::kSlice;
      const uint32_t bytes = static_cast<uint32_t>(min(Plan<R>::kSlice, plan.k - col)) * 2;
      if (lane == 0) {
        stage_group[slot] = g;
        MbarArriveExpectTx(&full[slot], bytes * rows);
      }
      uint8_t* stage = ring + slot * kStageBytes;
      for (int r = lane; r < rows; r += 32) {
        BulkCopy(stage + r * (Plan<R>::kSlice * 2), w + int64_t{row0 + r} * plan.k + col, bytes,
                 &full[slot], policy);
      }
    }
    if (last) break;
  }
  if (lane == 0) {
    __threadfence();                                  // this block's last grab before its count
    if (atomicAdd(queue + 1, 1u) == gridDim.x - 1) {  // every block has grabbed its last
      queue[0] = 0;
      queue[1] = 0;
    }
  }
}

// Groups of a block's run whose epilogue inputs the kernel loads ahead (StreamGemvKernel).
constexpr int kPreGroups = 8;

// The norm prologue's per-thread share: x's 16-byte vectors t, t + kConsumers, ... (k <=
// kGemvNormMaxK: at most kNormVecs of them).
constexpr int kNormVecs = static_cast<int>(kGemvNormMaxK / 8 / kConsumers);

// The norm weights (+ offset) of the thread's vectors, into registers. Weights are never written
// by a step, so this goes before PdlWait and leaves one dependent round trip less after it.
__device__ __forceinline__ void LoadNormWeights(const GemvNorm& norm, int k_vec,
                                                float (&nw)[kNormVecs][8]) {
  const int t = threadIdx.x;
#pragma unroll
  for (int i = 0; i < kNormVecs; ++i) {
    const int v = t + i * kConsumers;
    if (v >= k_vec) break;
    const float4* w = reinterpret_cast<const float4*>(norm.w + v * 8);
    const float4 lo = w[0], hi = w[1];
    const float f[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
    for (int e = 0; e < 8; ++e) nw[i][e] = f[e] + norm.offset;
  }
}

// x (normalized when kNorm, like the small-batch kernel's prologue) into shared memory as bf16.
// kNorm: x is read once into registers (the sum of squares and the scaling both use them) and
// scaled by the weights LoadNormWeights fetched; the arithmetic is the same as reading it twice.
// Otherwise: four loads in flight per thread before their stores.
template <bool kNorm>
__device__ __forceinline__ void StageInput(const uint4* x, int k_vec, const GemvNorm& norm,
                                           const float (&nw)[kNormVecs][8], uint4* xs,
                                           float* scratch) {
  const int t = threadIdx.x;
  if constexpr (kNorm) {
    uint4 xr[kNormVecs];
#pragma unroll
    for (int i = 0; i < kNormVecs; ++i) {
      const int v = t + i * kConsumers;
      if (v < k_vec) xr[i] = x[v];
    }
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < kNormVecs; ++i) {
      if (t + i * kConsumers >= k_vec) break;
      float f[8];
      UnpackBf16x8(xr[i], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) ss += f[e] * f[e];
    }
    const float total = ConsumerSum(ss, scratch);
    const float inv = rsqrtf(total / static_cast<float>(k_vec * 8) + norm.eps);
#pragma unroll
    for (int i = 0; i < kNormVecs; ++i) {
      const int v = t + i * kConsumers;
      if (v >= k_vec) break;
      float f[8];
      UnpackBf16x8(xr[i], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] = f[e] * inv * nw[i][e];
      xs[v] = PackBf16x8(f);
    }
  } else {
    constexpr int kBatch = 4;
    for (int v0 = t; v0 < k_vec; v0 += kBatch * kConsumers) {
      uint4 r[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int v = v0 + j * kConsumers;
        if (v < k_vec) r[j] = x[v];
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int v = v0 + j * kConsumers;
        if (v < k_vec) xs[v] = r[j];
      }
    }
  }
  ConsumerSync();
}

// The rope-store epilogue of pair p (RopePair) from its two sums: rounded to bf16 as the
// materialized qkv row would be, then QkvRopeStoreKernel's rotation and stores (same formula, so
// the same bits as the projection followed by that kernel).
// `position` and `slot` are the row's (q.positions[0], q.slots[0]); `inv_freq` the pair's
// q.inv_freq entry (all fetched ahead by the kernel).
__device__ __forceinline__ void RopeStorePair(const QkvRopeStoreArgs& q, int p, float s0, float s1,
                                              int32_t position, int32_t slot, float inv_freq) {
  const RopePair rp = PairOf(q, p);
  const int H = q.num_heads, KVH = q.num_kv_heads, D = q.head_dim;
  const bool slot_ok = slot >= 0 && slot < q.num_slots;
  __nv_bfloat16* dst;
  if (rp.head < H) {
    dst = static_cast<__nv_bfloat16*>(q.q_out) + int64_t{rp.head} * D;
  } else if (!slot_ok) {
    return;
  } else if (rp.head < H + KVH) {
    dst = static_cast<__nv_bfloat16*>(q.k_pool) + (int64_t{slot} * KVH + (rp.head - H)) * D;
  } else {
    dst = static_cast<__nv_bfloat16*>(q.v_pool) + (int64_t{slot} * KVH + (rp.head - H - KVH)) * D;
  }
  const float x0 = __bfloat162float(__float2bfloat16_rn(s0));
  const float x1 = __bfloat162float(__float2bfloat16_rn(s1));
  if (!rp.rotate) {
    dst[rp.a] = __float2bfloat16_rn(x0);
    dst[rp.b] = __float2bfloat16_rn(x1);
    return;
  }
  float sn, c;
  sincosf(static_cast<float>(position) * inv_freq, &sn, &c);
  sn *= q.attention_factor;
  c *= q.attention_factor;
  dst[rp.a] = __float2bfloat16_rn(x0 * c - x1 * sn);
  dst[rp.b] = __float2bfloat16_rn(x1 * c + x0 * sn);
}

// R = 1: consumer warp c owns row (group * 8 + c); with kRope that is one row of the rope pair
// group * 4 + c / 2 of a fused q | k | v projection (RopePair): the odd warp hands its sum to the
// even one, which stores the pair (RopeStorePair). R = 2 (gated epilogues): rows
// (group * 16 + 2c, + 1), a (gate, up) pair of FuseGateUp's interleaved layout.
// (kRope ran at R = 2 before, one pair a warp: groups of 16 rows split the 1B's 3,072 q|k|v rows
// over 132 SMs as 2 or 1 groups a block, and the last blocks ended 2 us after the median one.)
// kQueue: the row groups come from a work queue (ProduceQueued) instead of one contiguous run a
// block; plain outputs only.
template <int R, typename Out, GemvEpilogue Epi, bool kNorm, bool kRope = false,
          bool kQueue = false>
__global__ void __launch_bounds__(kThreads, 1)
    StreamGemvKernel(const uint4* __restrict__ x, const __nv_bfloat16* __restrict__ w, Out* out,
                     int m, int k, int stages, GemvNorm norm, QkvRopeStoreArgs rope,
                     unsigned* queue) {
  static_assert(!kQueue || (Epi == GemvEpilogue::kNone && !kRope && R == 1),
                "the work queue serves plain outputs");
  using P = Plan<R>;
  KTRACE_BEGIN();
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t full[kMaxStages];
  __shared__ __align__(8) uint64_t empty[kMaxStages];
  __shared__ float scratch[kConsumerWarps];
  [[maybe_unused]] __shared__ float pair_sum[2][kConsumerWarps / 2];  // kRope: odd warps' sums
  [[maybe_unused]] __shared__ int stage_group[kMaxStages];            // kQueue: each slot's group
  uint8_t* ring = smem;
  uint4* xs = reinterpret_cast<uint4*>(smem + stages * kStageBytes);

  const P plan(m, k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int i = 0; i < stages; ++i) {
      MbarInit(&full[i], 1);
      MbarInit(&empty[i], kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == kConsumerWarps) {  // the producer: no PdlWait, it reads only weights
    if constexpr (kQueue) {
      ProduceQueued<R>(plan, w, ring, stages, full, empty, stage_group, lane, queue);
    } else {
      Produce<R, kRope>(plan, w, ring, stages, full, empty, lane, rope);
    }
    return;
  }

  float nw[kNormVecs][8];
  if constexpr (kNorm) LoadNormWeights(norm, k / 8, nw);
  // What the epilogues read besides the sums, loaded ahead into registers (lane 0: the warp's
  // row of each of the run's first kPreGroups groups; later groups load at the store) and used
  // only at the stores, so the loads overlap the stream instead of delaying the grid's end:
  // kRope, each pair's inv_freq (a constant table: before the wait) and the row's position and
  // KV slot; kAddTo, the residual of the warp's row.
  const int run_groups = plan.stages / plan.slices;
  [[maybe_unused]] float pre[kPreGroups];
  if constexpr (kRope) {
#pragma unroll
    for (int gi = 0; gi < kPreGroups; ++gi) {
      const RopePair rp = PairOf(rope, ((plan.first_group + gi) * P::kGroupRows + warp) / 2);
      pre[gi] = lane == 0 && gi < run_groups && rp.rotate ? rope.inv_freq[rp.freq] : 0.f;
    }
  }
  PdlWait();  // x and out are written by earlier kernels
  KTRACE_WAITED();
  PdlLaunchDependents();
  [[maybe_unused]] int32_t position = 0, kv_slot = 0;
  if constexpr (kRope) {
    position = rope.positions[0];
    kv_slot = rope.slots[0];
  }
  if constexpr (Epi == GemvEpilogue::kAddTo) {
    static_assert(R == 1, "kAddTo stores one row a warp");
#pragma unroll
    for (int gi = 0; gi < kPreGroups; ++gi) {
      const int row = (plan.first_group + gi) * P::kGroupRows + warp;
      pre[gi] = lane == 0 && gi < run_groups && row < m ? ToF32(out[row]) : 0.f;
    }
  }
  // pre[gi] without dynamic indexing (which would put the array in local memory).
  [[maybe_unused]] auto pre_at = [&](int gi, float fallback) {
    float v = fallback;
#pragma unroll
    for (int j = 0; j < kPreGroups; ++j) v = j == gi ? pre[j] : v;
    return v;
  };
  const int k_vec = k / 8;
  StageInput<kNorm>(x, k_vec, norm, nw, xs, scratch);
  KTRACE_MARK(0);
  // Thread 0's stage loop in clock cycles: 0 waiting for a stage's bytes, 1 the dot, 2 the rest
  // (group sums and the epilogue).
  KTRACE_LAP_START();

  float acc[R][2];  // two chains per row
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = 0.f;
  for (int s = 0; kQueue || s < plan.stages; ++s) {
    const int slot = s % stages;
    KTRACE_LAP(2);
    MbarWait(&full[slot], (s / stages) & 1);
    KTRACE_LAP(0);
    if (s == 0) KTRACE_MARK(1);
    int group = 0, column = 0;
    if constexpr (kQueue) {
      group = stage_group[slot];
      if (group < 0) break;  // the producer's end
      column = s % plan.slices * P::kSlice;
    } else {
      group = plan.Group(s);
      column = plan.Column(s);
    }
    const int row0 = group * P::kGroupRows + warp * R;
    const int units = min(P::kSlice, k - column) / 8;
    const uint4* xv = xs + column / 8;
    const uint4* stage = reinterpret_cast<const uint4*>(ring + slot * kStageBytes);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (row0 + r >= m) continue;
      const uint4* wv = stage + (warp * R + r) * (P::kSlice / 8);
#pragma unroll 4
      for (int u = lane; u < units; u += 32) {
        float wf[8], xf[8];
        UnpackBf16x8(wv[u], wf);
        UnpackBf16x8(xv[u], xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][e & 1] += wf[e] * xf[e];
      }
    }
    __syncwarp();
    if (lane == 0) MbarArrive(&empty[slot]);
    KTRACE_LAP(1);
    if (s % plan.slices != plan.slices - 1) continue;
    // The group's last slice: the rows are complete.
    float sum[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      sum[r] = WarpSum(acc[r][0] + acc[r][1]);
      acc[r][0] = acc[r][1] = 0.f;
    }
    if constexpr (kRope) {
      static_assert(R == 1, "a rope pair is two warps' rows");
      // The pair's two warps meet at named barrier 2 + warp / 2 (0 is __syncthreads, 1 the
      // consumers'); the buffer alternates by group, so an odd warp a group ahead cannot
      // overwrite a sum its partner has not read.
      const int gi = plan.Group(s) - plan.first_group;
      float* slot_sum = &pair_sum[gi & 1][warp / 2];
      if (warp % 2 == 1 && lane == 0) *slot_sum = sum[0];
      asm volatile("bar.sync %0, 64;" ::"r"(2 + warp / 2) : "memory");
      if (warp % 2 == 1 || lane != 0) continue;
      if (row0 + 1 < m) {
        const int p = row0 / 2;
        const float inv_freq =
            gi < kPreGroups ? pre_at(gi, 0.f) : rope.inv_freq[PairOf(rope, p).freq];
        RopeStorePair(rope, p, sum[0], *slot_sum, position, kv_slot, inv_freq);
      }
      continue;
    }
    if (lane != 0) continue;
    if constexpr (R == 1) {
      if (row0 < m) {
        if constexpr (Epi == GemvEpilogue::kAddTo) {
          const int gi = plan.Group(s) - plan.first_group;
          const float r = gi < kPreGroups ? pre_at(gi, 0.f) : ToF32(out[row0]);
          out[row0] = FromF32<Out>(r + sum[0]);
        } else {
          out[row0] = FromF32<Out>(sum[0]);
        }
      }
    } else {
      if (row0 + 1 < m) {
        const float v = Epi == GemvEpilogue::kSiluMul ? SiluMulOp{}(sum[0], sum[1])
                                                      : GeluTanhMulOp{}(sum[0], sum[1]);
        out[row0 / 2] = FromF32<Out>(v);
      }
    }
  }
  KTRACE_LAP(2);
  KTRACE_END(kKTraceStreamGemv, m, k);
}

// The dynamic shared memory a block may use on this device (the opt-in limit less 1 KB for the
// kernel's static arrays): 226 KB on the H200; consumer parts have far less.
int MaxDynamicSmem() {
  static const int bytes = [] {
    int device = 0, optin = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
            cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return optin - 1024;
  }();
  return bytes;
}

// The current device's SM count (first call per process).
int NumSms() {
  static const int sms = [] {
    int device = 0, count = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return count;
  }();
  return sms;
}

// Fewer stages than this starve the stream (96 KB: 849-864 vs 1,038-1,050 tok/s, 1B batch 1).
constexpr int kMinStages = 3;
static_assert(kRingBytes >= kMinStages * kStageBytes && kRingBytes <= kMaxStages * kStageBytes);
// A launch takes its groups from the work queue when it has at least this many a block.
constexpr int kQueueMinGroupsPerBlock = 16;

template <int R, typename Out, GemvEpilogue Epi, bool kNorm, bool kRope = false,
          bool kQueue = false>
void Launch(const void* x, const void* w, void* out, int64_t m, int64_t k, const GemvNorm& norm,
            cudaStream_t stream, bool pdl, const QkvRopeStoreArgs& rope = {},
            unsigned* queue = nullptr) {
  // The norm prologue loads its weights as float4 (CudaBackend::GemvNormFor only offers aligned
  // ones).
  CHECK(!kNorm || reinterpret_cast<uintptr_t>(norm.w) % 16 == 0) << "StreamGemv: norm weights";
  auto* kernel = StreamGemvKernel<R, Out, Epi, kNorm, kRope, kQueue>;
  static const bool configured = [&] {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    MaxDynamicSmem()));
    // All of the SM's unified memory as shared memory (the kernel needs no L1), so the next
    // kernel's blocks (decode attention with its cluster-merge buffer: 50 KB at 8B shapes) may
    // fit beside the 164-168 KB ring under PDL instead of a 196 KB carveout. Not isolated on the
    // H200: with it (and on attention, since dropped there: it cut the batch-64 attention from
    // 87.6 to 63.1% of HBM) the 8B batch-1 A/B against the previous binary went from -1.0% to
    // -0.4% between two machine starts.
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
  const int sms = NumSms();
  constexpr int64_t kGroupRows = Plan<R>::kGroupRows;
  const int64_t groups = (m + kGroupRows - 1) / kGroupRows;
  const int64_t slices = (k + Plan<R>::kSlice - 1) / Plan<R>::kSlice;
  unsigned blocks = static_cast<unsigned>(groups < sms ? groups : sms);
  const int fit = (MaxDynamicSmem() - static_cast<int>(k) * 2) / kStageBytes;  // >= kMinStages
  int stages = std::clamp(std::min(kRingBytes / kStageBytes, fit), 2, kMaxStages);
  // Two blocks an SM, each with a ring just big enough for its run, where the whole weight fits
  // in them at one stage a block: such a launch is paced by its consumers once its rings are
  // loaded, and its smaller blocks let the next launch's blocks in sooner. H200, 1B batch 1, the
  // o projection (256 groups of one slice: 256 one-stage blocks instead of 132 two-stage ones):
  // 1,312-1,316 vs 1,291-1,294 tok/s; traced, gate/up's blocks started 2.4 us before o's end
  // instead of 0.7 and its first stage was ready 1.4 us after its release instead of 2.0. Two
  // stages a block (the q|k|v projection too) measured the same or slower (runs 108-109); the
  // switch between these (LOOM_GEMV_SPREAD) is retired.
  if (!kQueue && groups > sms && groups * slices <= int64_t{2} * sms) {
    blocks = static_cast<unsigned>(std::min<int64_t>(groups, 2 * int64_t{sms}));
    const int64_t run = (groups + blocks - 1) / blocks * slices;
    stages = static_cast<int>(std::min<int64_t>(run, stages));
  }
  const size_t smem = static_cast<size_t>(stages) * kStageBytes + static_cast<size_t>(k) * 2;
  LaunchPdl(kernel, dim3(blocks), dim3(kThreads), smem, stream, pdl, static_cast<const uint4*>(x),
            static_cast<const __nv_bfloat16*>(w), static_cast<Out*>(out), static_cast<int>(m),
            static_cast<int>(k), stages, norm, rope, queue);
}

template <int R, typename Out, GemvEpilogue Epi>
void LaunchNorm(const void* x, const void* w, void* out, int64_t m, int64_t k, const GemvNorm* norm,
                cudaStream_t stream, bool pdl) {
  if (norm != nullptr) return Launch<R, Out, Epi, true>(x, w, out, m, k, *norm, stream, pdl);
  Launch<R, Out, Epi, false>(x, w, out, m, k, GemvNorm{}, stream, pdl);
}

// Plain f32 outputs (logits) with many row groups a block take them from `queue`.
void LaunchQueued(const void* x, const void* w, void* out, int64_t m, int64_t k,
                  const GemvNorm* norm, cudaStream_t stream, bool pdl, unsigned* queue) {
  if (norm != nullptr) {
    return Launch<1, float, GemvEpilogue::kNone, true, false, true>(x, w, out, m, k, *norm, stream,
                                                                    pdl, {}, queue);
  }
  Launch<1, float, GemvEpilogue::kNone, false, false, true>(x, w, out, m, k, GemvNorm{}, stream,
                                                            pdl, {}, queue);
}

// The work queue pays where a block has many groups: the static plan's slowest block ended
// 6.6 us after the median one in the 1B's lm_head (122 groups a block, H200), where one group
// takes ~1 us. No queue (CudaTuning::gemv_queue = false: the backend passes none): static runs.
bool UseQueue(int64_t m, unsigned* queue) {
  const int sms = NumSms();
  return queue != nullptr && m >= int64_t{kQueueMinGroupsPerBlock} * 8 * sms;
}

}  // namespace

bool StreamGemvApplies(const void* x, const void* w, int64_t k) {
  return HopperOrNewer() && k % 8 == 0 && k > 0 && k <= kStreamGemvMaxK &&
         kMinStages * kStageBytes + k * 2 <= MaxDynamicSmem() &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

void LaunchStreamGemv(const void* x, const void* w, void* out, DType out_dtype, int64_t m,
                      int64_t k, cudaStream_t stream, bool pdl, GemvEpilogue epilogue,
                      const GemvNorm* norm, unsigned* queue) {
  CHECK(StreamGemvApplies(x, w, k)) << "StreamGemv: k " << k;
  CHECK(norm == nullptr || k <= kGemvNormMaxK) << "StreamGemv norm prologue: k " << k;
  CHECK(m > 0 && m * k < (int64_t{1} << 40) && m < (int64_t{1} << 31)) << "StreamGemv: m " << m;
  CHECK(out_dtype == DType::kBF16 || (out_dtype == DType::kF32 && epilogue == GemvEpilogue::kNone))
      << "StreamGemv: out " << DTypeName(out_dtype);
  using Bf16 = __nv_bfloat16;
  switch (epilogue) {
    case GemvEpilogue::kNone:
      if (out_dtype == DType::kF32) {
        if (UseQueue(m, queue)) return LaunchQueued(x, w, out, m, k, norm, stream, pdl, queue);
        return LaunchNorm<1, float, GemvEpilogue::kNone>(x, w, out, m, k, norm, stream, pdl);
      }
      return LaunchNorm<1, Bf16, GemvEpilogue::kNone>(x, w, out, m, k, norm, stream, pdl);
    case GemvEpilogue::kAddTo:
      return LaunchNorm<1, Bf16, GemvEpilogue::kAddTo>(x, w, out, m, k, norm, stream, pdl);
    case GemvEpilogue::kSiluMul:
      CHECK_EQ(m % 2, 0) << "StreamGemv gated: m " << m;
      return LaunchNorm<2, Bf16, GemvEpilogue::kSiluMul>(x, w, out, m, k, norm, stream, pdl);
    case GemvEpilogue::kGeluTanhMul:
      CHECK_EQ(m % 2, 0) << "StreamGemv gated: m " << m;
      return LaunchNorm<2, Bf16, GemvEpilogue::kGeluTanhMul>(x, w, out, m, k, norm, stream, pdl);
  }
}

bool StreamGemvRopeStoreApplies(const void* x, const void* w, int64_t k,
                                const QkvRopeStoreArgs& rope) {
  return StreamGemvApplies(x, w, k) && k <= kGemvNormMaxK && rope.n == 1 &&
         rope.q_norm == nullptr && rope.k_norm == nullptr && rope.head_dim > 0 &&
         rope.head_dim % 2 == 0 && rope.rotary_dim % 2 == 0 && rope.rotary_dim <= rope.head_dim &&
         !rope.k_desc.quantized() && !rope.v_desc.quantized();  // a quantized row: QkvRopeStore
}

void LaunchStreamGemvRopeStore(const void* x, const void* w, int64_t k, const GemvNorm& norm,
                               const QkvRopeStoreArgs& rope, cudaStream_t stream, bool pdl) {
  CHECK(StreamGemvRopeStoreApplies(x, w, k, rope))
      << "StreamGemvRopeStore: k " << k << " n " << rope.n << " head_dim " << rope.head_dim
      << " rotary_dim " << rope.rotary_dim;
  const int64_t m = (rope.num_heads + 2 * int64_t{rope.num_kv_heads}) * rope.head_dim;
  Launch<1, __nv_bfloat16, GemvEpilogue::kNone, true, true>(x, w, nullptr, m, k, norm, stream, pdl,
                                                            rope);
}

}  // namespace loom::cuda
