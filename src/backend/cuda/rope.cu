#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/rope.cuh"

namespace loom::cuda {
namespace {

__global__ void RopeKernel(__nv_bfloat16* x, const int32_t* positions, const float* inv_freq,
                           int half, float factor, bool interleaved, int64_t total, int num_heads,
                           int head_dim) {
  const int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (idx >= total) return;
  const int j = static_cast<int>(idx % half);
  const int64_t th = idx / half;  // token * num_heads + head
  const int64_t t = th / num_heads;
  float s, c;
  sincosf(static_cast<float>(positions[t]) * inv_freq[j], &s, &c);
  s *= factor;
  c *= factor;
  __nv_bfloat16* v = x + th * head_dim;
  const int a = interleaved ? 2 * j : j;
  const int b = interleaved ? 2 * j + 1 : j + half;
  const float x0 = __bfloat162float(v[a]), x1 = __bfloat162float(v[b]);
  v[a] = __float2bfloat16_rn(x0 * c - x1 * s);
  v[b] = __float2bfloat16_rn(x1 * c + x0 * s);
}

}  // namespace

void LaunchRope(void* x, const int32_t* positions, const float* inv_freq, int rotary_dim,
                float attention_factor, bool interleaved, int64_t n, int num_heads, int head_dim,
                cudaStream_t stream) {
  CHECK(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim)
      << "Rope: rotary_dim " << rotary_dim << " vs head_dim " << head_dim;
  const int half = rotary_dim / 2;
  const int64_t total = n * num_heads * half;
  if (total == 0) return;
  RopeKernel<<<BlocksFor(total, 256, 1 << 30), 256, 0, stream>>>(
      static_cast<__nv_bfloat16*>(x), positions, inv_freq, half, attention_factor, interleaved,
      total, num_heads, head_dim);
  CUDA_CHECK_LAUNCH();
}

}  // namespace loom::cuda
