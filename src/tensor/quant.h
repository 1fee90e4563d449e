// GGUF quantized block formats (byte-for-byte llama.cpp's ggml-common.h layouts) and row
// (de)quantization. A row of n elements of a quantized DType is n / block_elems consecutive blocks.
//
//   block_q8_0 (32 elems, 34 B):  [d f16][qs int8 x32]                       x = d * qs[i]
//   block_q4_0 (32 elems, 18 B):  [d f16][qs u8 x16]   elem i<16: low nibble of qs[i],
//                                                      elem i>=16: high nibble of qs[i-16];
//                                                      x = d * (q - 8)
//   block_q4_K (256 elems, 144 B): [d f16][dmin f16][scales u8 x12][qs u8 x128]
//        8 sub-blocks of 32, each with a 6-bit scale sc and 6-bit min m (GetScaleMinK4);
//        sub-blocks 2j and 2j+1 use the low / high nibbles of qs[32j .. 32j+32);
//        x = d * sc * q - dmin * m
//   block_q6_K (256 elems, 210 B): [ql u8 x128][qh u8 x64][scales int8 x16][d f16]
//        16 sub-blocks of 16 elems with an int8 scale; q = 6 bits (4 from ql, 2 from qh) - 32;
//        x = d * scales[i / 16] * q
//   block_q5_K (256 elems, 176 B): [d f16][dmin f16][scales u8 x12][qh u8 x32][qs u8 x128]
//        q4_K's sub-blocks, scales and mins; the 5th bit of element 32j + l (sub-block j) is bit
//        j of qh[l]; x = d * sc * q - dmin * m with q in 0..31
//
// Not a GGUF format (loom's own, for FP8 weights):
//   block_fp8 (128 elems, 132 B): [d f32][qs e4m3fn x128]               x = e4m3(qs[i]) * d
//        An HF FP8 checkpoint's scales (per tensor, per output channel, or per 128 x 128 block)
//        are all exact as one scale per 128 elements of a row; QuantizeRow picks d = amax / 448.
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/dtype.h"

namespace loom {

inline constexpr int kQK8_0 = 32;
inline constexpr int kQK4_0 = 32;
inline constexpr int kQK_K = 256;
inline constexpr int kQKFP8 = 128;

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_K {
  uint16_t d;     // f16 super-block scale of the 6-bit scales
  uint16_t dmin;  // f16 super-block scale of the 6-bit mins
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];  // low 4 bits
  uint8_t qh[kQK_K / 4];  // high 2 bits
  int8_t scales[kQK_K / 16];
  uint16_t d;  // f16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210);

struct BlockQ5_K {
  uint16_t d;     // f16 super-block scale of the 6-bit scales
  uint16_t dmin;  // f16 super-block scale of the 6-bit mins
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];  // 5th bits
  uint8_t qs[kQK_K / 2];  // low 4 bits, as q4_K
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockFP8 {
  float d;             // f32 scale
  uint8_t qs[kQKFP8];  // e4m3fn codes
};
static_assert(sizeof(BlockFP8) == 132);

// OCP MXFP4 as GGUF stores it (ggml block_mxfp4): element j (0..15) is the low nibble of qs[j],
// element j + 16 its high nibble; each nibble an e2m1 code (sign, 2 exponent bits, 1 mantissa
// bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6), times 2^(e - 127). Hugging Face checkpoints pack the same
// codes two adjacent elements a byte (hf_quantization.h's DequantizeMxfp4).
inline constexpr int kQKMXFP4 = 32;
struct BlockMXFP4 {
  uint8_t e;                 // e8m0 exponent, bias 127 (255: NaN)
  uint8_t qs[kQKMXFP4 / 2];  // e2m1 codes
};
static_assert(sizeof(BlockMXFP4) == 17);
// The value of e2m1 code `c` (0..15).
float E2M1ToF32(uint8_t c);
// 2^(e - 127 - half) for an e8m0 exponent e < 255 (half 0 or 1), built from its bits: exact,
// subnormals included.
inline float E8M0ToF32(uint8_t e, int half = 0) {
  const int k = static_cast<int>(e) - half;  // the biased exponent of the result
  const uint32_t bits = k >= 1 ? static_cast<uint32_t>(k) << 23 : 0x00400000u >> -k;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// Element j (0..31) of an MXFP4 block: code * 2^(e - 127), exactly (e < 255).
inline float Mxfp4Element(const BlockMXFP4& b, int j) {
  const uint8_t code = j < kQKMXFP4 / 2 ? b.qs[j] & 0xf : b.qs[j - kQKMXFP4 / 2] >> 4;
  return E2M1ToF32(code) * E8M0ToF32(b.e);
}

// The 6-bit scale and min of sub-block j (0..7) of a q4_K block (llama.cpp get_scale_min_k4).
inline void GetScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

// Decodes n elements of `dtype` at `src` into f32 `dst`. Works for f32/f16/bf16/f8_e4m3 and every
// quantized type (i32 is not a float type: CHECK). n must be a multiple of the block size (CHECK).
// Bit-exact with llama.cpp's reference dequantizers (and gguf-py's numpy ones).
void DequantizeRow(DType dtype, const void* src, float* dst, int64_t n);

// Encodes n f32 values into `dst` (RowBytes(dtype, n) bytes). Supports f32/f16/bf16/f8_e4m3 and
// every quantized type. Every quantized type matches llama.cpp's reference quantizer byte for byte:
// q8_0 and q4_0 quantize_row_q{8,4}_0_ref (and gguf-py's); q4_K, q5_K and q6_K
// quantize_row_q{4,5,6}_K_ref, i.e. what llama-quantize writes without an importance matrix
// (make_qkx2_quants / make_qx_quants scale searches, same f32 operations in the same order;
// quant.cc is built with -ffp-contract=off so that no FMA changes a rounding).
void QuantizeRow(DType dtype, const float* src, void* dst, int64_t n);

}  // namespace loom
