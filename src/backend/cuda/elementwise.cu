#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/launch.cuh"
#include "base/hash_uniform.h"

namespace loom::cuda {
namespace {

constexpr int kThreads = 256;

#define LOOM_GRID_STRIDE(i, count)                                              \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (count); \
       i += int64_t{gridDim.x} * blockDim.x)

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct ScaleOp {
  float s;
  __device__ float operator()(float x) const { return x * s; }
};
struct SoftCapOp {
  float cap;
  __device__ float operator()(float x) const { return cap * tanhf(x / cap); }
};

// Launched with PDL (launch.cuh): waits before touching anything.
template <typename T, typename Op>
__global__ void BinaryKernel(const T* a, const T* b, T* out, int64_t count, Op op) {
  PdlWait();
  PdlLaunchDependents();
  LOOM_GRID_STRIDE(i, count) { out[i] = FromF32<T>(op(ToF32(a[i]), ToF32(b[i]))); }
}

// out[r, j] = op(gate_up[r, 2j], gate_up[r, 2j + 1]): the gated MLP activation of a projection
// through CudaBackend::FuseGateUp's (gate, up) row pairs. Launched with PDL.
template <typename Op>
__global__ void GatedKernel(const __nv_bfloat16* gate_up, __nv_bfloat16* out, int64_t rows,
                            int64_t f, Op op) {
  PdlWait();
  PdlLaunchDependents();
  LOOM_GRID_STRIDE(i, rows * f) {
    const int64_t r = i / f, j = i % f;
    const __nv_bfloat162 gu = reinterpret_cast<const __nv_bfloat162*>(gate_up + r * 2 * f)[j];
    out[i] = __float2bfloat16_rn(op(__bfloat162float(gu.x), __bfloat162float(gu.y)));
  }
}

template <typename T, typename Op>
__global__ void UnaryKernel(T* x, int64_t count, Op op) {
  LOOM_GRID_STRIDE(i, count) { x[i] = FromF32<T>(op(ToF32(x[i]))); }
}

template <typename T, typename B>
__global__ void AddBiasKernel(T* out, const B* bias, int64_t count, int64_t cols) {
  LOOM_GRID_STRIDE(i, count) { out[i] = FromF32<T>(ToF32(out[i]) + ToF32(bias[i % cols])); }
}

template <typename S>
__global__ void ToBf16Kernel(const S* src, __nv_bfloat16* dst, int64_t count) {
  LOOM_GRID_STRIDE(i, count) { dst[i] = __float2bfloat16_rn(ToF32(src[i])); }
}

template <typename T>
__global__ void FillKernel(T* dst, int64_t count, uint64_t seed, float lo, float scale) {
  LOOM_GRID_STRIDE(i, count) {
    dst[i] = FromF32<T>(HashUniform(seed, static_cast<uint64_t>(i), lo, scale));
  }
}

void CheckFloatType(DType dtype) {
  CHECK(dtype == DType::kBF16 || dtype == DType::kF32)
      << "elementwise ops take bf16 or f32, got " << DTypeName(dtype);
}

template <typename Op>
void Binary(const void* a, const void* b, void* out, DType dtype, int64_t count, Op op,
            cudaStream_t stream, bool pdl) {
  CheckFloatType(dtype);
  if (count <= 0) return;
  const int blocks = BlocksFor(count, kThreads);
  if (dtype == DType::kBF16) {
    using T = __nv_bfloat16;
    LaunchPdl(BinaryKernel<T, Op>, dim3(blocks), dim3(kThreads), 0, stream, pdl,
              static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), count, op);
  } else {
    LaunchPdl(BinaryKernel<float, Op>, dim3(blocks), dim3(kThreads), 0, stream, pdl,
              static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(out),
              count, op);
  }
}

