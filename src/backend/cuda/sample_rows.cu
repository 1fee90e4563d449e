// Device draws with the host sampler's rule (sample/sampler.cc, SampleRow for a row that
// IsPlainDraw accepts):
//   p_i   = exp((logit_i - max) / T) over the unmasked tokens (-inf excluded; p may underflow to 0)
//   kept  = the k best in the order (p desc, id asc)                                   [top-k]
//           then the shortest prefix of that order whose mass reaches top_p * its total [top-p]
//           then p >= min_p * p_max, p_max = 1 (the max logit's p)                     [min-p]
//   token = the first kept id, in id order, whose running sum of p exceeds
//           CounterUniform(seed, step, 0) * (sum of the kept p); the last kept id if none does.
// Each step keeps a prefix of the (p desc, id asc) order, so the kept set is one prefix, named by
// its last element, the cut (key, id): kept <=> key > cut.key || (key == cut.key && id <= cut.id).
// key = float bits of p + 1 (positive floats order as their bits; 0 marks a masked token).
//
// Why one cluster of blocks per row, the row in shared memory. 256 rows of 128256 f32 logits
// are 131 MB, more than the 50 MB L2: any pass over the rows after the first would go back to HBM
// (~30 us a pass on an H200). So the first pass streams each row once from HBM into the shared
// memory of a thread-block cluster (C <= 8 blocks, ~16K logits = 64 KB each, so two blocks fit an
// SM and one block's loads overlap the other's passes), and every later pass reads shared memory:
//
//   row r:   [ block 0: logits 0..chunk) | block 1: chunk..2 chunk) | ... | block C-1 ]
//   cluster: blocks exchange small partials (max, sums, histograms) through distributed shared
//            memory (cluster.map_shared_rank) between cluster.sync()s.
//
// Passes (all but the first in shared memory):
//   1. load, max, NaN flag, number of unmasked tokens       -> NaN: kArgmaxNaN; all -inf: None
//   2. p_i in place (masked: -1), and the level-0 histogram of the keys both selects start from
//   3. top-k and top-p cuts: a radix select over the 30-bit keys, 10 bits a level, no sort: each
//      level histograms the keys that match the prefix chosen so far (count, or fixed-point mass
//      p * 2^31 as two u32 atomics), the cluster adds the blocks' histograms (each block sums a
//      slice of the bins, then gathers the others' slices), and a block-wide scan from the top
//      bin finds where the running count reaches k / the running mass reaches top_p * total
//      (top-p after top-k: top_p * the top-k set's mass, one more pass).
//      After three levels the cut's key is exact; ties of p (all of one key) are taken in id
//      order by a scan of that key's positions, so the id tie-break is exact too. Masses are
//      integers, so the cut is independent of summation order (deterministic), and off the
//      host's double sums only by the 2^-31 rounding of each p.
//   4. the draw: each thread sums the kept p of a contiguous id range (double), a block scan and
//      the cluster's block sums give every range its starting sum, and the threads whose range
//      can hold the target walk it to the first running sum > target; the lowest such id wins
//      (the host's sequential walk).
// The uniform is the host's own CounterUniform (base/counter_uniform.h), p uses expf (2 ulp) where
// the host uses glibc's expf (< 1 ulp): tokens differ from the host's only when the target or a
// top-p boundary falls within a few ulps of a running sum.
//
// Cost (H200; cuda_sampling_test --gtest_also_run_disabled_tests --gtest_filter='*Bench*', which
// also prints where one block's time goes; docs/benchmarks.md). One HBM read of the rows, 4-6
// shared-memory passes, ~10 cluster barriers. 256 rows x 128256 at T 0.8 / top-p 0.9: 365 us
// (LLM-like logits) to 452 us (nearly flat); T alone 162 us; top-k 50 330 us; one row 33 us. For
// scale: their argmax takes 34 us, copying them to the host 2375 us. Short of the ~30 us aimed
// for, and not for bytes: a block is latency-bound (~31 us for one row: p + level-0 histogram
// 5 us, each radix level 4-6 us: histogram pass 2 (levels 1, 2), slice sum 1.2, bin scan 1.4,
// two cluster barriers 0.8; the draw ~5), and two blocks an SM do not hide it. More
// independent work per SM (several rows a block) and fewer barriers are the next steps.
// A +inf logit (the host's choice is then an artifact of NaN comparisons) gives p = 1 to the +inf
// entries and 0 to the rest.
#include <cooperative_groups.h>
#include <math_constants.h>

