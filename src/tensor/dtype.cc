#include "tensor/dtype.h"

#include <cmath>
#include <limits>

#include "base/check.h"

namespace loom {

const DTypeInfo& GetDTypeInfo(DType t) {
  static const DTypeInfo kInfos[] = {
      {"f32", 1, 4, false},     {"f16", 1, 2, false},     {"bf16", 1, 2, false},
      {"q8_0", 32, 34, true},   {"q4_0", 32, 18, true},   {"q4_K", 256, 144, true},
      {"q6_K", 256, 210, true}, {"q5_K", 256, 176, true}, {"i32", 1, 4, false},
      {"f8_e4m3", 1, 1, false}, {"fp8", 128, 132, true},  {"u8", 1, 1, false},
      {"mxfp4", 32, 17, true},
  };
  auto idx = static_cast<size_t>(t);
  CHECK_LT(idx, sizeof(kInfos) / sizeof(kInfos[0]));
  return kInfos[idx];
}

size_t RowBytes(DType t, int64_t n) {
  const DTypeInfo& info = GetDTypeInfo(t);
  CHECK_EQ(n % info.block_elems, 0) << "row of " << n << " elements is not a multiple of the "
                                    << info.name << " block size " << info.block_elems;
  return static_cast<size_t>(n / info.block_elems) * static_cast<size_t>(info.block_bytes);
}

float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t F32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {                                               // subnormal or zero in f16
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);           // rounds to 0
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t h = ((abs >> 13) - (112u << 10));
  uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

namespace {

float F8E4M3Value(uint8_t b) {
  const int exp = (b >> 3) & 0xF, mant = b & 0x7;
  if (exp == 0xF && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(mant), -9)  // subnormal: m * 2^-9
                             : std::ldexp(static_cast<float>(8 + mant), exp - 10);
  return (b & 0x80) ? -mag : mag;
}

}  // namespace

float F8E4M3ToF32(uint8_t b) {
  // A table: an 8B checkpoint's load decodes billions of these.
  static const auto* const kTable = [] {
    auto* t = new float[256];
    for (int i = 0; i < 256; ++i) t[i] = F8E4M3Value(static_cast<uint8_t>(i));
    return t;
  }();
  return kTable[b];
}

uint8_t F32ToF8E4M3(float f) {
  if (std::isnan(f)) return 0x7F;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7E;
  // Subnormal codes (below 2^-6) are multiples of 2^-9: round a * 2^9 (exact) to nearest even;
  // 8 is the smallest normal code.
  if (a < 0x1p-6f) return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  // Normal: keep 3 of the 23 mantissa bits, rounding to nearest even (a carry moves into the
  // exponent), then rebias the exponent from 127 to 7. a < 448 rounds at most to 448 (0x7E).
  uint32_t bits;
  std::memcpy(&bits, &a, 4);
  bits += (1u << 19) - 1 + ((bits >> 20) & 1u);
  return sign | static_cast<uint8_t>((bits >> 20) - ((127u - 7u) << 3));
}

}  // namespace loom