template <typename Op>
void Unary(void* x, DType dtype, int64_t count, Op op, cudaStream_t stream) {
  CheckFloatType(dtype);
  if (count <= 0) return;
  const int blocks = BlocksFor(count, kThreads);
  if (dtype == DType::kBF16) {
    UnaryKernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(x), count, op);
  } else {
    UnaryKernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(x), count, op);
  }
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void AddBiasTyped(T* out, const void* bias, DType bias_dtype, int64_t count, int64_t cols,
                  cudaStream_t stream) {
  const int blocks = BlocksFor(count, kThreads);
  if (bias_dtype == DType::kBF16) {
    AddBiasKernel<<<blocks, kThreads, 0, stream>>>(out, static_cast<const __nv_bfloat16*>(bias),
                                                   count, cols);
  } else {
    AddBiasKernel<<<blocks, kThreads, 0, stream>>>(out, static_cast<const float*>(bias), count,
                                                   cols);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void LaunchAdd(const void* a, const void* b, void* out, DType dtype, int64_t count,
               cudaStream_t stream, bool pdl) {
  Binary(a, b, out, dtype, count, AddOp{}, stream, pdl);
}

void LaunchGatedAct(const void* gate_up, void* out, int64_t rows, int64_t f, bool gelu_tanh,
                    cudaStream_t stream, bool pdl) {
  const int64_t count = rows * f;
  if (count <= 0) return;
  const int blocks = BlocksFor(count, kThreads);
  const auto* gu = static_cast<const __nv_bfloat16*>(gate_up);
  auto* o = static_cast<__nv_bfloat16*>(out);
  if (gelu_tanh) {
    LaunchPdl(GatedKernel<GeluTanhMulOp>, dim3(blocks), dim3(kThreads), 0, stream, pdl, gu, o, rows,
              f, GeluTanhMulOp{});
  } else {
    LaunchPdl(GatedKernel<SiluMulOp>, dim3(blocks), dim3(kThreads), 0, stream, pdl, gu, o, rows, f,
              SiluMulOp{});
  }
}

void LaunchScale(void* x, float s, DType dtype, int64_t count, cudaStream_t stream) {
  Unary(x, dtype, count, ScaleOp{s}, stream);
}

void LaunchSiluMul(const void* gate, const void* up, void* out, DType dtype, int64_t count,
                   cudaStream_t stream, bool pdl) {
  Binary(gate, up, out, dtype, count, SiluMulOp{}, stream, pdl);
}

void LaunchGeluTanhMul(const void* gate, const void* up, void* out, DType dtype, int64_t count,
                       cudaStream_t stream, bool pdl) {
  Binary(gate, up, out, dtype, count, GeluTanhMulOp{}, stream, pdl);
}

void LaunchSoftCap(void* x, float cap, DType dtype, int64_t count, cudaStream_t stream) {
  CHECK_GT(cap, 0.0f);
  Unary(x, dtype, count, SoftCapOp{cap}, stream);
}

void LaunchAddBias(void* out, DType dtype, const void* bias, DType bias_dtype, int64_t rows,
                   int64_t cols, cudaStream_t stream) {
  CheckFloatType(dtype);
  CheckFloatType(bias_dtype);
  const int64_t count = rows * cols;
  if (count <= 0) return;
  if (dtype == DType::kBF16) {
    AddBiasTyped(static_cast<__nv_bfloat16*>(out), bias, bias_dtype, count, cols, stream);
  } else {
    AddBiasTyped(static_cast<float*>(out), bias, bias_dtype, count, cols, stream);
  }
}

void LaunchConvertToBf16(const void* src, DType src_dtype, void* dst, int64_t count,
                         cudaStream_t stream) {
  if (count <= 0) return;
  auto* d = static_cast<__nv_bfloat16*>(dst);
  const int blocks = BlocksFor(count, kThreads);
  switch (src_dtype) {
    case DType::kF32:
      ToBf16Kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(src), d, count);
      break;
    case DType::kF16:
      ToBf16Kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(src), d, count);
      break;
    case DType::kBF16:
      ToBf16Kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(src), d,
                                                    count);
      break;
    default:
      CHECK(false) << "ConvertToBf16 from " << DTypeName(src_dtype);
  }
  CUDA_CHECK_LAUNCH();
}

void LaunchFillUniform(void* dst, DType dtype, int64_t count, uint64_t seed, float lo, float scale,
                       cudaStream_t stream) {
  CheckFloatType(dtype);
  if (count <= 0) return;
  const int blocks = BlocksFor(count, kThreads);
  if (dtype == DType::kBF16) {
    FillKernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), count, seed, lo,
                                                scale);
  } else {
    FillKernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(dst), count, seed, lo, scale);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace loom::cuda
