// The CUDA backend's layout of quantized weights (GGUF's q8_0, q4_0, q4_K, q5_K, q6_K; loom's
// fp8): each row
// keeps its bytes (RowBytes(dtype, k), so row slices, ConcatRows and FuseGateUp work unchanged),
// but within a row the blocks' fields are regrouped into planes the kernels read with 16-byte
// loads. Upload repacks once at load (RepackRows); the values are the GGUF ones bit for bit
// (UnpackRows restores the original bytes). A row of k elements has g = k / 32 groups of 32
// and s = k / 256 super-blocks:
//
//   q8_0  [qs int8 x k][d f16 x g]
//   q4_0  [nib 16 B x g][d f16 x g]
//   q4_K  [nib 16 B x g][meta 16 B x s: d f16, dmin f16, the 12 scale bytes of the block]
//   q5_K  [nib 16 B x g][hb u32 x g][meta 16 B x s, as q4_K]
//   q6_K  [nib 16 B x g][hi 8 B x g][scales int8 x k/16][d f16 x s]
//   fp8   [qs e4m3 x k][d f32 x k/128]
//
// nib: the 4-bit codes of a group, byte i holding element i (low nibble) and element 16 + i
// (high nibble); for q4_0 that is the block's own qs. hi (q6_K): the top 2 bits of each 6-bit
// code, two u32 words; word h, byte b, bits 2t..2t+1 belong to element 4 * (4h + t) + b. So the
// word j of nib with (hi[0] >> 2j) and (hi[1] >> 2j) gives four whole codes a step (elements
// 4j..4j+3 and 16+4j..16+4j+3). hb (q5_K): the 5th bit of each code, byte b bit t belonging to
// element 4t + b, so (hb >> j) & 0x01010101 are the 5th bits of elements 4j..4j+3 and
// (hb >> (4 + j)) those of 16+4j..16+4j+3, already at their bytes. Values (as tensor/quant.h):
// q8_0 d*q, q4_0 d*(q-8), q4_K / q5_K d*sc*q - dmin*m per sub-block of 32, q6_K
// d*scale*(q-32) per 16, fp8 e4m3(q)*d per 128.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace loom::cuda {

// Whether the CUDA backend can keep weights of `dtype` quantized (q8_0, q4_0, q4_K, q5_K, q6_K,
// fp8).
bool KeepsQuantized(DType dtype);

// Element granularity of `dtype`'s rows (32 for q8_0 / q4_0, 128 for fp8, 256 for the K-quants).
int QuantRowMultiple(DType dtype);

// GGUF block order (tensor/quant.h) -> the device layout above, `rows` rows of `k` elements
// (k a multiple of QuantRowMultiple), and back. src and dst do not overlap.
void RepackRows(DType dtype, const void* src, void* dst, int64_t rows, int64_t k);
void UnpackRows(DType dtype, const void* src, void* dst, int64_t rows, int64_t k);

}  // namespace loom::cuda