#include <algorithm>
#include <climits>
#include <mutex>

#include "backend/cuda/argmax.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/sample_rows.cuh"
#include "base/counter_uniform.h"

namespace loom::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxCluster = 8;        // the portable cluster size
constexpr int kDefaultChunk = 16384;  // logits a block aims for: 64 KB, two blocks an SM
constexpr int kMaxChunk = 46080;      // 180 KB: one block an SM with the histograms
constexpr int kRadixBits = 10;
constexpr int kBins = 1 << kRadixBits;
constexpr int kLevels = 3;  // keys < 2^30: p <= 1 has bits <= 0x3F800000
constexpr int32_t kAllIds = INT_MAX;
constexpr float kMassScale = 2147483648.0f;  // 2^31: the fixed-point mass of p in [0, 1]
constexpr int kMassLoBits = 15;        // mass = hi << 15 | lo; a block's <= 2^16 entries sum in u32
constexpr int kLevel0 = 0, kWork = 1;  // histogram sets (Shared::cnt)
static_assert(kBins == 2 * kThreads, "the bin scan gives each thread two bins");
static_assert(kMaxChunk < (1 << 16), "per-block mass sums must fit u32");

// A value reduced over a block and then over the cluster; each use names the fields it needs.
struct Partial {
  double d;
  uint64_t u;
  float f;
  int32_t i;
  int32_t j;
  uint32_t k;
};

// The last kept element of the (p desc, id asc) order: kept <=> key > key || (== and id <= id).
struct Cut {
  uint32_t key;
  int32_t id;
};

struct alignas(16) Shared {
  // This block's histograms: set kLevel0 (all unmasked entries, built with p, shared by both
  // selects) and set kWork (levels 1 and 2; its last counts also name the ties).
  uint32_t cnt[2][kBins];
  uint32_t mass_hi[2][kBins];
  uint32_t mass_lo[2][kBins];
  uint32_t row_cnt[kBins];   // the cluster's histogram: this block's slice of bins summed over
  uint64_t row_mass[kBins];  // the blocks, then the other slices gathered from their owners
  Partial warp_part[kWarps];
  Partial slot[2];  // what this block publishes to the cluster (two: alternating exchanges)
  Partial all[kMaxCluster];  // every block's published value, by rank
  double scan_d[kWarps];
  uint64_t scan_m[kWarps];
  uint32_t scan_u[kWarps];
  uint32_t tie_cnt[kMaxCluster];
  uint64_t sel_mass_before;
  uint32_t sel_bin, sel_cnt_before, sel_bin_cnt, sel_found;
  int32_t tie_id;
};
static_assert(sizeof(Shared) % 16 == 0, "the logits follow, 16-byte aligned");

__device__ __forceinline__ uint32_t KeyOf(float p) {
  return p < 0.f ? 0u : __float_as_uint(p) + 1u;
}
__device__ __forceinline__ uint32_t Fixed(float p) { return __float2uint_rn(p * kMassScale); }
__device__ __forceinline__ bool Kept(uint32_t key, int32_t id, Cut c) {
  return key > c.key || (key == c.key && id <= c.id);  // c.key >= 1: masked (0) never kept
}
__device__ __forceinline__ Cut Earlier(Cut a, Cut b) {
  return (a.key > b.key || (a.key == b.key && a.id < b.id)) ? a : b;
}

