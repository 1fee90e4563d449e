// Row-dot kernels for the CPU MatMul: out[r] = dot(w_row[r], x) for a tile of kDotTileRows weight
// rows against one activation row, for every weight dtype.
//
// Numerics (what makes batched == solo bit-exact): every output element is accumulated the same
// way whatever the tile, batch size or thread count:
//   - f32/f16/bf16 weights: x stays f32. One 8-lane f32 accumulator per output, fed 8 elements at
//     a time in order (lane l sums elements l, l+8, ...), reduced as ((l0+l4)+(l2+l6)) +
//     ((l1+l5)+(l3+l7)), then the k % 8 tail is added in order.
//   - quantized weights: x is first quantized to q8 blocks of 32 (ActQ8, llama.cpp's q8_0
//     rounding). Integer block dots are exact; lane l of block b holds the products of elements
//     4l..4l+3 of b, scaled by the block's f32 scale and accumulated per lane; same reduction.
// The AVX2 kernels fuse multiply-add (FMA); the scalar kernels do the same sequence unfused, so
// the two agree up to f32 rounding.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace loom::cpu {

inline constexpr int kDotTileRows = 4;

// One activation row quantized for quantized-weight kernels: k / 32 blocks.
struct ActQ8Row {
  const int8_t* qs;  // [k] int8
  const float* d;    // [k / 32] f32 block scales
  const float* ds;   // [k / 32] f32: d * (sum of the block's qs), for q4_K's mins
};

// Quantizes x [k] (k % 32 == 0) into qs [k], d [k / 32], ds [k / 32].
void QuantizeActRow(const float* x, int64_t k, int8_t* qs, float* d, float* ds);

// w: kDotTileRows row pointers (may repeat; each row is k elements of the kernel's dtype).
// x: f32 [k] for plain dtypes; act for quantized dtypes. out: kDotTileRows floats.
using DotTileF = void (*)(const void* const* w, const float* x, int64_t k, float* out);
using DotTileQ = void (*)(const void* const* w, const ActQ8Row& x, int64_t k, float* out);

struct DotKernels {
  const char* isa;  // "avx2" or "scalar"
  DotTileF f32, f16, bf16;
  DotTileQ q8_0, q4_0, q4_K, q6_K;
};

const DotKernels& ScalarDotKernels();
// Null when the CPU lacks AVX2 + FMA + F16C.
const DotKernels* Avx2DotKernels();
// AVX2 when available and not `force_scalar`.
const DotKernels& SelectDotKernels(bool force_scalar);

}  // namespace loom::cpu
