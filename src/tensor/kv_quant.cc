#include "tensor/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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
  }
  return "?";
}

StatusOr<KvQuant> ParseKvQuant(std::string_view s) {
  if (s == "off" || s == "none") return KvQuant::kNone;
  if (s == "fp8") return KvQuant::kFp8;
  if (s == "8" || s == "int8") return KvQuant::kInt8;
  if (s == "4" || s == "int4") return KvQuant::kInt4;
  if (s.starts_with("turbo")) {
    return InvalidArgumentError("KV quantization '" + std::string(s) +
                                "': the rotated (turbo) scheme is not implemented yet; use off, "
                                "fp8, 8 or 4");
  }
  return InvalidArgumentError("KV quantization '" + std::string(s) +
                              "' is not one of off, fp8, 8 (int8), 4 (int4)");
}

int KvQuantGroup(int head_dim) {
  for (int g : {64, 32, 16}) {
    if (head_dim > 0 && head_dim % g == 0) return g;
  }
  return 0;
}

size_t KvQuantCodeBytes(KvQuant q, int head_dim) {
  CHECK(q != KvQuant::kNone) << "KvQuantCodeBytes of an unquantized row";
  return q == KvQuant::kInt4 ? static_cast<size_t>(head_dim) / 2 : static_cast<size_t>(head_dim);
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
  CHECK(q != KvQuant::kNone && g > 0) << KvQuantName(q) << " row of " << head_dim;
  for (int g0 = 0, gi = 0; g0 < head_dim; g0 += g, ++gi) {
    const float* xg = x + g0;
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
  CHECK(q != KvQuant::kNone && g > 0) << KvQuantName(q) << " row of " << head_dim;
  for (int g0 = 0, gi = 0; g0 < head_dim; g0 += g, ++gi) {
    float* o = out + g0;
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
  if (k == v) return std::string(KvQuantName(k));
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
