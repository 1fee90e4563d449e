#include "tensor/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"

namespace loom {
namespace {

void DequantizeQ8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[i * kQK8_0 + j] = d * static_cast<float>(x[i].qs[j]);
  }
}

void DequantizeQ4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int x0 = (x[i].qs[j] & 0x0F) - 8;
      const int x1 = (x[i].qs[j] >> 4) - 8;
      y[i * kQK4_0 + j] = static_cast<float>(x0) * d;
      y[i * kQK4_0 + j + kQK4_0 / 2] = static_cast<float>(x1) * d;
    }
  }
}

void DequantizeQ4_K(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = F16ToF32(x[i].d);
    const float min = F16ToF32(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    for (int j = 0; j < kQK_K; j += 64) {
      GetScaleMinK4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc;
      const float m1 = min * m;
      GetScaleMinK4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc;
      const float m2 = min * m;
      // Written as separate statements so no compiler contracts d * q - m into an FMA.
      for (int l = 0; l < 32; ++l) {
        const float p = d1 * static_cast<float>(q[l] & 0xF);
        *y++ = p - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const float p = d2 * static_cast<float>(q[l] >> 4);
        *y++ = p - m2;
      }
      q += 32;
      is += 2;
    }
  }
}

void DequantizeQ5_K(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    const float d = F16ToF32(x[i].d);
    const float min = F16ToF32(x[i].dmin);
    uint8_t sc, m;
    for (int j = 0; j < 8; j += 2) {  // sub-blocks j, j + 1: the low / high nibbles of ql
      GetScaleMinK4(j, x[i].scales, &sc, &m);
      const float d1 = d * sc;
      const float m1 = min * m;
      GetScaleMinK4(j + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int l = 0; l < 32; ++l) {
        const float p = d1 * static_cast<float>((ql[l] & 0xF) + (((qh[l] >> j) & 1) << 4));
        *y++ = p - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const float p = d2 * static_cast<float>((ql[l] >> 4) + (((qh[l] >> (j + 1)) & 1) << 4));
        *y++ = p - m2;
      }
      ql += 32;
    }
  }
}

void DequantizeQ6_K(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < kQK_K; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * static_cast<float>(q1);
        y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
        y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
        y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

// llama.cpp quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) (half away from zero).
void QuantizeQ8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[i * kQK8_0 + j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = F32ToF16(d);
    for (int j = 0; j < kQK8_0; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::roundf(x[i * kQK8_0 + j] * id));
    }
  }
}

// llama.cpp quantize_row_q4_0_ref: d = (signed value of largest magnitude) / -8,
// q = min(15, trunc(x * id + 8.5f)). The product and the sum are rounded separately (as in gguf-py,
// whose numpy code pins the reference down; this file is built without FMA contraction).
void QuantizeQ4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK4_0;
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQK4_0; ++j) {
      if (amax < std::fabs(xb[j])) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = F32ToF16(d);
    auto q = [&](float v) {
      volatile float prod = v * id;  // volatile: keep the product rounded to f32 (no FMA)
      const float t = std::trunc(prod + 8.5f);
      return static_cast<uint8_t>(std::clamp(static_cast<int>(t), 0, 15));
    };
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[i].qs[j] = static_cast<uint8_t>(q(xb[j]) | (q(xb[j + kQK4_0 / 2]) << 4));
    }
  }
}

int RoundClamp(float v, int lo, int hi) {
  return std::clamp(static_cast<int>(std::lround(v)), lo, hi);
}

// Min/max fit per 32-element sub-block: x ~= s * q - m with q in 0..kMaxQ, m >= 0; the 8 scales
// and mins are then quantized to 6 bits against the block's f16 d and dmin. Writes d, dmin, the
// 12 scale bytes and each element's level (0..kMaxQ) in `levels`.
template <int kMaxQ>
void FitScaleMinK(const float* xb, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales_out,
                  uint8_t* levels) {
  float scales[8], mins[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float lo = 0.0f, hi = 0.0f;
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, xb[32 * j + l]);
      hi = std::max(hi, xb[32 * j + l]);
    }
    scales[j] = (hi - lo) / static_cast<float>(kMaxQ);
    mins[j] = -lo;
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  *d_out = F32ToF16(max_scale / 63.0f);
  *dmin_out = F32ToF16(max_min / 63.0f);
  const float d = F16ToF32(*d_out);
  const float dmin = F16ToF32(*dmin_out);
  std::memset(scales_out, 0, 12);
  for (int j = 0; j < 8; ++j) {
    // Round the scale up so the sub-block's range still fits in 0..kMaxQ after 6-bit rounding.
    const int ls = d > 0.0f ? std::clamp(static_cast<int>(std::ceil(scales[j] / d)), 0, 63) : 0;
    const int lm = dmin > 0.0f ? RoundClamp(mins[j] / dmin, 0, 63) : 0;
    if (j < 4) {
      scales_out[j] = static_cast<uint8_t>(ls);
      scales_out[j + 4] = static_cast<uint8_t>(lm);
    } else {
      scales_out[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales_out[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales_out[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
    const float s = d * static_cast<float>(ls);
    const float m = dmin * static_cast<float>(lm);
    for (int l = 0; l < 32; ++l) {
      levels[32 * j + l] =
          s > 0.0f ? static_cast<uint8_t>(RoundClamp((xb[32 * j + l] + m) / s, 0, kMaxQ)) : 0;
    }
  }
}

void QuantizeQ4_K(const float* x, BlockQ4_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t levels[kQK_K];
    FitScaleMinK<15>(x + i * kQK_K, &y[i].d, &y[i].dmin, y[i].scales, levels);
    for (int j = 0; j < kQK_K; j += 64) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[j / 2 + l] = static_cast<uint8_t>(levels[j + l] | (levels[j + l + 32] << 4));
      }
    }
  }
}