// The row's context inside one block.
struct RowCtx {
  cg::cluster_group cluster;
  Shared& sh;
  float* p;  // [len] this block's logits, then p
  int len;   // entries of this block
  int id0;   // token id of p[0]
  int seg;   // entries of each thread's contiguous id range (odd: conflict-free)
  int num_blocks;
  int rank;
  unsigned long long* stamps;  // SampleRowsTuning::stamps for the block it times, else null
  int parity = 0;              // next Shared::slot
};

// Thread 0 records when it reached point `k` (ns) in a timed block (benchmarks only).
__device__ __forceinline__ void Stamp(const RowCtx& c, int k) {
  if (c.stamps != nullptr && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    c.stamps[k] = t;
  }
}

template <typename Op>
__device__ Partial WarpReduce(Partial v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Partial w;
    w.d = __shfl_xor_sync(0xffffffffu, v.d, o);
    w.u = __shfl_xor_sync(0xffffffffu, v.u, o);
    w.f = __shfl_xor_sync(0xffffffffu, v.f, o);
    w.i = __shfl_xor_sync(0xffffffffu, v.i, o);
    w.j = __shfl_xor_sync(0xffffffffu, v.j, o);
    w.k = __shfl_xor_sync(0xffffffffu, v.k, o);
    v = op(v, w);
  }
  return v;
}

// Publishes `v` (thread 0's) and fills sh.all[0 .. num_blocks) with every block's, by rank.
__device__ void Exchange(RowCtx& c, const Partial& v) {
  if (threadIdx.x == 0) c.sh.slot[c.parity] = v;
  c.cluster.sync();
  if (static_cast<int>(threadIdx.x) < c.num_blocks) {
    c.sh.all[threadIdx.x] = *c.cluster.map_shared_rank(&c.sh.slot[c.parity], threadIdx.x);
  }
  __syncthreads();
  c.parity ^= 1;
}

// op over every thread of every block of the row, in a fixed order: the same value everywhere.
template <typename Op>
__device__ Partial RowReduce(RowCtx& c, Partial v, Op op) {
  v = WarpReduce(v, op);
  __syncthreads();  // warp_part is free
  if (threadIdx.x % 32 == 0) c.sh.warp_part[threadIdx.x / 32] = v;
  __syncthreads();
  v = c.sh.warp_part[0];
  for (int w = 1; w < kWarps; ++w) v = op(v, c.sh.warp_part[w]);
  Exchange(c, v);
  Partial r = c.sh.all[0];
  for (int b = 1; b < c.num_blocks; ++b) r = op(r, c.sh.all[b]);
  return r;
}

// Exclusive prefix sum of v over the block's threads (fixed order); *total = the block's sum.
template <typename T>
__device__ T BlockExclusiveSum(T v, T* warp_scratch, T* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  T incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T t = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += t;
  }
  T excl = __shfl_up_sync(0xffffffffu, incl, 1);
  if (lane == 0) excl = T(0);
  __syncthreads();  // warp_scratch is free
  if (lane == 31) warp_scratch[warp] = incl;
  __syncthreads();
  T before = T(0), all = T(0);
  for (int w = 0; w < kWarps; ++w) {
    if (w == warp) before = all;
    all += warp_scratch[w];
  }
  *total = all;
  return before + excl;
}

// BlockExclusiveSum of a (count, mass) pair with one pair of barriers.
__device__ void BlockExclusiveSum2(Shared& sh, uint32_t c, uint64_t m, uint32_t* c_ex,
                                   uint64_t* m_ex, uint64_t* m_total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint32_t ci = c;
  uint64_t mi = m;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t tc = __shfl_up_sync(0xffffffffu, ci, o);
    const uint64_t tm = __shfl_up_sync(0xffffffffu, mi, o);
    if (lane >= o) {
      ci += tc;
      mi += tm;
    }
  }
  __syncthreads();  // the scratch is free
  if (lane == 31) {
    sh.scan_u[warp] = ci;
    sh.scan_m[warp] = mi;
  }
  __syncthreads();
  uint32_t cb = 0;
  uint64_t mb = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) {
      cb += sh.scan_u[w];
      mb += sh.scan_m[w];
    }
    all += sh.scan_m[w];
  }
  *c_ex = cb + ci - c;  // integers: exact
  *m_ex = mb + mi - m;
  *m_total = all;
}

