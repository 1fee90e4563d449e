#include <mma.h>

#include <algorithm>
#include <climits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/moe.cuh"

namespace loom::cuda {
namespace {

using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;

constexpr int kRouteWarps = 4;  // rows a routing block takes, one a warp
constexpr int kBN = 64;         // GEMM tile columns: 4 warps of 16
constexpr int kBK = 32;         // GEMM k step staged in shared memory
constexpr int kGemmThreads = 128;
constexpr int64_t kFusedRouteRows = 512;  // steps of up to this many rows route in one block

// The better of two (logit, expert) candidates: a real expert over none, then the larger
// logit, then the lower index (Backend::RouteExperts).
__device__ __forceinline__ bool Better(float v, int e, float best, int best_e) {
  if (best_e == INT_MAX) return e != INT_MAX;
  if (e == INT_MAX) return false;
  return v > best || (v == best && e < best_e);
}

// One row's routing by one warp: ids / weights [top_k] of the row, each choice counted in
// counts (shared or global memory).
template <typename T>
__device__ void RouteRow(const T* l, int num_experts, int top_k, bool norm, int32_t* ids,
                         float* weights, int32_t* counts) {
  const int lane = threadIdx.x % 32;
  float mx = -INFINITY;
  for (int e = lane; e < num_experts; e += 32) mx = fmaxf(mx, ToF32(l[e]));
  mx = WarpMax(mx);
  float sum = 0.f;
  for (int e = lane; e < num_experts; e += 32) sum += expf(ToF32(l[e]) - mx);
  sum = WarpSum(sum);
  uint32_t taken = 0;  // bit i: expert lane + 32 i is chosen (E <= 1024)
  float chosen = 0.f;
  for (int j = 0; j < top_k; ++j) {
    float best = -INFINITY;
    int best_e = INT_MAX;
    for (int i = 0, e = lane; e < num_experts; ++i, e += 32) {
      const float v = ToF32(l[e]);
      if (!((taken >> i) & 1u) && Better(v, e, best, best_e)) {
        best = v;
        best_e = e;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float v = __shfl_xor_sync(0xffffffffu, best, o);
      const int e = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (Better(v, e, best, best_e)) {
        best = v;
        best_e = e;
      }
    }
    if (best_e == INT_MAX) best_e = 0;  // no expert left: only with top_k > E (refused)
    if (lane == best_e % 32) taken |= 1u << (best_e / 32);
    const float p = expf(best - mx) / sum;
    chosen += p;
    if (lane == 0) {
      ids[j] = best_e;
      weights[j] = p;
      atomicAdd(&counts[best_e], 1);
    }
  }
  if (norm && lane == 0) {
    for (int j = 0; j < top_k; ++j) weights[j] /= chosen;
  }
}

template <typename T>
__global__ void RouteKernel(const T* logits, int64_t n, int num_experts, int top_k, bool norm,
                            int32_t* ids, float* weights, int32_t* counts) {
  const int64_t row = int64_t{blockIdx.x} * kRouteWarps + threadIdx.x / 32;
  if (row >= n) return;
  RouteRow(logits + row * num_experts, num_experts, top_k, norm, ids + row * top_k,
           weights + row * top_k, counts);
}

// Segment and tile offsets from the counts (staged in shared memory) and every segment's cursor
// at its start: warp 0, each lane a run of E / 32 experts, one warp scan.
__device__ void PlanSegments(int num_experts, int tile_rows, const int32_t* counts, int32_t* cursor,
                             int32_t* offsets, int32_t* tile_offsets) {
  if (threadIdx.x >= 32) return;
  const int lane = static_cast<int>(threadIdx.x);
  const int per = (num_experts + 31) / 32;
  const int begin = min(num_experts, lane * per), end = min(num_experts, begin + per);
  int32_t pos = 0, tiles = 0;
  for (int e = begin; e < end; ++e) {
    pos += counts[e];
    tiles += (counts[e] + tile_rows - 1) / tile_rows;
  }
  int32_t pos_incl = pos, tiles_incl = tiles;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t p = __shfl_up_sync(0xffffffffu, pos_incl, o);
    const int32_t t = __shfl_up_sync(0xffffffffu, tiles_incl, o);
    if (lane >= o) {
      pos_incl += p;
      tiles_incl += t;
    }
  }
  pos = pos_incl - pos;
  tiles = tiles_incl - tiles;
  for (int e = begin; e < end; ++e) {
    offsets[e] = pos;
    cursor[e] = pos;
    tile_offsets[e] = tiles;
    pos += counts[e];
    tiles += (counts[e] + tile_rows - 1) / tile_rows;
  }
  if (lane == 31) {
    offsets[num_experts] = pos_incl;
    tile_offsets[num_experts] = tiles_incl;
  }
}

__global__ void PlanKernel(int num_experts, int tile_rows, const int32_t* counts, int32_t* cursor,
                           int32_t* offsets, int32_t* tile_offsets) {
  __shared__ int32_t s_counts[kMoeMaxExperts];
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) s_counts[e] = counts[e];
  __syncthreads();
  PlanSegments(num_experts, tile_rows, s_counts, cursor, offsets, tile_offsets);
}

// Steps 1 and 2 in one block, for steps of few rows (decode): counts and cursors in shared
// memory, one warp a row.
template <typename T>
__global__ void __launch_bounds__(1024)
    RoutePlanKernel(const T* logits, int64_t n, int num_experts, int top_k, bool norm,
                    int tile_rows, int32_t* ids, float* weights, int32_t* offsets,
                    int32_t* tile_offsets, int32_t* slot_pos, int32_t* sorted_rows) {
  __shared__ int32_t s_counts[kMoeMaxExperts], s_cursor[kMoeMaxExperts];
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) s_counts[e] = 0;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x / 32);
  for (int64_t row = threadIdx.x / 32; row < n; row += warps) {
    RouteRow(logits + row * num_experts, num_experts, top_k, norm, ids + row * top_k,
             weights + row * top_k, s_counts);
  }
  __syncthreads();
  PlanSegments(num_experts, tile_rows, s_counts, s_cursor, offsets, tile_offsets);
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n * top_k; i += blockDim.x) {
    const int32_t pos = atomicAdd(&s_cursor[ids[i]], 1);
    slot_pos[i] = pos;
    sorted_rows[pos] = static_cast<int32_t>(i / top_k);
  }
}

