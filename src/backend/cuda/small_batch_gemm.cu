#include "backend/cuda/small_batch_gemm.cuh"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"

namespace loom::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 4;

__device__ __forceinline__ void Unpack(const uint4& v, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

template <int N, typename Out>
__global__ void __launch_bounds__(kWarps * 32)
    SmallBatchGemmKernel(const uint4* __restrict__ x, const uint4* __restrict__ w, Out* out,
                         int64_t m, int64_t k_vec) {
  const int lane = threadIdx.x % 32;
  const int64_t col = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  if (col >= m) return;
  const uint4* wr = w + col * k_vec;
  float acc[N];
#pragma unroll
  for (int r = 0; r < N; ++r) acc[r] = 0.f;
  int64_t i = lane;
  for (; i + 32 * (kUnroll - 1) < k_vec; i += 32 * kUnroll) {
    uint4 wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = __ldcs(wr + i + 32 * u);  // streamed once
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float wf[8];
      Unpack(wv[u], wf);
#pragma unroll
      for (int r = 0; r < N; ++r) {
        float xf[8];
        Unpack(x[r * k_vec + i + 32 * u], xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r] += wf[e] * xf[e];
      }
    }
  }
  for (; i < k_vec; i += 32) {
    float wf[8];
    Unpack(wr[i], wf);
#pragma unroll
    for (int r = 0; r < N; ++r) {
      float xf[8];
      Unpack(x[r * k_vec + i], xf);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r] += wf[e] * xf[e];
    }
  }
#pragma unroll
  for (int r = 0; r < N; ++r) {
    const float s = WarpSum(acc[r]);
    if (lane == 0) out[r * m + col] = FromF32<Out>(s);
  }
}

template <int N>
void LaunchN(const void* x, const void* w, void* out, DType out_dtype, int64_t m, int64_t k,
             cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((m + kWarps - 1) / kWarps);
  const auto* xv = static_cast<const uint4*>(x);
  const auto* wv = static_cast<const uint4*>(w);
  if (out_dtype == DType::kF32) {
    SmallBatchGemmKernel<N, float><<<blocks, kWarps * 32, 0, stream>>>(
        xv, wv, static_cast<float*>(out), m, k / 8);
  } else {
    SmallBatchGemmKernel<N, __nv_bfloat16><<<blocks, kWarps * 32, 0, stream>>>(
        xv, wv, static_cast<__nv_bfloat16*>(out), m, k / 8);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool SmallBatchGemmApplies(const void* x, const void* w, int64_t n, int64_t k) {
  return n >= 1 && n <= kSmallBatchMaxRows && k % 8 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

void LaunchSmallBatchGemm(const void* x, const void* w, void* out, DType out_dtype, int64_t n,
                          int64_t m, int64_t k, cudaStream_t stream) {
  CHECK(SmallBatchGemmApplies(x, w, n, k)) << "SmallBatchGemm: n " << n << " k " << k;
  CHECK(out_dtype == DType::kF32 || out_dtype == DType::kBF16) << DTypeName(out_dtype);
  switch (n) {
    case 1: LaunchN<1>(x, w, out, out_dtype, m, k, stream); break;
    case 2: LaunchN<2>(x, w, out, out_dtype, m, k, stream); break;
    case 3: LaunchN<3>(x, w, out, out_dtype, m, k, stream); break;
    case 4: LaunchN<4>(x, w, out, out_dtype, m, k, stream); break;
    case 5: LaunchN<5>(x, w, out, out_dtype, m, k, stream); break;
    case 6: LaunchN<6>(x, w, out, out_dtype, m, k, stream); break;
    case 7: LaunchN<7>(x, w, out, out_dtype, m, k, stream); break;
    default: LaunchN<8>(x, w, out, out_dtype, m, k, stream); break;
  }
}

}  // namespace loom::cuda
