// Element types of tensors. Quantized types are GGUF's block formats: a row of `n` elements is
// n / block_elems blocks of block_bytes each (n must be a multiple of block_elems).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace loom {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,  // 32 elems: f16 scale d + 32 x int8                     = 34 bytes
  kQ4_0,  // 32 elems: f16 scale d + 16 bytes of 4-bit (x-8)        = 18 bytes
  kQ4_K,  // 256 elems: f16 d, f16 dmin, 12 bytes scales, 128 bytes = 144 bytes
  kQ6_K,  // 256 elems: 128 ql, 64 qh, 16 int8 scales, f16 d        = 210 bytes
  kQ5_K,  // 256 elems: q4_K's fields + 32 bytes of 5th bits          = 176 bytes
  kI32,
  kF8E4M3,  // OCP FP8 e4m3fn (HF FP8 checkpoints): 1 sign, 4 exponent, 3 mantissa bits
  kFP8,     // 128 elems: f32 scale d + 128 x e4m3fn codes            = 132 bytes
  kU8,      // raw bytes (MXFP4 blocks and exponents as checkpoints store them)
  kMXFP4,   // 32 elems: e8m0 exponent e + 16 bytes of e2m1 codes    = 17 bytes (GGUF's layout)
};

struct DTypeInfo {
  std::string_view name;
  int block_elems;  // elements per block (1 for plain types)
  int block_bytes;  // bytes per block
  bool quantized;
};

const DTypeInfo& GetDTypeInfo(DType t);
inline std::string_view DTypeName(DType t) { return GetDTypeInfo(t).name; }
// Bytes of a row of `n` elements; n must be a multiple of the block size (CHECKed).
size_t RowBytes(DType t, int64_t n);

// --- scalar conversions (bit-exact with IEEE / numpy / torch round-to-nearest-even) ---
inline float Bf16ToF32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);
// FP8 e4m3fn (torch.float8_e4m3fn): bias 7, no infinities, 0x7F / 0xFF are NaN, largest finite
// 448, subnormals down to 2^-9. Decoding is exact; encoding rounds to nearest even, saturates
// finite values beyond 448 to +-448 (as torch's casts of scaled weights never produce them, this
// only matters for out-of-range inputs) and maps NaN to 0x7F.
float F8E4M3ToF32(uint8_t b);
uint8_t F32ToF8E4M3(float f);

}  // namespace loom