// The id of the need-th (1-based, id order) entry of the row whose key is `key`, given that the
// last histogram level (set kWork) counted them per block.
__device__ int32_t NthTied(RowCtx& c, uint32_t key, uint32_t need) {
  const uint32_t bin = key & (kBins - 1);
  if (threadIdx.x == 0) c.sh.tie_id = kAllIds;
  if (static_cast<int>(threadIdx.x) < c.num_blocks) {
    c.sh.tie_cnt[threadIdx.x] = c.cluster.map_shared_rank(&c.sh.cnt[kWork][0], threadIdx.x)[bin];
  }
  __syncthreads();
  uint32_t before = 0;
  for (int b = 0; b < c.rank; ++b) before += c.sh.tie_cnt[b];
  Partial r{};
  r.i = kAllIds;
  if (need > before && need <= before + c.sh.tie_cnt[c.rank]) {  // the same in the whole block
    const uint32_t local = need - before;
    const int j0 = threadIdx.x * c.seg, j1 = min(c.len, j0 + c.seg);
    uint32_t n = 0;
    for (int j = j0; j < j1; ++j) n += KeyOf(c.p[j]) == key ? 1u : 0u;
    uint32_t total;
    const uint32_t ex = BlockExclusiveSum<uint32_t>(n, c.sh.scan_u, &total);
    if (local > ex && local <= ex + n) {
      uint32_t seen = ex;
      for (int j = j0; j < j1; ++j) {
        if (KeyOf(c.p[j]) == key && ++seen == local) {
          c.sh.tie_id = c.id0 + j;
          break;
        }
      }
    }
    __syncthreads();
    r.i = c.sh.tie_id;
  }
  r = RowReduce(c, r, [](Partial a, const Partial& b) {
    a.i = min(a.i, b.i);
    return a;
  });
  return r.i;
}

// Adds entry q (key `key`, unmasked) to bin b of histogram set `set`.
__device__ __forceinline__ void Count(Shared& sh, int set, uint32_t b, float q, bool counts,
                                      bool masses) {
  if (counts) atomicAdd(&sh.cnt[set][b], 1u);
  if (masses) {
    const uint32_t f = Fixed(q);
    atomicAdd(&sh.mass_hi[set][b], f >> kMassLoBits);
    atomicAdd(&sh.mass_lo[set][b], f & ((1u << kMassLoBits) - 1));
  }
}

__device__ void ClearHistogram(Shared& sh, int set) {
  for (int b = threadIdx.x; b < kBins; b += kThreads) {
    sh.cnt[set][b] = 0;
    sh.mass_hi[set][b] = 0;
    sh.mass_lo[set][b] = 0;
  }
}

