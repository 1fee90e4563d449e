// out[n, m] = x[n, k] @ w[m, k]^T for small n (decode): a bandwidth-bound GEMV-style kernel.
// One warp per output column m (for n = 1 and small m, 2/4/8 warps split the column's k and
// meet in shared memory, so the GPU has enough blocks): each lane streams 16-byte chunks of w's
// row (4 loads in flight),
// multiplies them with the n rows of x (bf16, read through L1 since every warp of the block
// shares them), f32 accumulation, warp-shuffle reduction. bf16 x/w; out bf16 or f32.
// Requirements: 1 <= n <= kSmallBatchMaxRows, k % 8 == 0, x and w 16-byte aligned.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/dtype.h"

namespace loom::cuda {

inline constexpr int kSmallBatchMaxRows = 8;

// True when LaunchSmallBatchGemm accepts these arguments.
bool SmallBatchGemmApplies(const void* x, const void* w, int64_t n, int64_t k);

// kNone: out [n, m]. kAddTo: out [n, m] += x @ w^T (bf16; a residual stream). kSiluMul /
// kGeluTanhMul: w's rows are (gate, up) pairs (rows 2j, 2j + 1, CudaBackend::FuseGateUp's layout)
// and out [n, m / 2] = act(gate) * up, bf16.
enum class GemvEpilogue { kNone, kAddTo, kSiluMul, kGeluTanhMul };

// RMSNorm applied to x (one row) inside the kernel: x / rms(x) * (w + offset), rounded to bf16.
inline constexpr int64_t kGemvNormMaxK = 8192;  // the normalized row lives in shared memory
struct GemvNorm {
  const float* w = nullptr;  // [k] f32
  float eps = 0.f, offset = 0.f;
};

// True when LaunchSmallBatchGemm accepts `norm` for these arguments (n = 1, k <= kGemvNormMaxK).
bool SmallBatchGemmNormApplies(const void* x, const void* w, int64_t n, int64_t k);

// out_dtype f32 only with kNone. norm: null, or RMSNorm x first (SmallBatchGemmNormApplies).
// stream_batch1: n = 1 takes the TMA-streamed GEMV (stream_gemv.cuh) where it applies, with
// `queue` (LaunchStreamGemv; null: no work queue). pdl: programmatic dependent launch
// (launch.cuh; CudaTuning::cuda_pdl).
void LaunchSmallBatchGemm(const void* x, const void* w, void* out, DType out_dtype, int64_t n,
                          int64_t m, int64_t k, cudaStream_t stream, bool pdl,
                          GemvEpilogue epilogue, const GemvNorm* norm, bool stream_batch1,
                          unsigned* queue = nullptr);

}  // namespace loom::cuda
