#include "backend/cuda/rms_norm.cuh"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"

namespace loom::cuda {
namespace {

template <typename W, int kThreads>
__global__ void RmsNormKernel(const __nv_bfloat16* x, const W* w, float eps, float offset,
                              int64_t d, __nv_bfloat16* out) {
  const __nv_bfloat16* xr = x + blockIdx.x * d;
  __nv_bfloat16* o = out + blockIdx.x * d;
  float ss = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += kThreads) {
    const float v = ToF32(xr[j]);
    ss += v * v;
  }
  __shared__ float warp_sums[kThreads / 32];
  ss = WarpSum(ss);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) total += warp_sums[i];
  const float inv = rsqrtf(total / static_cast<float>(d) + eps);
  // Each thread rewrites only the elements it read: in-place is safe.
  for (int64_t j = threadIdx.x; j < d; j += kThreads) {
    o[j] = __float2bfloat16_rn(ToF32(xr[j]) * inv * (ToF32(w[j]) + offset));
  }
}

template <typename W>
void Run(const void* x, const void* w, float eps, float offset, int64_t rows, int64_t d, void* out,
         cudaStream_t stream) {
  const auto* px = static_cast<const __nv_bfloat16*>(x);
  const auto* pw = static_cast<const W*>(w);
  auto* po = static_cast<__nv_bfloat16*>(out);
  if (d <= 256) {
    RmsNormKernel<W, 64><<<static_cast<unsigned>(rows), 64, 0, stream>>>(px, pw, eps, offset, d, po);
  } else {
    RmsNormKernel<W, 256><<<static_cast<unsigned>(rows), 256, 0, stream>>>(px, pw, eps, offset, d,
                                                                            po);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void LaunchRmsNorm(const void* x, const void* w, DType w_dtype, float eps, float weight_offset,
                   int64_t rows, int64_t d, void* out, cudaStream_t stream) {
  if (rows == 0) return;
  if (w_dtype == DType::kF32) {
    Run<float>(x, w, eps, weight_offset, rows, d, out, stream);
  } else {
    CHECK(w_dtype == DType::kBF16) << "RmsNorm weight must be f32 or bf16, got "
                                   << DTypeName(w_dtype);
    Run<__nv_bfloat16>(x, w, eps, weight_offset, rows, d, out, stream);
  }
}

}  // namespace loom::cuda