__global__ void PlaceKernel(const int32_t* ids, int64_t pairs, int top_k, int32_t* cursor,
                            int32_t* slot_pos, int32_t* sorted_rows) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < pairs;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int32_t pos = atomicAdd(&cursor[ids[i]], 1);
    slot_pos[i] = pos;
    sorted_rows[pos] = static_cast<int32_t>(i / top_k);
  }
}

// Grouped GEMM over expert segments. Block (x, y): columns [64 x, 64 x + 64) of tile y, whose
// expert is the last e with tile_offsets[e] <= y. A row of the tile is position p of the sorted
// order; its input row is a[a_rows[p]] (a_rows null: a[p]). Gated: out[p] (bf16) = act(a w0^T) *
// (a w1^T); else out[p] (f32) = a w0^T. Weights: [E, N, K] row-major, read straight from global
// memory as col-major B fragments; the tile's input rows are staged in shared memory.
template <bool kGated, int BM>
__global__ void __launch_bounds__(kGemmThreads)
    GroupedGemmKernel(const bf16* a, const int32_t* a_rows, const bf16* w0, const bf16* w1,
                      const int32_t* offsets, const int32_t* tile_offsets, int num_experts,
                      int64_t N, int64_t K, MoeEpilogue ep, void* out) {
  constexpr int kFrags = BM / 16;
  const int tile = static_cast<int>(blockIdx.y);
  if (tile >= tile_offsets[num_experts]) return;
  const int e = SequenceOfTile(tile_offsets, num_experts, tile);
  const int row0 = offsets[e] + (tile - tile_offsets[e]) * BM;
  const int rows = min(BM, offsets[e + 1] - row0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n0 = int64_t{blockIdx.x} * kBN + warp * 16;
  const bool active = n0 < N;  // N is a multiple of 16: a warp's columns are all in or all out

  __shared__ __align__(32) bf16 sa[BM * kBK];
  __shared__ __align__(32) float so[kGated ? 2 : 1][kGemmThreads / 32][BM * 16];
  __shared__ int64_t src[BM];
  if (threadIdx.x < BM) {
    const int r = threadIdx.x;
    src[r] = r < rows ? (a_rows != nullptr ? a_rows[row0 + r] : row0 + r) : -1;
  }

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc0[kFrags], acc1[kGated ? kFrags : 1];
#pragma unroll
  for (int f = 0; f < kFrags; ++f) {
    wmma::fill_fragment(acc0[f], 0.f);
    if constexpr (kGated) wmma::fill_fragment(acc1[f], 0.f);
  }
  const bf16* b0 = w0 + (int64_t{e} * N + (active ? n0 : 0)) * K;
  const bf16* b1 = kGated ? w1 + (int64_t{e} * N + (active ? n0 : 0)) * K : nullptr;
  __syncthreads();

  for (int64_t k0 = 0; k0 < K; k0 += kBK) {
    // The tile's inputs, 8 bf16 (16 bytes) a load; rows past the segment and k past K are zero.
    for (int v = threadIdx.x; v < BM * (kBK / 8); v += kGemmThreads) {
      const int r = v / (kBK / 8), c = (v % (kBK / 8)) * 8;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (src[r] >= 0 && k0 + c < K) {
        val = *reinterpret_cast<const uint4*>(a + src[r] * K + k0 + c);
      }
      *reinterpret_cast<uint4*>(sa + r * kBK + c) = val;
    }
    __syncthreads();
    if (active) {
      for (int kk = 0; kk < kBK && k0 + kk < K; kk += 16) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb0, fb1;
        wmma::load_matrix_sync(fb0, b0 + k0 + kk, static_cast<unsigned>(K));
        if constexpr (kGated) wmma::load_matrix_sync(fb1, b1 + k0 + kk, static_cast<unsigned>(K));
#pragma unroll
        for (int f = 0; f < kFrags; ++f) {
          if (f * 16 >= rows) break;  // fragments of rows past the segment: all zero
          wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
          wmma::load_matrix_sync(fa, sa + f * 16 * kBK + kk, kBK);
          wmma::mma_sync(acc0[f], fa, fb0, acc0[f]);
          if constexpr (kGated) wmma::mma_sync(acc1[f], fa, fb1, acc1[f]);
        }
      }
    }
    __syncthreads();
  }
  if (!active) return;

  float* s0 = so[0][warp];
#pragma unroll
  for (int f = 0; f < kFrags; ++f) {
    wmma::store_matrix_sync(s0 + f * 256, acc0[f], 16, wmma::mem_row_major);
    if constexpr (kGated)
      wmma::store_matrix_sync(so[1][warp] + f * 256, acc1[f], 16, wmma::mem_row_major);
  }
  __syncwarp();
  for (int i = lane; i < rows * 16; i += 32) {
    const int r = i / 16, c = i % 16;
    const int64_t dst = (row0 + r) * N + n0 + c;
    if constexpr (kGated) {
      const float v = ep.Gated(s0[i], so[1][warp][i], e, N, n0 + c);
      static_cast<bf16*>(out)[dst] = __float2bfloat16_rn(v);
    } else {
      static_cast<float*>(out)[dst] = ep.Plain(s0[i], e, N, n0 + c);
    }
  }
}

