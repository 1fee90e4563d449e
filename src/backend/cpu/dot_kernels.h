// Row-dot kernels for the CPU MatMul: out[a][r] = dot(w_row[r], x_row[a]) for a tile of
// kDotTileRows weight rows against 1..kDotMaxActRows activation rows, for every weight dtype.
//
// Numerics (what makes batched == solo bit-exact): every output element is accumulated the same
// way whatever the tile, the number of activation rows per call, the batch size or thread count:
//   - f32/f16/bf16 weights (and fp8 / mxfp4, decoded to f32 as code * d, exactly): x stays f32. One
//   8-lane f32 accumulator per output, fed 8 elements at
//     a time in order (lane l sums elements l, l+8, ...), reduced as ((l0+l4)+(l2+l6)) +
//     ((l1+l5)+(l3+l7)), then the k % 8 tail is added in order.
//   - quantized weights: x is first quantized to q8 blocks of 32 (ActQ8, llama.cpp's q8_0
//     rounding). Integer block dots are exact; lane l of block b holds the products of elements
//     4l..4l+3 of b, scaled by the block's f32 scale and accumulated per lane; same reduction.
// The AVX2 kernels fuse multiply-add (FMA); the scalar kernels do the same sequence unfused, so
// the two agree up to f32 rounding.
//
// Why several activation rows per call: a batched decode step multiplies the same weights by a
// few activation rows. With one row per call every weight element is loaded and decoded (f16 ->
// f32, q8 |w|, nibble unpacking) once per activation row, and that redundant decoding, not
// memory, bounds the step. A call decodes each weight vector once and feeds it to the
// accumulators of all its activation rows; each accumulator still sees exactly the sequence of
// operations it would see alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "tensor/dtype.h"