// The cut where the running count (by_mass false) reaches want_count, or the running
// fixed-point mass reaches top_p * base_mass (base_mass 0: the mass of every unmasked entry),
// walking the row's unmasked entries in (p desc, id asc) order. The level-0 histogram (set
// kLevel0, counts or masses as the mode needs) is built already. Preconditions: 1 <= want_count
// <= unmasked entries; 0 < top_p <= 1; base_mass <= the mass of every unmasked entry.
__device__ Cut Select(RowCtx& c, bool by_mass, uint32_t want_count, float top_p,
                      uint64_t base_mass) {
  Shared& sh = c.sh;
  const int slice = (kBins + c.num_blocks - 1) / c.num_blocks;
  const int s_lo = min(kBins, c.rank * slice), s_hi = min(kBins, s_lo + slice);
  uint32_t prefix = 0, above_cnt = 0, bin_cnt = 0;
  uint64_t above_mass = 0;
  double want_mass = 0.0;
  auto reached = [&](uint32_t cnt, uint64_t mass) {
    return by_mass ? static_cast<double>(above_mass + mass) >= want_mass
                   : above_cnt + cnt >= want_count;
  };
  for (int level = 0; level < kLevels; ++level) {
    const int shift = kRadixBits * (kLevels - 1 - level);
    const bool counts = !by_mass || level == kLevels - 1;  // mass mode: the ties' count at the end
    const int set = level == 0 ? kLevel0 : kWork;
    if (level > 0) {
      // Free: every block summed its slice of the last level before the last barrier.
      ClearHistogram(sh, kWork);
      __syncthreads();
      for (int i = threadIdx.x; i < c.len; i += kThreads) {
        const float q = c.p[i];
        const uint32_t key = KeyOf(q);
        if (key == 0 || (key >> (shift + kRadixBits)) != prefix) continue;
        Count(sh, kWork, (key >> shift) & (kBins - 1), q, counts, by_mass);
      }
    }
    Stamp(c, kStampSelect + 6 * level);
    c.cluster.sync();  // every block's histogram is complete
    Stamp(c, kStampSelect + 6 * level + 1);
    for (int b = s_lo + threadIdx.x; b < s_hi; b += kThreads) {
      uint32_t n = 0;
      uint64_t m = 0;
#pragma unroll 4  // the remote loads of four blocks overlap (fully unrolled, it spills)
      for (int r = 0; r < kMaxCluster; ++r) {
        if (r < c.num_blocks) {
          if (counts) n += c.cluster.map_shared_rank(&sh.cnt[set][0], r)[b];
          if (by_mass) {
            m += (uint64_t{c.cluster.map_shared_rank(&sh.mass_hi[set][0], r)[b]} << kMassLoBits) +
                 c.cluster.map_shared_rank(&sh.mass_lo[set][0], r)[b];
          }
        }
      }
      sh.row_cnt[b] = n;
      sh.row_mass[b] = m;
    }
    Stamp(c, kStampSelect + 6 * level + 2);
    c.cluster.sync();  // every slice is summed (and no block reads this level's set any more)
    Stamp(c, kStampSelect + 6 * level + 3);
    for (int b = threadIdx.x; b < kBins; b += kThreads) {
      if (b >= s_lo && b < s_hi) continue;  // others read only this block's own slice
      const int owner = b / slice;
      sh.row_cnt[b] = c.cluster.map_shared_rank(&sh.row_cnt[0], owner)[b];
      sh.row_mass[b] = c.cluster.map_shared_rank(&sh.row_mass[0], owner)[b];
    }
    if (threadIdx.x == 0) sh.sel_found = 0;
    __syncthreads();
    Stamp(c, kStampSelect + 6 * level + 4);
    // From the top bin down: thread t holds bins hi = kBins - 1 - 2t and hi - 1.
    const int hi = kBins - 1 - 2 * static_cast<int>(threadIdx.x);
    const uint32_t c_hi = sh.row_cnt[hi], c_lo = sh.row_cnt[hi - 1];
    const uint64_t m_hi = sh.row_mass[hi], m_lo = sh.row_mass[hi - 1];
    uint32_t c_ex;
    uint64_t m_ex, m_total;
    BlockExclusiveSum2(sh, c_hi + c_lo, m_hi + m_lo, &c_ex, &m_ex, &m_total);
    if (level == 0 && by_mass) {
      // The level-0 histogram holds every unmasked entry: m_total is their mass.
      want_mass =
          static_cast<double>(top_p) * static_cast<double>(base_mass != 0 ? base_mass : m_total);
    }
    if (!reached(c_ex, m_ex) && reached(c_ex + c_hi + c_lo, m_ex + m_hi + m_lo)) {
      const bool in_hi = reached(c_ex + c_hi, m_ex + m_hi);  // exactly one thread gets here
      sh.sel_bin = in_hi ? hi : hi - 1;
      sh.sel_cnt_before = in_hi ? c_ex : c_ex + c_hi;
      sh.sel_mass_before = in_hi ? m_ex : m_ex + m_hi;
      sh.sel_bin_cnt = in_hi ? c_hi : c_lo;
      sh.sel_found = 1;
    }
    __syncthreads();
    Stamp(c, kStampSelect + 6 * level + 5);
    if (sh.sel_found == 0) return Cut{1u, kAllIds};  // unreachable (preconditions): keep all
    above_cnt += sh.sel_cnt_before;
    above_mass += sh.sel_mass_before;
    prefix = (prefix << kRadixBits) | sh.sel_bin;
    bin_cnt = sh.sel_bin_cnt;
  }
  // `prefix` is the cut's key; bin_cnt entries share it (and their p). Keep the first `need`.
  uint32_t need;
  if (!by_mass) {
    need = want_count - above_cnt;
  } else {
    const uint64_t f = Fixed(__uint_as_float(prefix - 1u));
    if (f == 0) {
      need = bin_cnt;
    } else {
      const double rest = want_mass - static_cast<double>(above_mass);
      need = static_cast<uint32_t>(min(static_cast<double>(bin_cnt), max(1.0, ceil(rest / f))));
      while (need > 1 && static_cast<double>(above_mass + (need - 1) * f) >= want_mass) --need;
      while (need < bin_cnt && static_cast<double>(above_mass + need * f) < want_mass) ++need;
    }
  }
  if (need >= bin_cnt) return Cut{prefix, kAllIds};
  return Cut{prefix, NthTied(c, prefix, need)};
}

