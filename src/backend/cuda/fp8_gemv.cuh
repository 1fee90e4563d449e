// Kernels over fp8 weights (DType::kFP8, e4m3 codes with an f32 scale per 128 elements of a
// row) kept in the CUDA backend's layout (quant_layout.h: a row is [qs e4m3 x k][d f32 x k/128]).
//
// LaunchFp8Gemv: out[n, m] = x[n, k] @ dequant(w)[m, k]^T for decode-sized n (1..8), with
// LaunchQuantGemv's arguments and epilogues. Unlike the integer formats, x is not quantized: each
// lane streams 16 codes per 16-byte load, decodes them exactly (e4m3 -> f16 -> f32), multiplies
// them with the n bf16 rows of x (read through L1, as LaunchSmallBatchGemm) with f32 FMA, and
// scales each 16-element partial sum by its block's d. So the numerics are the bf16 GEMV's on the
// dequantized weight, up to f32 rounding order.
//
// LaunchFillUniformFp8: a [rows, k] fp8 weight in the device layout holding exactly what
// QuantizeRow(kFP8) makes of HashUniform(seed, i, lo, scale) at element i (base/hash_uniform.h),
// repacked: the random weights of --dummy-weights --quantize fp8, built on the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/small_batch_gemm.cuh"
#include "tensor/dtype.h"

namespace loom::cuda {

// True when LaunchFp8Gemv accepts these arguments: 1 <= n <= kSmallBatchMaxRows, k a multiple of
// 512 (so that every row is 16-byte aligned), 16-byte aligned x and w (norm: n = 1 and
// k <= kGemvNormMaxK).
bool Fp8GemvApplies(const void* x, const void* w, int64_t n, int64_t k, bool norm);

void LaunchFp8Gemv(const void* x, const void* w, void* out, DType out_dtype, int64_t n, int64_t m,
                   int64_t k, cudaStream_t stream, bool pdl, GemvEpilogue epilogue,
                   const GemvNorm* norm);

void LaunchFillUniformFp8(void* dst, int64_t rows, int64_t k, uint64_t seed, float lo, float scale,
                          cudaStream_t stream);

}  // namespace loom::cuda
