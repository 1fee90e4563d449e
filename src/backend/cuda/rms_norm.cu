#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/rms_norm.cuh"

namespace loom::cuda {
namespace {

// Generic row norm: any d, any alignment (a strided loop per thread).
template <typename W, int kThreads>
__global__ void RmsNormKernel(const __nv_bfloat16* x, const W* w, float eps, float offset,
                              int64_t d, __nv_bfloat16* out) {
  PdlWait();
  PdlLaunchDependents();
  const __nv_bfloat16* xr = x + blockIdx.x * d;
  __nv_bfloat16* o = out + blockIdx.x * d;
  float ss = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += kThreads) {
    const float v = ToF32(xr[j]);
    ss += v * v;
  }
  const float total = BlockSum<kThreads>(ss);
  const float inv = rsqrtf(total / static_cast<float>(d) + eps);
  // Each thread rewrites only the elements it read: in-place is safe.
  for (int64_t j = threadIdx.x; j < d; j += kThreads) {
    o[j] = __float2bfloat16_rn(ToF32(xr[j]) * inv * (ToF32(w[j]) + offset));
  }
}

// Vectorized row norm for d % 8 == 0, d <= 8 * kVecs * kThreads, 16-byte aligned rows: every
// thread loads its (up to kVecs) 16-byte vectors at once, so a row costs one memory round trip
// instead of one per loop iteration (at batch 1 a norm is a single block: latency is its cost).
constexpr int kVecs = 4;

template <typename W, int kThreads>
__global__ void __launch_bounds__(kThreads)
    RmsNormVecKernel(const __nv_bfloat16* x, const W* w, float eps, float offset, int d,
                     __nv_bfloat16* out) {
  PdlWait();
  PdlLaunchDependents();
  const int vecs = d / 8;
  const uint4* xr = reinterpret_cast<const uint4*>(x + int64_t{blockIdx.x} * d);
  float v[kVecs][8];
  float ss = 0.f;
#pragma unroll
  for (int u = 0; u < kVecs; ++u) {
    const int i = static_cast<int>(threadIdx.x) + u * kThreads;
    if (i >= vecs) continue;
    UnpackBf16x8(xr[i], v[u]);
#pragma unroll
    for (int e = 0; e < 8; ++e) ss += v[u][e] * v[u][e];
  }
  const float total = BlockSum<kThreads>(ss);
  const float inv = rsqrtf(total / static_cast<float>(d) + eps);
  uint4* o = reinterpret_cast<uint4*>(out + int64_t{blockIdx.x} * d);
#pragma unroll
  for (int u = 0; u < kVecs; ++u) {
    const int i = static_cast<int>(threadIdx.x) + u * kThreads;
    if (i >= vecs) continue;
    float r[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) r[e] = v[u][e] * inv * (ToF32(w[i * 8 + e]) + offset);
    o[i] = PackBf16x8(r);
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename W>
bool TryVec(const void* x, const void* w, float eps, float offset, int64_t rows, int64_t d,
            void* out, cudaStream_t stream, bool pdl) {
  if (d % 8 != 0 || !Aligned16(x) || !Aligned16(out)) return false;
  const auto* px = static_cast<const __nv_bfloat16*>(x);
  const auto* pw = static_cast<const W*>(w);
  auto* po = static_cast<__nv_bfloat16*>(out);
  const dim3 grid(static_cast<unsigned>(rows));
  const int vecs = static_cast<int>(d / 8);
  const int di = static_cast<int>(d);
  if (vecs <= 32 * kVecs) {
    LaunchPdl(RmsNormVecKernel<W, 32>, grid, dim3(32), 0, stream, pdl, px, pw, eps, offset, di, po);
  } else if (vecs <= 128 * kVecs) {
    LaunchPdl(RmsNormVecKernel<W, 128>, grid, dim3(128), 0, stream, pdl, px, pw, eps, offset, di,
              po);
  } else if (vecs <= 256 * kVecs) {
    LaunchPdl(RmsNormVecKernel<W, 256>, grid, dim3(256), 0, stream, pdl, px, pw, eps, offset, di,
              po);
  } else if (vecs <= 512 * kVecs) {
    LaunchPdl(RmsNormVecKernel<W, 512>, grid, dim3(512), 0, stream, pdl, px, pw, eps, offset, di,
              po);
  } else {
    return false;
  }
  return true;
}

template <typename W>
void Run(const void* x, const void* w, float eps, float offset, int64_t rows, int64_t d, void* out,
         cudaStream_t stream, bool pdl) {
  if (TryVec<W>(x, w, eps, offset, rows, d, out, stream, pdl)) return;
  const auto* px = static_cast<const __nv_bfloat16*>(x);
  const auto* pw = static_cast<const W*>(w);
  auto* po = static_cast<__nv_bfloat16*>(out);
  const dim3 grid(static_cast<unsigned>(rows));
  if (d <= 256) {
    LaunchPdl(RmsNormKernel<W, 64>, grid, dim3(64), 0, stream, pdl, px, pw, eps, offset, d, po);
  } else {
    LaunchPdl(RmsNormKernel<W, 256>, grid, dim3(256), 0, stream, pdl, px, pw, eps, offset, d, po);
  }
}

}  // namespace

void LaunchRmsNorm(const void* x, const void* w, DType w_dtype, float eps, float weight_offset,
                   int64_t rows, int64_t d, void* out, cudaStream_t stream, bool pdl) {
  if (rows == 0) return;
  if (w_dtype == DType::kF32) {
    Run<float>(x, w, eps, weight_offset, rows, d, out, stream, pdl);
  } else {
    CHECK(w_dtype == DType::kBF16)
        << "RmsNorm weight must be f32 or bf16, got " << DTypeName(w_dtype);
    Run<__nv_bfloat16>(x, w, eps, weight_offset, rows, d, out, stream, pdl);
  }
}

}  // namespace loom::cuda