// Grid: one cluster of num_blocks blocks per task (cluster rank = the block's chunk of the row).
__global__ void __launch_bounds__(kThreads, 2)
    SampleRowsKernel(const float* __restrict__ x, int64_t vocab, int chunk, int seg,
                     const DrawTask* __restrict__ tasks, int32_t* __restrict__ out,
                     unsigned long long* stamps) {
  extern __shared__ __align__(16) unsigned char smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int num_blocks = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t task_idx = blockIdx.x / num_blocks;
  const DrawTask task = tasks[task_idx];
  const DrawParams& dp = task.params;
  const int64_t begin = int64_t{rank} * chunk;
  const int64_t rest = vocab - begin;
  const int len = rest <= 0 ? 0 : rest < chunk ? static_cast<int>(rest) : chunk;
  RowCtx c{cluster,
           *reinterpret_cast<Shared*>(smem),
           reinterpret_cast<float*>(smem + sizeof(Shared)),
           len,
           static_cast<int>(begin),
           seg,
           num_blocks,
           rank,
           task_idx == 0 && rank == 0 ? stamps : nullptr};
  float* p = c.p;
  Stamp(c, kStampStart);

  // 1. Load (streaming: each logit is read once from HBM), max, NaN, unmasked count.
  const float* src = x + int64_t{task.row} * vocab + begin;
  float mx = -CUDART_INF_F;
  int nan = 0;
  uint32_t unmasked = 0;
  auto visit = [&](float l) {
    mx = l > mx ? l : mx;
    nan |= l != l ? 1 : 0;
    unmasked += l != -CUDART_INF_F ? 1u : 0u;
  };
  int scalar_from = 0;
  if (reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    // Four 16-byte loads in flight per thread before any is used.
    constexpr int kUnroll = 4;
    const int num_vec = len / 4;
    const float4* src4 = reinterpret_cast<const float4*>(src);
    float4* p4 = reinterpret_cast<float4*>(p);
    for (int v0 = threadIdx.x; v0 < num_vec; v0 += kUnroll * kThreads) {
      float4 q[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (v0 + u * kThreads < num_vec) q[u] = __ldcs(src4 + v0 + u * kThreads);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (v0 + u * kThreads < num_vec) {
          p4[v0 + u * kThreads] = q[u];
          visit(q[u].x);
          visit(q[u].y);
          visit(q[u].z);
          visit(q[u].w);
        }
      }
    }
    scalar_from = num_vec * 4;
  }
  for (int i = scalar_from + threadIdx.x; i < len; i += kThreads) {
    const float l = __ldcs(src + i);
    p[i] = l;
    visit(l);
  }
  Stamp(c, kStampLoaded);
  Partial v{};
  v.f = mx;
  v.i = nan;
  v.k = unmasked;
  const Partial row = RowReduce(c, v, [](Partial a, const Partial& b) {
    a.f = b.f > a.f ? b.f : a.f;
    a.i |= b.i;
    a.k += b.k;
    return a;
  });
  if (row.i != 0 || row.f == -CUDART_INF_F) {
    if (rank == 0 && threadIdx.x == 0) out[task_idx] = row.i != 0 ? kArgmaxNaN : kArgmaxNone;
    cluster.sync();  // no block leaves while another may still read its shared memory
    return;
  }

  Stamp(c, kStampMax);
  // 2. p in place (masked entries: -1, key 0), and the level-0 histogram the cuts start from.
  const bool top_k_on = dp.top_k > 0 && static_cast<uint32_t>(dp.top_k) < row.k;
  const bool top_p_on = dp.top_p < 1.0f;
  ClearHistogram(c.sh, kLevel0);
  __syncthreads();
  const float row_max = row.f;
  const float inv_t = 1.0f / dp.temperature;  // as the host: (logit - max) * (1 / T)
  const bool inf_max = row_max == CUDART_INF_F;
  for (int i = threadIdx.x; i < len; i += kThreads) {
    const float l = p[i];
    float q;
    if (l == -CUDART_INF_F) {
      q = -1.0f;
    } else if (inf_max) {
      q = l == row_max ? 1.0f : 0.0f;
    } else {
      q = expf((l - row_max) * inv_t);
    }
    p[i] = q;
    if (q >= 0.f && (top_k_on || top_p_on)) {
      Count(c.sh, kLevel0, KeyOf(q) >> (kRadixBits * (kLevels - 1)), q, top_k_on, top_p_on);
    }
  }
  __syncthreads();
  Stamp(c, kStampP);

  // 3. The cut: top-k, then top-p over the top-k set's mass, then min-p.
  Cut cut{1u, kAllIds};
  if (top_k_on) cut = Select(c, /*by_mass=*/false, static_cast<uint32_t>(dp.top_k), 1.0f, 0);
  if (top_p_on) {
    uint64_t base = 0;  // 0: every unmasked entry's mass (the level-0 histogram's)
    if (top_k_on) {
      uint64_t mass = 0;
      for (int i = threadIdx.x; i < len; i += kThreads) {
        if (Kept(KeyOf(p[i]), c.id0 + i, cut)) mass += Fixed(p[i]);
      }
      Partial m{};
      m.u = mass;
      base = RowReduce(c, m, [](Partial a, const Partial& b) {
               a.u += b.u;
               return a;
             }).u;
    }
    cut = Earlier(cut, Select(c, /*by_mass=*/true, 0, dp.top_p, base));
  }
  if (dp.min_p > 0.0f) cut = Earlier(cut, Cut{KeyOf(dp.min_p * 1.0f), kAllIds});

  // 4. The draw: inverse CDF in id order over the kept entries.
  const int j0 = threadIdx.x * seg, j1 = min(len, j0 + seg);
  double range_sum = 0.0;
  int32_t last_kept = -1;
  for (int j = j0; j < j1; ++j) {
    const float q = p[j];
    if (Kept(KeyOf(q), c.id0 + j, cut)) {
      range_sum += q;
      last_kept = c.id0 + j;
    }
  }
  Stamp(c, kStampRanges);
  double block_sum;
  const double range_before = BlockExclusiveSum<double>(range_sum, c.sh.scan_d, &block_sum);
  Partial s{};
  s.d = block_sum;
  Exchange(c, s);
  Stamp(c, kStampScanned);
  double kept_total = 0.0, block_before = 0.0;
  for (int b = 0; b < num_blocks; ++b) {
    if (b == rank) block_before = kept_total;
    kept_total += c.sh.all[b].d;
  }
  const double target = CounterUniform(dp.seed, dp.step, /*stream=*/0) * kept_total;
  double cum = block_before + range_before;
  int32_t found = kAllIds;
  // A range whose end stays below the target by more than its rounding (~seg ulps of the total)
  // cannot hold the crossing: skip its walk. The others walk to their first running sum above
  // the target (a range starting above it: its first kept entry); the lowest id wins below.
  if (cum + range_sum >= target - 1e-12 * kept_total) {
    for (int j = j0; j < j1; ++j) {
      const float q = p[j];
      if (!Kept(KeyOf(q), c.id0 + j, cut)) continue;
      cum += q;
      if (cum > target) {
        found = c.id0 + j;
        break;
      }
    }
  }
  Stamp(c, kStampWalked);
  Partial f{};
  f.i = found;
  f.j = last_kept;
  const Partial pick = RowReduce(c, f, [](Partial a, const Partial& b) {
    a.i = min(a.i, b.i);
    a.j = max(a.j, b.j);
    return a;
  });
  if (rank == 0 && threadIdx.x == 0) out[task_idx] = pick.i != kAllIds ? pick.i : pick.j;
  Stamp(c, kStampPicked);
  cluster.sync();  // no block leaves while another may still read its shared memory
  Stamp(c, kStampEnd);
}

