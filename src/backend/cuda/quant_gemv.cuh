// Kernels over quantized weights kept in the CUDA backend's layout (quant_layout.h); fp8 weights
// take fp8_gemv.cuh's GEMV (through LaunchQuantGemv) and this file's dequantization:
//
// LaunchQuantGemv: out[n, m] = x[n, k] @ dequant(w)[m, k]^T for decode-sized n (1..8). Each
// block first quantizes the n rows of x into shared memory, int8 per group of 32 with an f32
// scale and the sums of the two halves (RMSNorm'ed first with `norm`, n = 1), then its warps
// stream weight rows with 16-byte loads (one warp a row, or S warps a row for small m; blocks
// loop over row groups) and dot the codes with x by int8 dot products (dp4a), f32 per group.
// Numerics: the dequantized weight times x rounded to int8 per 32 (as llama.cpp's MMVQ), f32
// accumulation. Same epilogues and outputs as LaunchSmallBatchGemm (small_batch_gemm.cuh).
//
// LaunchDequantRows: bf16 rows of the dequantized weight (the prefill path: dequantize, then
// cuBLASLt; and quantized embedding tables), bit-identical to tensor/quant.h's DequantizeRow
// rounded to bf16.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/small_batch_gemm.cuh"
#include "tensor/dtype.h"

namespace loom::cuda {

inline constexpr int kQuantGemvMaxRows = 8;

// True when LaunchQuantGemv accepts these arguments: a kept-quantized dtype, 1 <= n <=
// kQuantGemvMaxRows, k a multiple of the format's row multiple, 16-byte aligned x, w and rows
// (RowBytes(wt, k) % 16 == 0), and the quantized x fitting shared memory (norm: n = 1 and
// k <= kGemvNormMaxK).
bool QuantGemvApplies(DType wt, const void* x, const void* w, int64_t n, int64_t k, bool norm);

// x [n, k] bf16; w [m, k] of `wt` in the device layout; out as LaunchSmallBatchGemm (f32 only
// with kNone; gated epilogues read (gate, up) row pairs and write m / 2 columns).
void LaunchQuantGemv(DType wt, const void* x, const void* w, void* out, DType out_dtype, int64_t n,
                     int64_t m, int64_t k, cudaStream_t stream, bool pdl, GemvEpilogue epilogue,
                     const GemvNorm* norm);

// out[i, :] (bf16, [count, k]) = scale * dequant(w row r_i): r_i = rows[i] when rows is given
// (a device i32 array; ids outside [0, w_rows) give zeros, as LaunchEmbed), else first_row + i.
// Any row alignment.
void LaunchDequantRows(DType wt, const void* w, int64_t w_rows, int64_t k, const int32_t* rows,
                       int64_t first_row, int64_t count, float scale, void* out,
                       cudaStream_t stream);

}  // namespace loom::cuda