// The same products for tiles of at most kGemvRows positions (decode, small batches), as GEMVs:
// each warp owns output columns (weight rows) and reads them once a tile in 16-byte vectors for
// every position of the tile; the tile's input rows are few and come through the caches. A warp
// streams two weight rows at once: the gate and up rows of one column (kGated), or the rows of
// two adjacent columns (the down projection: one row alone left a lane one load in flight, and
// the H100 read down's weights at 1.24 TB/s against gate/up's 1.87). Each output's arithmetic
// is the same either way (a lane's products in order, then the warp sum). Grid (N / (kGemvWarps
// x columns a warp), tiles); the same tile numbering as above with tile_rows = kGemvRows.
constexpr int kGemvRows = 16;
constexpr int kGemvWarps = 8;

template <bool kGated>
__host__ __device__ constexpr int GemvColsPerWarp() {
  return kGated ? 1 : 2;
}

// kRows: the most positions one expert's segment can hold at this step (min(16, tokens): a token
// picks distinct experts), what the accumulators are sized for. With few of them a lane has
// registers to spare, so it issues the loads of kUnroll vectors (and at kRows 1 the input's too)
// before their products: at batch 1 one vector at a time kept too few bytes in flight to stream
// the experts' weights at HBM speed. The products are accumulated in the same order whatever
// kRows and kUnroll are, so every instantiation gives the same bits.
template <bool kGated, int kRows>
__global__ void __launch_bounds__(kGemvWarps * 32)
    GroupedGemvKernel(const bf16* a, const int32_t* a_rows, const bf16* w0, const bf16* w1,
                      const int32_t* offsets, const int32_t* tile_offsets, int num_experts,
                      int64_t N, int64_t K, MoeEpilogue ep, void* out) {
  constexpr int kUnroll = kRows == 1 ? 4 : kRows <= 4 ? 2 : 1;
  const int tile = static_cast<int>(blockIdx.y);
  if (tile >= tile_offsets[num_experts]) return;
  const int e = SequenceOfTile(tile_offsets, num_experts, tile);
  const int row0 = offsets[e] + (tile - tile_offsets[e]) * kGemvRows;
  const int rows = min(kRows, offsets[e + 1] - row0);  // the launch guarantees <= kRows
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t col = (int64_t{blockIdx.x} * kGemvWarps + warp) * GemvColsPerWarp<kGated>();
  if (col >= N) return;  // N % 16 == 0 (checked at launch): a warp's two columns are both in
  const auto* wv0 = reinterpret_cast<const uint4*>(w0 + (int64_t{e} * N + col) * K);
  const auto* wv1 = reinterpret_cast<const uint4*>(kGated ? w1 + (int64_t{e} * N + col) * K
                                                          : w0 + (int64_t{e} * N + col + 1) * K);
  const uint4* xv[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t src = r < rows ? (a_rows != nullptr ? a_rows[row0 + r] : row0 + r) : 0;
    xv[r] = reinterpret_cast<const uint4*>(a + src * K);
  }
  float acc0[kRows] = {}, acc1[kRows] = {};
  const int64_t vecs = K / 8;
#pragma unroll(kUnroll == 1 ? 2 : 1)
  for (int64_t v0 = lane; v0 < vecs; v0 += 32 * kUnroll) {
    uint4 w0r[kUnroll] = {}, w1r[kUnroll] = {}, x0r[kUnroll] = {};
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = v0 + 32 * u;
      if (v >= vecs) break;
      w0r[u] = wv0[v];
      w1r[u] = wv1[v];
      if constexpr (kRows == 1) x0r[u] = xv[0][v];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = v0 + 32 * u;
      if (v >= vecs) break;
      float wf0[8], wf1[8];
      UnpackBf16x8(w0r[u], wf0);
      UnpackBf16x8(w1r[u], wf1);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= rows) break;
        float xf[8];
        UnpackBf16x8(kRows == 1 ? x0r[u] : xv[r][v], xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          acc0[r] = fmaf(wf0[i], xf[i], acc0[r]);
          acc1[r] = fmaf(wf1[i], xf[i], acc1[r]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r >= rows) break;
    const float g = WarpSum(acc0[r]);
    const float u = WarpSum(acc1[r]);
    const int64_t dst = (row0 + r) * N + col;
    if (lane != 0) continue;
    if constexpr (kGated) {
      static_cast<bf16*>(out)[dst] = __float2bfloat16_rn(ep.Gated(g, u, e, N, col));
    } else {
      static_cast<float*>(out)[dst] = ep.Plain(g, e, N, col);
      static_cast<float*>(out)[dst + 1] = ep.Plain(u, e, N, col + 1);
    }
  }
}

