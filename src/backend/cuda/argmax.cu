#include <math_constants.h>

#include <algorithm>
#include <climits>
#include <type_traits>

#include "backend/cuda/argmax.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/ktrace.cuh"
#include "backend/cuda/launch.cuh"

namespace loom::cuda {
LOOM_KTRACE_TU(argmax)
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMinChunk = 4096;  // entries a block reduces at least (4 loads a thread)
constexpr int64_t kMaxSplits = 64;
constexpr int64_t kChunkAlign = 8;  // entries: 16 bytes of bf16, 32 of f32

// The running winner of a set of entries. id == INT_MAX: no entry above -inf seen yet (then
// v == -inf). v is never NaN: NaNs only set the flag.
struct Best {
  float v;
  int32_t id;
  int32_t nan;
};

__device__ __forceinline__ Best NoBest() { return Best{-CUDART_INF_F, INT_MAX, 0}; }

// The order of winners: larger value, then lower id. Associative and commutative, so any
// reduction tree gives the host's sequential "first strict maximum".
__device__ __forceinline__ void Merge(Best& a, const Best& b) {
  if (b.v > a.v || (b.v == a.v && b.id < a.id)) {
    a.v = b.v;
    a.id = b.id;
  }
  a.nan |= b.nan;
}

// One thread sees its ids in increasing order, so a strict > keeps the lowest id of a tie and
// never takes a -inf (nor a NaN, which compares false).
__device__ __forceinline__ void Visit(Best& a, float v, int32_t id) {
  if (v > a.v) {
    a.v = v;
    a.id = id;
  }
  a.nan |= (v != v) ? 1 : 0;  // NaN (no fast-math: the compare is kept)
}

// 16 bytes at `p` (aligned): 4 f32 or 8 bf16 entries with ids id0, id0 + 1, ...
__device__ __forceinline__ void VisitVec(Best& a, const float* p, int32_t id0) {
  const float4 q = *reinterpret_cast<const float4*>(p);
  Visit(a, q.x, id0);
  Visit(a, q.y, id0 + 1);
  Visit(a, q.z, id0 + 2);
  Visit(a, q.w, id0 + 3);
}
__device__ __forceinline__ void VisitVec(Best& a, const __nv_bfloat16* p, int32_t id0) {
  const uint4 q = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&q);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 f = __bfloat1622float2(h[k]);  // exact
    Visit(a, f.x, id0 + 2 * k);
    Visit(a, f.y, id0 + 2 * k + 1);
  }
}

__device__ __forceinline__ int32_t Final(const Best& b) {
  if (b.nan != 0) return kArgmaxNaN;
  return b.id == INT_MAX ? kArgmaxNone : b.id;
}

__device__ __forceinline__ Best WarpBest(Best b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Best other;
    other.v = __shfl_xor_sync(0xffffffffu, b.v, o);
    other.id = __shfl_xor_sync(0xffffffffu, b.id, o);
    other.nan = __shfl_xor_sync(0xffffffffu, b.nan, o);
    Merge(b, other);
  }
  return b;
}

// Grid (splits, rows). Block (s, r) reduces row r's entries [s * chunk, min(vocab, (s+1) * chunk))
// and writes out[r] directly when splits == 1, else partial[r * splits + s].
// kVector: x and every row start are 16-byte aligned (chunk is a multiple of kChunkAlign).
// The fused tail's extra arguments (LaunchArgmaxAdvance).
struct AdvanceTail {
  unsigned* ticket;
  DecodeInputs in;
  int block_size;
  int32_t* host_ids;
  int host_stride;
};

