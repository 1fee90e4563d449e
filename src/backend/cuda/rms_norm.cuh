// RMSNorm over rows: out[i] = x[i] / sqrt(mean(x[i]^2) + eps) * (w + weight_offset).
// x, out [rows, d] bf16 (may alias); w [d] f32 or bf16. One block per row, f32 sums.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/dtype.h"

namespace loom::cuda {

// pdl: programmatic dependent launch (launch.cuh; CudaTuning::cuda_pdl).
void LaunchRmsNorm(const void* x, const void* w, DType w_dtype, float eps, float weight_offset,
                   int64_t rows, int64_t d, void* out, cudaStream_t stream, bool pdl);

}  // namespace loom::cuda