__global__ void CombineKernel(const float* y, const int32_t* slot_pos, const float* weights,
                              int top_k, int64_t hidden, const bf16* shared,
                              const bf16* shared_gate, bf16* out) {
  const int64_t row = blockIdx.y;
  float gate = 0.f;
  if (shared != nullptr) gate = 1.f / (1.f + expf(-ToF32(shared_gate[row])));
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < hidden;
       c += int64_t{gridDim.x} * blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < top_k; ++j) {
      const int64_t s = row * top_k + j;
      acc += weights[s] * y[int64_t{slot_pos[s]} * hidden + c];
    }
    if (shared != nullptr) acc += gate * ToF32(shared[row * hidden + c]);
    out[row * hidden + c] = __float2bfloat16_rn(acc);
  }
}

int64_t MaxTiles(int64_t pairs, int num_experts, int tile_rows) {
  return (pairs + tile_rows - 1) / tile_rows + std::min<int64_t>(num_experts, pairs);
}

template <bool kGated>
void LaunchGroupedGemm(const bf16* a, const int32_t* a_rows, const bf16* w0, const bf16* w1,
                       const MoeWorkspace& ws, int64_t pairs, int num_experts, MoeTiling tiling,
                       int64_t N, int64_t K, MoeEpilogue ep, void* out, cudaStream_t stream) {
  const int tile_rows = tiling.tile_rows;
  CHECK(N % 16 == 0 && K % 16 == 0)
      << "MoE GEMM: N " << N << " and K " << K << " must be multiples of 16";
  const int64_t tiles = MaxTiles(pairs, num_experts, tile_rows);
  CHECK_LE(tiles, 65535) << "MoE GEMM: too many tiles";
  const dim3 grid(static_cast<unsigned>((N + kBN - 1) / kBN), static_cast<unsigned>(tiles));
  if (tiling.gemv) {
    CHECK_EQ(tile_rows, kGemvRows);
    const int64_t warps = N / GemvColsPerWarp<kGated>();
    const dim3 gemv_grid(static_cast<unsigned>((warps + kGemvWarps - 1) / kGemvWarps),
                         static_cast<unsigned>(tiles));
    CHECK(tiling.max_rows >= 1 && tiling.max_rows <= kGemvRows) << "MoE GEMV: max_rows";
    const auto launch = [&](auto kernel) {
      kernel<<<gemv_grid, kGemvWarps * 32, 0, stream>>>(
          a, a_rows, w0, w1, ws.offsets, ws.tile_offsets, num_experts, N, K, ep, out);
    };
    if (tiling.max_rows == 1) {
      launch(GroupedGemvKernel<kGated, 1>);
    } else if (tiling.max_rows <= 4) {
      launch(GroupedGemvKernel<kGated, 4>);
    } else {
      launch(GroupedGemvKernel<kGated, kGemvRows>);
    }
  } else if (tile_rows == 16) {
    GroupedGemmKernel<kGated, 16><<<grid, kGemmThreads, 0, stream>>>(
        a, a_rows, w0, w1, ws.offsets, ws.tile_offsets, num_experts, N, K, ep, out);
  } else {
    CHECK_EQ(tile_rows, 64);
    GroupedGemmKernel<kGated, 64><<<grid, kGemmThreads, 0, stream>>>(
        a, a_rows, w0, w1, ws.offsets, ws.tile_offsets, num_experts, N, K, ep, out);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

int64_t MoeWorkspaceInts(int64_t n, int top_k, int num_experts) {
  return 4 * int64_t{num_experts} + 2 + 2 * n * top_k;
}

MoeWorkspace MoeWorkspaceAt(int32_t* ints, float* weights, int64_t n, int top_k, int num_experts) {
  MoeWorkspace ws;
  ws.counts = ints;
  ws.cursor = ws.counts + num_experts;
  ws.offsets = ws.cursor + num_experts;
  ws.tile_offsets = ws.offsets + num_experts + 1;
  ws.slot_pos = ws.tile_offsets + num_experts + 1;
  ws.sorted_rows = ws.slot_pos + n * top_k;
  ws.weights = weights;
  return ws;
}

MoeTiling MoeTilingFor(int64_t n, int top_k, int num_experts) {
  const int64_t pairs = n * top_k;
  // H100, Qwen3-30B-A3B shapes: at batch 1 (8 pairs over 128 experts) the GEMVs decode 1.9x
  // faster than 16-row tensor-core tiles, at batch 64 (4 pairs an expert) 0.63x.
  MoeTiling t;
  t.gemv = pairs <= 2 * int64_t{num_experts};
  t.tile_rows = pairs <= int64_t{16} * num_experts ? 16 : 64;
  t.max_rows = static_cast<int>(std::min<int64_t>(n, t.tile_rows));
  return t;
}

void LaunchMoeRoute(const void* logits, DType logits_dtype, int64_t n, int num_experts, int top_k,
                    bool norm_topk_prob, int tile_rows, int32_t* expert_ids, const MoeWorkspace& ws,
                    cudaStream_t stream) {
  CHECK(num_experts >= 1 && num_experts <= kMoeMaxExperts && top_k >= 1 && top_k <= num_experts)
      << "MoE routing: top " << top_k << " of " << num_experts << " experts";
  if (n == 0) return;
  const bool bf16_logits = logits_dtype == DType::kBF16;
  CHECK(bf16_logits || logits_dtype == DType::kF32) << "MoE routing: logits must be bf16 or f32";
  if (n <= kFusedRouteRows) {
    if (bf16_logits) {
      RoutePlanKernel<<<1, 1024, 0, stream>>>(
          static_cast<const bf16*>(logits), n, num_experts, top_k, norm_topk_prob, tile_rows,
          expert_ids, ws.weights, ws.offsets, ws.tile_offsets, ws.slot_pos, ws.sorted_rows);
    } else {
      RoutePlanKernel<<<1, 1024, 0, stream>>>(
          static_cast<const float*>(logits), n, num_experts, top_k, norm_topk_prob, tile_rows,
          expert_ids, ws.weights, ws.offsets, ws.tile_offsets, ws.slot_pos, ws.sorted_rows);
    }
    CUDA_CHECK_LAUNCH();
    return;
  }
  CUDA_CHECK(cudaMemsetAsync(ws.counts, 0, sizeof(int32_t) * num_experts, stream));
  const unsigned blocks = static_cast<unsigned>((n + kRouteWarps - 1) / kRouteWarps);
  if (bf16_logits) {
    RouteKernel<<<blocks, 32 * kRouteWarps, 0, stream>>>(static_cast<const bf16*>(logits), n,
                                                         num_experts, top_k, norm_topk_prob,
                                                         expert_ids, ws.weights, ws.counts);
  } else {
    RouteKernel<<<blocks, 32 * kRouteWarps, 0, stream>>>(static_cast<const float*>(logits), n,
                                                         num_experts, top_k, norm_topk_prob,
                                                         expert_ids, ws.weights, ws.counts);
  }
  CUDA_CHECK_LAUNCH();
  PlanKernel<<<1, 1024, 0, stream>>>(num_experts, tile_rows, ws.counts, ws.cursor, ws.offsets,
                                     ws.tile_offsets);
  CUDA_CHECK_LAUNCH();
  const int64_t pairs = n * top_k;
  PlaceKernel<<<BlocksFor(pairs, 256, 1024), 256, 0, stream>>>(expert_ids, pairs, top_k, ws.cursor,
                                                               ws.slot_pos, ws.sorted_rows);
  CUDA_CHECK_LAUNCH();
}

void LaunchMoeGateUp(const bf16* x, const bf16* w_gate, const bf16* w_up, const MoeWorkspace& ws,
                     int64_t pairs, int num_experts, MoeTiling tiling, int64_t f, int64_t hidden,
                     const MoeEpilogue& ep, bf16* h, cudaStream_t stream) {
  if (pairs == 0) return;
  LaunchGroupedGemm<true>(x, ws.sorted_rows, w_gate, w_up, ws, pairs, num_experts, tiling, f,
                          hidden, ep, h, stream);
}

void LaunchMoeDown(const bf16* h, const bf16* w_down, const float* b_down, const MoeWorkspace& ws,
                   int64_t pairs, int num_experts, MoeTiling tiling, int64_t hidden, int64_t f,
                   float* y, cudaStream_t stream) {
  if (pairs == 0) return;
  MoeEpilogue ep;
  ep.bias0 = b_down;
  LaunchGroupedGemm<false>(h, nullptr, w_down, nullptr, ws, pairs, num_experts, tiling, hidden, f,
                           ep, y, stream);
}

void LaunchMoeCombine(const float* y, const MoeWorkspace& ws, int64_t n, int top_k, int64_t hidden,
                      const bf16* shared, const bf16* shared_gate, bf16* out, cudaStream_t stream) {
  if (n == 0) return;
  CHECK_LE(n, 65535) << "MoE combine: too many rows";
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((hidden + 255) / 256, 16)),
                  static_cast<unsigned>(n));
  CombineKernel<<<grid, 256, 0, stream>>>(y, ws.slot_pos, ws.weights, top_k, hidden, shared,
                                          shared_gate, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace loom::cuda
