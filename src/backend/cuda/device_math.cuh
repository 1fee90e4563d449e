// Device helpers shared by the kernels (.cu files only): bf16/f16/f32 loads and stores in f32,
// grid sizing, and the counter-based hash behind FillUniform (mirrored on the host by
// HashUniform in base/hash_uniform.h so tests can rebuild the same values).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace loom::cuda {

__device__ __forceinline__ float ToF32(float v) { return v; }
__device__ __forceinline__ float ToF32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ToF32(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T FromF32(float v);
template <>
__device__ __forceinline__ float FromF32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromF32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half FromF32<__half>(float v) {
  return __float2half_rn(v);
}

inline int BlocksFor(int64_t work, int threads, int max_blocks = 65535 * 16) {
  const int64_t b = (work + threads - 1) / threads;
  return static_cast<int>(b < 1 ? 1 : (b > max_blocks ? max_blocks : b));
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double WarpSum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Gated MLP activations: act(gate) * up.
struct SiluMulOp {
  __device__ float operator()(float g, float u) const { return g / (1.0f + expf(-g)) * u; }
};
// The base a running softmax's sums are relative to: its max, or 0 while it has seen no key
// (-inf; an all-masked row weighs nothing).
__device__ __forceinline__ float SafeMax(float m) { return m == -INFINITY ? 0.f : m; }

// exp2(sinks[head] log2(e) - base): the weight of a head's attention sink (gpt-oss: one more
// logit in its softmax, with no value) in log2-domain sums relative to `base` (the attention
// kernels' scores are in log2 units); 0 without sinks (null).
__device__ __forceinline__ float SinkWeight(const float* sinks, int64_t head, float base) {
  return sinks != nullptr ? exp2f(sinks[head] * 1.4426950408889634f - base) : 0.f;
}

// gpt-oss's experts: g = min(g, limit), u = clamp(u, -limit, limit), g * sigmoid(1.702 g) * (u +
// 1).
struct ClampedSwigluOp {
  float limit;
  __device__ float operator()(float g, float u) const {
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
    return g / (1.0f + expf(-1.702f * g)) * (u + 1.0f);
  }
};
struct GeluTanhMulOp {
  __device__ float operator()(float g, float u) const {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    return 0.5f * g * (1.0f + tanhf(k * (g + 0.044715f * g * g * g))) * u;
  }
};
// The sequence a query tile belongs to: the last s with tile_start[s] <= tile (tile_start is
// the attention kernels' prefix sum of tiles per sequence, num_seqs >= 1 entries).
__device__ __forceinline__ int SequenceOfTile(const int32_t* tile_start, int num_seqs, int tile) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_start[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// 16-byte vectors of 8 bf16 <-> 8 floats.
__device__ __forceinline__ void UnpackBf16x8(const uint4& v, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}
__device__ __forceinline__ uint4 PackBf16x8(const float (&f)[8]) {
  uint4 v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

// Sum of v over a block of kThreads threads (a multiple of 32), returned to every thread.
template <int kThreads>
__device__ __forceinline__ float BlockSum(float v) {
  __shared__ float warp_sums[kThreads / 32];
  v = WarpSum(v);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) total += warp_sums[i];
  return total;
}

// The shared-state-space address of a pointer into shared memory (PTX shared:: operands).
__device__ __forceinline__ uint32_t SmemAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// sm_90 mbarriers in this block's shared memory: set up for `count` arrivals a phase, and one
// arrival that also expects `bytes` of asynchronous transfers (bulk copies, st.async) this phase.
__device__ __forceinline__ void MbarInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddress(bar)), "r"(count));
}
__device__ __forceinline__ void MbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddress(bar)),
               "r"(bytes)
               : "memory");
}

}  // namespace loom::cuda