struct Plan {
  int num_blocks;  // per row (the cluster size)
  int chunk;       // logits per block, a multiple of 4
};

Plan PlanFor(int64_t vocab, int chunk_target) {
  const int64_t target = chunk_target > 0 ? chunk_target : kDefaultChunk;
  int64_t blocks = std::clamp<int64_t>((vocab + target - 1) / target, 1, kMaxCluster);
  int64_t chunk = (vocab + blocks - 1) / blocks;
  chunk = (chunk + 3) / 4 * 4;
  blocks = (vocab + chunk - 1) / chunk;  // rounding the chunk up may leave fewer, none empty
  return Plan{static_cast<int>(blocks), static_cast<int>(chunk)};
}

size_t SmemBytes(int chunk) { return sizeof(Shared) + static_cast<size_t>(chunk) * sizeof(float); }

}  // namespace

int64_t SampleRowsMaxVocab() { return int64_t{kMaxCluster} * kMaxChunk; }

void LaunchSampleRows(const float* x, int64_t vocab, const DrawTask* tasks, int64_t n, int32_t* out,
                      cudaStream_t stream, const SampleRowsTuning& tuning) {
  if (n == 0) return;
  CHECK(vocab > 0 && vocab <= SampleRowsMaxVocab()) << "SampleRows: vocab " << vocab;
  const Plan plan = PlanFor(vocab, tuning.chunk_target);
  CHECK(plan.chunk <= kMaxChunk) << "SampleRows: chunk " << plan.chunk;
  CHECK_LE(n * plan.num_blocks, int64_t{INT_MAX}) << "SampleRows: too many rows";
  static std::once_flag attribute_set;
  std::call_once(attribute_set, [] {
    CUDA_CHECK(cudaFuncSetAttribute(SampleRowsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(SmemBytes(kMaxChunk))));
  });
  const int seg = ((plan.chunk + kThreads - 1) / kThreads) | 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(n * plan.num_blocks));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = SmemBytes(plan.chunk);
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(plan.num_blocks);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&config, SampleRowsKernel, x, vocab, plan.chunk, seg, tasks, out,
                                tuning.stamps));
}

}  // namespace loom::cuda