template <typename T, bool kVector, bool kTail = false>
__global__ void __launch_bounds__(kThreads)
    ArgmaxChunkKernel(const T* x, int64_t vocab, int64_t chunk, int splits, Best* partial,
                      int32_t* out, AdvanceTail tail) {
  KTRACE_BEGIN();
  PdlWait();  // launched with PDL (launch.cuh)
  KTRACE_WAITED();
  PdlLaunchDependents();
  const int64_t r = blockIdx.y;
  const int s = static_cast<int>(blockIdx.x);
  const int64_t begin = s * chunk;
  const int64_t end = begin + chunk < vocab ? begin + chunk : vocab;
  const T* row = x + r * vocab;
  Best b = NoBest();
  int64_t scalar_begin = begin;
  if constexpr (kVector) {
    constexpr int kPer = 16 / static_cast<int>(sizeof(T));
    const int64_t vec_end = begin + (end - begin) / kPer * kPer;
#pragma unroll 4
    for (int64_t j = begin + int64_t{threadIdx.x} * kPer; j < vec_end; j += kThreads * kPer) {
      VisitVec(b, row + j, static_cast<int32_t>(j));
    }
    scalar_begin = vec_end;
  }
  // Scalar entries come after every vector entry of this thread: ids still increase.
  for (int64_t j = scalar_begin + threadIdx.x; j < end; j += kThreads) {
    Visit(b, ToF32(row[j]), static_cast<int32_t>(j));
  }

  __shared__ Best warp_best[kThreads / 32];
  b = WarpBest(b);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) warp_best[warp] = b;
  __syncthreads();
  if (warp != 0) return;
  b = lane < kThreads / 32 ? warp_best[lane] : NoBest();
  b = WarpBest(b);
  if constexpr (kTail) {  // one row; warp 0 of every block
    if (splits > 1) {
      if (lane == 0) partial[s] = b;
      // The last block to arrive combines: the writes before each block's ticket are visible to
      // it after its own (fence, then the counter).
      unsigned t = 0;
      if (lane == 0) {
        __threadfence();
        t = atomicAdd(tail.ticket, 1u);
      }
      t = __shfl_sync(0xffffffffu, t, 0);
      if (t != static_cast<unsigned>(splits - 1)) {
        KTRACE_END(kKTraceArgmaxChunk, vocab, splits);  // every block records (ktrace.py)
        return;
      }
      __threadfence();
      b = NoBest();
      for (int i = lane; i < splits; i += 32) {  // from L2: other SMs wrote them
        Merge(b, Best{__ldcg(&partial[i].v), __ldcg(&partial[i].id), __ldcg(&partial[i].nan)});
      }
      b = WarpBest(b);
    }
    if (lane != 0) return;
    if (splits > 1) *tail.ticket = 0;  // every block has counted: ready for the next launch
    const int32_t id = Final(b);
    out[0] = id;
    AdvanceDecodeRow(0, id, tail.in, tail.block_size, tail.host_ids, tail.host_stride);
    KTRACE_END(kKTraceArgmaxChunk, vocab, splits);
    return;
  }
  if (lane != 0) return;
  if (splits == 1) {
    out[r] = Final(b);
  } else {
    partial[r * splits + s] = b;
  }
  KTRACE_END(kKTraceArgmaxChunk, vocab, splits);
}

// One thread per row: combines the row's `splits` chunk winners.
__global__ void ArgmaxCombineKernel(const Best* partial, int64_t rows, int splits, int32_t* out) {
  KTRACE_BEGIN();
  PdlWait();  // launched with PDL (launch.cuh)
  KTRACE_WAITED();
  PdlLaunchDependents();
  KTRACE_END(kKTraceArgmaxCombine, rows, splits);
  const int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (r >= rows) return;
  Best b = NoBest();
  for (int s = 0; s < splits; ++s) Merge(b, partial[r * splits + s]);
  out[r] = Final(b);
}

struct SplitPlan {
  int splits;
  int64_t chunk;  // entries, a multiple of kChunkAlign
};