namespace loom::cpu {

inline constexpr int kDotTileRows = 4;
// Most activation rows one kernel call takes (the x86 kernels are instantiated for 1..8).
inline constexpr int kDotMaxActRows = 8;

// One activation row quantized for quantized-weight kernels: k / 32 blocks.
struct ActQ8Row {
  const int8_t* qs;  // [k] int8
  const float* d;    // [k / 32] f32 block scales
  const float* ds;   // [k / 32] f32: d * (sum of the block's qs), for q4_K's mins
};

// Quantizes x [k] (k % 32 == 0) into qs [k], d [k / 32], ds [k / 32].
void QuantizeActRow(const float* x, int64_t k, int8_t* qs, float* d, float* ds);

// Memory a kernel call prefetches while it runs, spread evenly over its k: MatMul points each
// call at its share of the next tile, so that a tile met by several calls (one per group of
// activation rows) brings the next one in at an even rate instead of all during the first call.
// One-row calls prefetch exactly that into L1; the plain and bf16-activation kernels with several
// rows prefetch the `bytes` after it, into L2 (measured, see dot_kernels_x86.inc). Empty: no
// prefetch. A prefetch past the end of the weights is harmless.
struct DotPrefetch {
  const char* p = nullptr;
  int64_t bytes = 0;
};

// w: kDotTileRows row pointers (may repeat; each row is k elements of the kernel's dtype).
// x: num_x activation rows, 1 <= num_x <= kDotMaxActRows (CHECKed by the caller, not here):
//    f32 [k] pointers for plain dtypes, ActQ8Row for quantized dtypes.
// pf: see DotPrefetch (the scalar kernels ignore it).
// out: [num_x][kDotTileRows] floats, out[a * kDotTileRows + r] = dot(w[r], x[a]); bit-identical
//    to what a call with x[a] alone writes to out[r].
using DotTileF = void (*)(const void* const* w, const float* const* x, int num_x, int64_t k,
                          DotPrefetch pf, float* out);
using DotTileQ = void (*)(const void* const* w, const ActQ8Row* x, int num_x, int64_t k,
                          DotPrefetch pf, float* out);
// bf16 weights x bf16 activation rows (x: num_x bf16 [k] pointers), f32 accumulation: the opt-in
// bf16-activation mode (CpuBackendOptions::bf16_activations). Not the f32 numerics above: x is
// rounded to bf16 first, and each f32 lane accumulates bf16 products in pairs (AVX512-BF16
// vdpbf16ps). Still row-independent: a row's result is the same alone or in any batch.
using DotTileB = void (*)(const void* const* w, const uint16_t* const* x, int num_x, int64_t k,
                          DotPrefetch pf, float* out);

struct DotKernels {
  const char* isa;  // "avx512", "avx2" or "scalar"
  DotTileF f32, f16, bf16, fp8, mxfp4;
  DotTileQ q8_0, q4_0, q4_K, q6_K, q5_K;
  // QuantizeActRow or a vector version of it with bit-identical results.
  void (*quantize_act)(const float* x, int64_t k, int8_t* qs, float* d, float* ds);
  // Activation rows per call that MatMul groups a batch into (1..kDotMaxActRows), chosen by
  // measurement (cpu_backend_bench): enough accumulators to hide FMA latency and amortize the
  // weight decoding, few enough to stay in the registers (16 ymm for AVX2, 32 for AVX-512VL).
  int plain_act_rows, quant_act_rows;
  // When set, MatMul's one-row calls use this set's kernels instead (the same bits; chosen by
  // measurement, see dot_kernels_avx512.cc).
  const DotKernels* one_row = nullptr;
  // bf16 weights with bf16 activations (dot_kernels_bf16.cc); null unless the CPU has
  // AVX512-BF16. bf16_act_rows: its activation rows per call.
  DotTileB bf16_bf16act = nullptr;
  int bf16_act_rows = 0;
  // F32ToBf16 over `count` floats (bit-identical), to round x for bf16_bf16act.
  void (*round_bf16)(const float* x, uint16_t* out, int64_t count) = nullptr;
};

// The set's kernel for weight dtype t; null when t is not plain (resp. quantized).
inline DotTileF PlainKernel(const DotKernels& k, DType t) {
  switch (t) {
    case DType::kF32:
      return k.f32;
    case DType::kF16:
      return k.f16;
    case DType::kBF16:
      return k.bf16;
    case DType::kFP8:
      return k.fp8;
    case DType::kMXFP4:
      return k.mxfp4;
    default:
      return nullptr;
  }
}
inline DotTileQ QuantKernel(const DotKernels& k, DType t) {
  switch (t) {
    case DType::kQ8_0:
      return k.q8_0;
    case DType::kQ4_0:
      return k.q4_0;
    case DType::kQ4_K:
      return k.q4_K;
    case DType::kQ6_K:
      return k.q6_K;
    case DType::kQ5_K:
      return k.q5_K;
    default:
      return nullptr;
  }
}

const DotKernels& ScalarDotKernels();
// Null when the CPU lacks AVX2 + FMA + F16C.
const DotKernels* Avx2DotKernels();
// Null unless the CPU has AVX2 + FMA + F16C + AVX-512F/VL/BW/VNNI. The same kernels compiled for
// AVX-512 (VNNI int8 dots, 32 ymm registers; same 8-lane vectors and order: bit-identical to
// AVX2), with more activation rows per call; one-row calls stay AVX2's (dot_kernels_avx512.cc).
const DotKernels* Avx512DotKernels();
// The bf16-activation kernel for this CPU (AVX512-BF16 + VL), or null; and its vectorized
// F32ToBf16 rounding of x (null alike).
DotTileB Bf16ActDotKernel();
using Bf16RoundFn = void (*)(const float* x, uint16_t* out, int64_t count);
Bf16RoundFn Bf16RoundRowsKernel();
// A cap on SelectDotKernels' choice (CpuBackendOptions::isa; the CLI's --cpu-isa).
enum class CpuIsa { kAuto, kAvx512, kAvx2, kScalar };
// "auto", "avx512", "avx2" or "scalar"; nullopt for anything else.
std::optional<CpuIsa> ParseCpuIsa(std::string_view name);
// The best set the CPU has up to `cap`: AVX-512, else AVX2, else scalar. kAvx2 caps the choice
// at AVX2 (for A/B measurements), kScalar selects scalar; kAuto and kAvx512: the best.
const DotKernels& SelectDotKernels(CpuIsa cap);

}  // namespace loom::cpu
