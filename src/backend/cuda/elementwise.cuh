// Elementwise kernels (bf16 or f32 tensors; f32 math). Launchers enqueue on `stream` and check
// the launch. `dtype` is DType::kBF16 or DType::kF32 unless stated otherwise. `pdl`: launch with
// programmatic dependent launch (launch.cuh; CudaTuning::cuda_pdl) where a launcher takes it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/dtype.h"

namespace loom::cuda {

// out = a + b (out may alias a or b).
void LaunchAdd(const void* a, const void* b, void* out, DType dtype, int64_t count,
               cudaStream_t stream, bool pdl);
// x *= s.
void LaunchScale(void* x, float s, DType dtype, int64_t count, cudaStream_t stream);
// out[r, j] = act(gate_up[r, 2j]) * gate_up[r, 2j + 1], act = silu or gelu(tanh); bf16
// (CudaBackend::FuseGateUp's (gate, up) pairs).
void LaunchGatedAct(const void* gate_up, void* out, int64_t rows, int64_t f, bool gelu_tanh,
                    cudaStream_t stream, bool pdl);
// out = silu(gate) * up, or gelu_tanh(gate) * up (out may alias gate or up).
void LaunchSiluMul(const void* gate, const void* up, void* out, DType dtype, int64_t count,
                   cudaStream_t stream, bool pdl);
void LaunchGeluTanhMul(const void* gate, const void* up, void* out, DType dtype, int64_t count,
                       cudaStream_t stream, bool pdl);
// x = cap * tanh(x / cap).
void LaunchSoftCap(void* x, float cap, DType dtype, int64_t count, cudaStream_t stream);
// out[i, j] += bias[j].   out [rows, cols] (dtype); bias [cols] (bias_dtype: f32 or bf16).
void LaunchAddBias(void* out, DType dtype, const void* bias, DType bias_dtype, int64_t rows,
                   int64_t cols, cudaStream_t stream);
// dst (bf16) = src (f32, f16 or bf16), round to nearest even.
void LaunchConvertToBf16(const void* src, DType src_dtype, void* dst, int64_t count,
                         cudaStream_t stream);
// dst[i] = HashUniform(seed, i, lo, scale) (see base/hash_uniform.h), stored as f32 or bf16.
void LaunchFillUniform(void* dst, DType dtype, int64_t count, uint64_t seed, float lo, float scale,
                       cudaStream_t stream);

}  // namespace loom::cuda