void QuantizeQ5_K(const float* x, BlockQ5_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t levels[kQK_K];
    FitScaleMinK<31>(x + i * kQK_K, &y[i].d, &y[i].dmin, y[i].scales, levels);
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    for (int j = 0; j < 8; j += 2) {
      for (int l = 0; l < 32; ++l) {
        const int a = levels[32 * j + l], b = levels[32 * (j + 1) + l];
        y[i].qs[16 * j + l] = static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
        y[i].qh[l] |= static_cast<uint8_t>(((a >> 4) << j) | ((b >> 4) << (j + 1)));
      }
    }
  }
}

// Symmetric fit per 16-element sub-block: x ~= d * sc * q with q in -32..31, sc int8.
void QuantizeQ6_K(const float* x, BlockQ6_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK_K;
    float scales[16];
    float max_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      float amax = 0.0f;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(xb[16 * j + l]));
      scales[j] = amax / 31.0f;
      max_scale = std::max(max_scale, scales[j]);
    }
    y[i].d = F32ToF16(max_scale / 127.0f);
    const float d = F16ToF32(y[i].d);
    uint8_t levels[kQK_K];  // q + 32, 0..63
    for (int j = 0; j < 16; ++j) {
      const int sc = d > 0.0f ? std::clamp(static_cast<int>(std::ceil(scales[j] / d)), 0, 127) : 0;
      y[i].scales[j] = static_cast<int8_t>(sc);
      const float s = d * static_cast<float>(sc);
      for (int l = 0; l < 16; ++l) {
        const int q = s > 0.0f ? RoundClamp(xb[16 * j + l] / s, -32, 31) : 0;
        levels[16 * j + l] = static_cast<uint8_t>(q + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t* L = levels + j;
        ql[l + 0] = static_cast<uint8_t>((L[l] & 0xF) | ((L[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((L[l + 32] & 0xF) | ((L[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((L[l] >> 4) | ((L[l + 32] >> 4) << 2) |
                                     ((L[l + 64] >> 4) << 4) | ((L[l + 96] >> 4) << 6));
      }
      ql += 64;
      qh += 32;
    }
  }
}

int64_t NumBlocks(DType dtype, int64_t n) {
  const DTypeInfo& info = GetDTypeInfo(dtype);
  CHECK_EQ(n % info.block_elems, 0) << "row of " << n << " elements is not a multiple of the "
                                    << info.name << " block size " << info.block_elems;
  return n / info.block_elems;
}

}  // namespace

void DequantizeRow(DType dtype, const void* src, float* dst, int64_t n) {
  const int64_t nb = NumBlocks(dtype, n);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(h[i]);
      return;
    }
    case DType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(h[i]);
      return;
    }
    case DType::kQ8_0:
      return DequantizeQ8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case DType::kQ4_0:
      return DequantizeQ4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case DType::kQ4_K:
      return DequantizeQ4_K(static_cast<const BlockQ4_K*>(src), dst, nb);
    case DType::kQ6_K:
      return DequantizeQ6_K(static_cast<const BlockQ6_K*>(src), dst, nb);
    case DType::kQ5_K:
      return DequantizeQ5_K(static_cast<const BlockQ5_K*>(src), dst, nb);
    case DType::kI32:
      break;
  }
  CHECK(false) << "DequantizeRow: " << DTypeName(dtype) << " is not a float type";
}

void QuantizeRow(DType dtype, const float* src, void* dst, int64_t n) {
  const int64_t nb = NumBlocks(dtype, n);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = F32ToF16(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = F32ToBf16(src[i]);
      return;
    }
    case DType::kQ8_0:
      return QuantizeQ8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case DType::kQ4_0:
      return QuantizeQ4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case DType::kQ4_K:
      return QuantizeQ4_K(src, static_cast<BlockQ4_K*>(dst), nb);
    case DType::kQ6_K:
      return QuantizeQ6_K(src, static_cast<BlockQ6_K*>(dst), nb);
    case DType::kQ5_K:
      return QuantizeQ5_K(src, static_cast<BlockQ5_K*>(dst), nb);
    case DType::kI32:
      break;
  }
  CHECK(false) << "QuantizeRow: " << DTypeName(dtype) << " is not a float type";
}

}  // namespace loom
