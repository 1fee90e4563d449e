// RMSNorm over rows: out[i] = x[i] / sqrt(mean(x[i]^2) + eps) * (w + weight_offset).
// x, out [rows, d] bf16 (may alias); w [d] f32 or bf16. One block per row, f32 sums.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/dtype.h"

namespace loom::cuda {

void LaunchRmsNorm(const void* x, const void* w, DType w_dtype, float eps, float weight_offset,
                   int64_t rows, int64_t d, void* out, cudaStream_t stream);

// x = bf16(x + delta) in place, then out = RmsNorm(x), in one kernel (x, delta, out bf16
// [rows, d]; w f32 or bf16). Returns false (nothing launched) when the shape or alignment is not
// supported by the fused kernel (d % 8 != 0, d > 16384, unaligned): the caller runs Add + RmsNorm.
bool LaunchAddRmsNorm(void* x, const void* delta, const void* w, DType w_dtype, float eps,
                      float weight_offset, int64_t rows, int64_t d, void* out,
                      cudaStream_t stream);

}  // namespace loom::cuda