SplitPlan PlanSplits(int64_t rows, int64_t vocab, int num_sms) {
  const int64_t want_blocks = 2 * int64_t{std::max(num_sms, 1)};
  int64_t s = (want_blocks + rows - 1) / rows;
  s = std::min(s, (vocab + kMinChunk - 1) / kMinChunk);
  s = std::clamp<int64_t>(s, 1, kMaxSplits);
  int64_t chunk = (vocab + s - 1) / s;
  chunk = (chunk + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
  s = (vocab + chunk - 1) / chunk;  // rounding the chunk up may leave fewer, all non-empty
  return SplitPlan{static_cast<int>(s), chunk};
}

// The chunk kernel over `rows` rows of x (typed as the caller's dtype, f32 or bf16); kTail: the
// fused tail (one row, `tail` used).
template <bool kTail>
void Launch(const void* x, DType dtype, int64_t rows, int64_t vocab, const SplitPlan& p,
            Best* partial, int32_t* out, const AdvanceTail& tail, cudaStream_t stream, bool pdl) {
  auto go = [&](auto* typed) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(typed)>>;
    const dim3 grid(static_cast<unsigned>(p.splits), static_cast<unsigned>(rows));
    const bool vec = reinterpret_cast<uintptr_t>(typed) % 16 == 0 &&
                     (static_cast<size_t>(vocab) * sizeof(T)) % 16 == 0;
    if (vec) {
      LaunchPdl(ArgmaxChunkKernel<T, true, kTail>, grid, dim3(kThreads), 0, stream, pdl, typed,
                vocab, p.chunk, p.splits, partial, out, tail);
    } else {
      LaunchPdl(ArgmaxChunkKernel<T, false, kTail>, grid, dim3(kThreads), 0, stream, pdl, typed,
                vocab, p.chunk, p.splits, partial, out, tail);
    }
  };
  if (dtype == DType::kF32) return go(static_cast<const float*>(x));
  CHECK(dtype == DType::kBF16) << "ArgmaxRows: x must be f32 or bf16, got " << DTypeName(dtype);
  go(static_cast<const __nv_bfloat16*>(x));
}

}  // namespace

size_t ArgmaxScratchBytes(int64_t rows, int64_t vocab, int num_sms) {
  if (rows <= 0 || vocab <= 0) return 0;
  const SplitPlan p = PlanSplits(rows, vocab, num_sms);
  return p.splits == 1 ? 0 : static_cast<size_t>(rows) * p.splits * sizeof(Best);
}

void LaunchArgmaxRows(const void* x, DType dtype, int64_t rows, int64_t vocab, int num_sms,
                      void* scratch, int32_t* out, cudaStream_t stream, bool pdl) {
  if (rows == 0) return;
  CHECK(vocab > 0 && vocab < INT_MAX) << "ArgmaxRows: vocab " << vocab;
  CHECK_LE(rows, 65535) << "ArgmaxRows: too many rows";
  const SplitPlan p = PlanSplits(rows, vocab, num_sms);
  Best* partial = static_cast<Best*>(scratch);
  CHECK(p.splits == 1 || partial != nullptr) << "ArgmaxRows: no scratch";
  Launch<false>(x, dtype, rows, vocab, p, partial, out, AdvanceTail{}, stream, pdl);
  if (p.splits > 1) {
    const int threads = 128;
    LaunchPdl(ArgmaxCombineKernel, dim3(static_cast<unsigned>((rows + threads - 1) / threads)),
              dim3(threads), 0, stream, pdl, partial, rows, p.splits, out);
  }
}

void LaunchArgmaxAdvance(const void* x, DType dtype, int64_t vocab, int num_sms, void* scratch,
                         unsigned* ticket, int32_t* out, const DecodeInputs& in, int block_size,
                         int32_t* host_ids, int host_stride, cudaStream_t stream, bool pdl) {
  CHECK(vocab > 0 && vocab < INT_MAX) << "ArgmaxAdvance: vocab " << vocab;
  const SplitPlan p = PlanSplits(1, vocab, num_sms);
  Best* partial = static_cast<Best*>(scratch);
  CHECK(p.splits == 1 || (partial != nullptr && ticket != nullptr)) << "ArgmaxAdvance: no scratch";
  const AdvanceTail tail{ticket, in, block_size, host_ids, host_stride};
  Launch<true>(x, dtype, 1, vocab, p, partial, out, tail, stream, pdl);
}

}  // namespace loom::cuda
