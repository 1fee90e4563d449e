#include "tensor/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"

namespace loom {
namespace {

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Bytes of one group's scales.
size_t GroupScaleBytes(KvQuant q) { return q == KvQuant::kInt4 ? 4 : 2; }

// The Lloyd-Max quantizers of a unit Gaussian (Max, 1960): 8 and 16 levels, ascending.
constexpr float kLevels8[8] = {-2.1520f, -1.3440f, -0.7560f, -0.2451f,
                               0.2451f,  0.7560f,  1.3440f,  2.1520f};
constexpr float kLevels16[16] = {-2.7326f, -2.0690f, -1.6181f, -1.2562f, -0.9424f, -0.6568f,
                                 -0.3881f, -0.1284f, 0.1284f,  0.3881f,  0.6568f,  0.9424f,
                                 1.2562f,  1.6181f,  2.0690f,  2.7326f};

// The rotation's fixed sign of element i: a bit of splitmix64(i) (the same on every machine).
float RotationSign(int i) {
  uint64_t z = 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(i) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (z & 1) != 0 ? -1.0f : 1.0f;
}

// x = H x / sqrt(n) (H the unnormalized Walsh-Hadamard butterflies), n a power of two.
void Hadamard(float* x, int n) {
  for (int h = 1; h < n; h <<= 1) {
    for (int i = 0; i < n; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float inv = 1.0f / std::sqrt(static_cast<float>(n));
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

// Element i (< 8) of a packed group of 8 codes of `bits` bits at p.
uint32_t PackedCode(const uint8_t* p, int bits, int i) {
  uint32_t w = 0;
  for (int b = 0; b < bits; ++b) w |= static_cast<uint32_t>(p[b]) << (8 * b);
  return (w >> (bits * i)) & ((1u << bits) - 1);
}

int CodeBits(KvQuant q) {
  return q == KvQuant::kInt4 || q == KvQuant::kRot4 ? 4 : q == KvQuant::kRot3 ? 3 : 8;
}

}  // namespace

std::string_view KvQuantName(KvQuant q) {
  switch (q) {
    case KvQuant::kNone:
      return "off";
    case KvQuant::kFp8:
      return "fp8";
    case KvQuant::kInt8:
      return "int8";
    case KvQuant::kInt4:
      return "int4";
    case KvQuant::kRot8:
      return "turbo8";
    case KvQuant::kRot4:
      return "turbo4";
    case KvQuant::kRot3:
      return "turbo3";
  }
  return "?";
}

StatusOr<KvQuant> ParseKvQuant(std::string_view s) {
  if (s == "off" || s == "none") return KvQuant::kNone;
  if (s == "fp8") return KvQuant::kFp8;
  if (s == "8" || s == "int8") return KvQuant::kInt8;
  if (s == "4" || s == "int4") return KvQuant::kInt4;
  if (s == "turbo8") return KvQuant::kRot8;
  if (s == "turbo4") return KvQuant::kRot4;
  if (s == "turbo3") return KvQuant::kRot3;
  return InvalidArgumentError("KV quantization '" + std::string(s) +
                              "' is not one of off, fp8, 8 (int8), 4 (int4), turbo8, turbo4, "
                              "turbo3");
}

StatusOr<KvQuantPair> ParseKvQuantPair(std::string_view s) {
  if (s == "turbo") return KvQuantPair{KvQuant::kRot8, KvQuant::kRot3};
  if (s.starts_with("turbo:")) {
    const std::string_view spec = s.substr(6);
    const auto bits = [](char c) {
      return c == '8'   ? KvQuant::kRot8
             : c == '4' ? KvQuant::kRot4
             : c == '3' ? KvQuant::kRot3
                        : KvQuant::kNone;
    };
    if (spec.size() == 4 && spec[0] == 'k' && spec[2] == 'v') {
      const KvQuant k = bits(spec[1]), v = bits(spec[3]);
      if (k != KvQuant::kNone && k != KvQuant::kRot3 && v != KvQuant::kNone) {
        return KvQuantPair{k, v};
      }
    }
    return InvalidArgumentError("KV quantization '" + std::string(s) +
                                "': turbo takes k<8|4>v<8|4|3>, e.g. turbo:k8v3");
  }
  ASSIGN_OR_RETURN(const KvQuant q, ParseKvQuant(s));
  return KvQuantPair{q, q};
}

bool KvQuantFits(KvQuant q, int head_dim) {
  if (q == KvQuant::kNone) return true;
  if (KvQuantGroup(head_dim) == 0) return false;
  return !KvQuantRotated(q) || (head_dim & (head_dim - 1)) == 0;
}

void RotateKvRow(float* x, int head_dim) {
  for (int i = 0; i < head_dim; ++i) x[i] *= RotationSign(i);
  Hadamard(x, head_dim);
}

void UnrotateKvRow(float* x, int head_dim) {
  Hadamard(x, head_dim);
  for (int i = 0; i < head_dim; ++i) x[i] *= RotationSign(i);
}

const float* KvQuantLevels(KvQuant q) {
  return q == KvQuant::kRot4 ? kLevels16 : q == KvQuant::kRot3 ? kLevels8 : nullptr;
}

int KvQuantGroup(int head_dim) {
  for (int g : {64, 32, 16}) {
    if (head_dim > 0 && head_dim % g == 0) return g;
  }
  return 0;
}

size_t KvQuantCodeBytes(KvQuant q, int head_dim) {
  CHECK(q != KvQuant::kNone) << "KvQuantCodeBytes of an unquantized row";
  return static_cast<size_t>(head_dim) * CodeBits(q) / 8;
}

size_t KvQuantScaleBytes(KvQuant q, int head_dim) {
  CHECK(q != KvQuant::kNone) << "KvQuantScaleBytes of an unquantized row";
  const int g = KvQuantGroup(head_dim);
  CHECK_GT(g, 0) << "KV quantization needs a head_dim that is a multiple of 16, got " << head_dim;
  return static_cast<size_t>(head_dim / g) * GroupScaleBytes(q);
}

size_t KvQuantRowBytes(KvQuant q, int head_dim) {
  return KvQuantCodeBytes(q, head_dim) + KvQuantScaleBytes(q, head_dim);
}

void QuantizeKvRow(KvQuant q, const float* x, int head_dim, uint8_t* row) {
  QuantizeKvRow(q, x, head_dim, row, row + KvQuantCodeBytes(q, head_dim));
}

void DequantizeKvRow(KvQuant q, const uint8_t* row, int head_dim, float* out) {
  DequantizeKvRow(q, row, row + KvQuantCodeBytes(q, head_dim), head_dim, out);
}

void QuantizeKvRow(KvQuant q, const float* x, int head_dim, uint8_t* out, uint8_t* scales) {
  const int g = KvQuantGroup(head_dim);
  CHECK(q != KvQuant::kNone && KvQuantFits(q, head_dim))
      << KvQuantName(q) << " row of " << head_dim;
  // A rotated row is turned in a per-thread buffer (StoreKv quantizes every stored row: no
  // allocation per row).
  thread_local std::vector<float> turned;
  if (KvQuantRotated(q)) {
    turned.assign(x, x + head_dim);
    RotateKvRow(turned.data(), head_dim);
    x = turned.data();
    if (q == KvQuant::kRot8) q = KvQuant::kInt8;  // int8 of the rotated values
  }
  for (int g0 = 0, gi = 0; g0 < head_dim; g0 += g, ++gi) {
    const float* xg = x + g0;
    if (q == KvQuant::kRot4 || q == KvQuant::kRot3) {
      // The group's RMS as the scale; each value's nearest level (the first of a tie).
      float ss = 0.0f;
      for (int i = 0; i < g; ++i) ss += xg[i] * xg[i];
      const uint16_t s16 = F32ToBf16(std::sqrt(ss / static_cast<float>(g)));
      StoreU16(scales + 2 * gi, s16);
      const float sc = Bf16ToF32(s16);
      const int bits = CodeBits(q), n = 1 << bits;
      const float* levels = KvQuantLevels(q);
      uint8_t* codes = out + g0 * bits / 8;
      for (int i0 = 0; i0 < g; i0 += 8) {
        uint32_t w = 0;
        for (int i = 0; i < 8; ++i) {
          const float r = sc > 0.0f ? xg[i0 + i] / sc : 0.0f;
          int best = 0;
          for (int c = 1; c < n; ++c) {
            if (std::fabs(r - levels[c]) < std::fabs(r - levels[best])) best = c;
          }
          w |= static_cast<uint32_t>(best) << (bits * i);
        }
        for (int b = 0; b < bits; ++b)
          codes[i0 * bits / 8 + b] = static_cast<uint8_t>(w >> (8 * b));
      }
      continue;
    }
    if (q == KvQuant::kInt4) {
      float lo = xg[0], hi = xg[0];
      for (int i = 1; i < g; ++i) {
        lo = std::min(lo, xg[i]);
        hi = std::max(hi, xg[i]);
      }
      const uint16_t d16 = F32ToBf16((hi - lo) / 15.0f), m16 = F32ToBf16(lo);
      StoreU16(scales + 4 * gi, d16);
      StoreU16(scales + 4 * gi + 2, m16);
      const float d = Bf16ToF32(d16), m = Bf16ToF32(m16);
      uint8_t* codes = out + g0 / 2;
      for (int j = 0; j < g / 2; ++j) {
        uint8_t nib[2];
        for (int h = 0; h < 2; ++h) {
          const float v = d > 0.0f ? std::nearbyint((xg[j + h * g / 2] - m) / d) : 0.0f;
          nib[h] = static_cast<uint8_t>(std::clamp(v, 0.0f, 15.0f));
        }
        codes[j] = static_cast<uint8_t>(nib[0] | (nib[1] << 4));
      }
      continue;
    }
    float amax = 0.0f;
    for (int i = 0; i < g; ++i) amax = std::max(amax, std::fabs(xg[i]));
    const float qmax = q == KvQuant::kFp8 ? 448.0f : 127.0f;
    const uint16_t d16 = F32ToBf16(amax / qmax);
    StoreU16(scales + 2 * gi, d16);
    const float d = Bf16ToF32(d16);
    uint8_t* codes = out + g0;
    for (int i = 0; i < g; ++i) {
      const float r = d > 0.0f ? xg[i] / d : 0.0f;
      if (q == KvQuant::kFp8) {
        codes[i] = F32ToF8E4M3(r);  // saturates at 448 (d rounded down by at most 2^-9)
      } else {
        codes[i] = static_cast<uint8_t>(
            static_cast<int8_t>(std::clamp(std::nearbyint(r), -127.0f, 127.0f)));
      }
    }
  }
}

void DequantizeKvRow(KvQuant q, const uint8_t* row, const uint8_t* scales, int head_dim,
                     float* out) {
  const int g = KvQuantGroup(head_dim);
  CHECK(q != KvQuant::kNone && KvQuantFits(q, head_dim))
      << KvQuantName(q) << " row of " << head_dim;
  if (q == KvQuant::kRot8) q = KvQuant::kInt8;
  for (int g0 = 0, gi = 0; g0 < head_dim; g0 += g, ++gi) {
    float* o = out + g0;
    if (q == KvQuant::kRot4 || q == KvQuant::kRot3) {
      const float sc = Bf16ToF32(LoadU16(scales + 2 * gi));
      const int bits = CodeBits(q);
      const float* levels = KvQuantLevels(q);
      for (int i0 = 0; i0 < g; i0 += 8) {
        const uint8_t* p = row + (g0 + i0) * bits / 8;
        for (int i = 0; i < 8; ++i) o[i0 + i] = levels[PackedCode(p, bits, i)] * sc;
      }
      continue;
    }
    if (q == KvQuant::kInt4) {
      const float d = Bf16ToF32(LoadU16(scales + 4 * gi));
      const float m = Bf16ToF32(LoadU16(scales + 4 * gi + 2));
      const uint8_t* codes = row + g0 / 2;
      for (int j = 0; j < g / 2; ++j) {
        o[j] = std::fma(static_cast<float>(codes[j] & 0x0f), d, m);
        o[j + g / 2] = std::fma(static_cast<float>(codes[j] >> 4), d, m);
      }
      continue;
    }
    const float d = Bf16ToF32(LoadU16(scales + 2 * gi));
    const uint8_t* codes = row + g0;
    for (int i = 0; i < g; ++i) {
      o[i] = q == KvQuant::kFp8 ? F8E4M3ToF32(codes[i]) * d
                                : static_cast<float>(static_cast<int8_t>(codes[i])) * d;
    }
  }
}

std::string KvFormat::Name() const {
  if (!quantized()) return std::string(DTypeName(dtype));
  if (k == v && !KvQuantRotated(k)) return std::string(KvQuantName(k));
  if (KvQuantRotated(k) && KvQuantRotated(v)) {
    const auto bits = [](KvQuant q) { return std::to_string(CodeBits(q)); };
    return "turbo:k" + bits(k) + "v" + bits(v);
  }
  const auto part = [&](KvQuant q) {
    return q == KvQuant::kNone ? std::string(DTypeName(dtype)) : std::string(KvQuantName(q));
  };
  return "k:" + part(k) + ",v:" + part(v);
}

size_t KvFormat::RowPairBytes(int head_dim) const {
  const auto bytes = [&](KvQuant q) {
    return q == KvQuant::kNone ? RowBytes(dtype, head_dim) : KvQuantRowBytes(q, head_dim);
  };
  return bytes(k) + bytes(v);
}

}  // namespace loom
