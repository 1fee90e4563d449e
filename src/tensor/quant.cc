#include "tensor/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

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

// q4_K and q5_K: sub-blocks j and j + 1 of a pair take the low / high nibbles of the same 32 qs
// bytes; q5_K adds bit j of qh[l] as each code's 5th bit. x = d * sc * q - dmin * m.
template <class Block>
void DequantizeK4Or5(const Block* x, float* y, int64_t nb) {
  constexpr bool kQ5 = std::is_same_v<Block, BlockQ5_K>;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = F16ToF32(x[i].d);
    const float min = F16ToF32(x[i].dmin);
    uint8_t sc, m;
    for (int j = 0; j < 8; j += 2) {
      GetScaleMinK4(j, x[i].scales, &sc, &m);
      const float d1 = d * sc;
      const float m1 = min * m;
      GetScaleMinK4(j + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc;
      const float m2 = min * m;
      auto high = [&](int l, int bit) {
        if constexpr (kQ5) return ((x[i].qh[l] >> bit) & 1) << 4;
        return 0;
      };
      // Written as separate statements so no compiler contracts d * q - m into an FMA.
      for (int l = 0; l < 32; ++l) {
        const float p = d1 * static_cast<float>((q[l] & 0xF) + high(l, j));
        *y++ = p - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const float p = d2 * static_cast<float>((q[l] >> 4) + high(l, j + 1));
        *y++ = p - m2;
      }
      q += 32;
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

// llama.cpp's nearest_int: adding 1.5 * 2^23 leaves the value rounded to an integer (ties to
// even) in the low 23 mantissa bits, offset by 2^22. Exact for |v| < 2^22 (llama.cpp asserts that
// range); outside it the result is the same garbage as llama.cpp's, which the callers clamp.
int NearestInt(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

// Every f32 expression below is evaluated in llama.cpp's order: products and sums are separate
// roundings (quant.cc is built with -ffp-contract=off, see CMakeLists.txt) and int operands are
// converted to float where C converts them, so the results are bit-identical.

// Weighted least-squares fit of one sub-block of n values to x ~= scale * q + min with q in
// 0..nmax and min <= 0 (llama.cpp make_qkx2_quants, squared error). Start from the min/max fit,
// then try nstep + 1 inverse scales (nmax + rmin + rdelta * is) / (max - min): each gives levels
// round(iscale * (x - min)), to which scale and min are refit in closed form (min clamped to
// <= 0); keep the trial with the smallest weighted squared error. As in llama.cpp, `min` in the
// trial formulas is the best fit's min so far, not the data's: a better trial changes the later
// trials. Writes the levels and -min; returns the scale.
float FitScaleMin(int n, int nmax, const float* x, const float* w, float rmin, float rdelta,
                  int nstep, uint8_t* levels, float* neg_min) {
  float min = x[0];
  float max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    std::memset(levels, 0, static_cast<size_t>(n));
    *neg_min = -min;
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  float iscale = fnmax / (max - min);
  float scale = 1.0f / iscale;
  float best_err = 0.0f;
  for (int i = 0; i < n; ++i) {
    levels[i] = static_cast<uint8_t>(std::clamp(NearestInt(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * static_cast<float>(levels[i]) + min - x[i];
    best_err += w[i] * (diff * diff);
  }
  uint8_t trial[kQK_K];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + fnmax) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float wl = w[i] * static_cast<float>(l);
      sum_l += wl;
      sum_l2 += wl * static_cast<float>(l);
      sum_xl += wl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float trial_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float trial_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (trial_min > 0.0f) {
      trial_min = 0.0f;
      trial_scale = sum_xl / sum_l2;
    }
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = trial_scale * static_cast<float>(trial[i]) + trial_min - x[i];
      err += w[i] * (diff * diff);
    }
    if (err < best_err) {
      std::memcpy(levels, trial, static_cast<size_t>(n));
      best_err = err;
      scale = trial_scale;
      min = trial_min;
    }
  }
  *neg_min = -min;
  return scale;
}

// Scales, mins and levels of a q4_K / q5_K super-block (llama.cpp quantize_row_q{4,5}_K_ref
// without an importance matrix): each 32-element sub-block gets FitScaleMin with weights
// rms(sub-block) + |x|; the 8 scales and 8 mins are quantized to 6 bits against
// d = max scale / 63 and dmin = max min / 63 (both f16); the levels are then recomputed from the
// quantized scale and min, except in sub-blocks whose quantized scale is 0, which keep the fit's.
// Writes d, dmin, the 12 scale bytes and each element's level (0..kMaxQ) in `levels`.
template <int kMaxQ>
void QuantizeScaleMinK(const float* xb, float rmin, int nstep, uint16_t* d_out, uint16_t* dmin_out,
                       uint8_t* scales_out, uint8_t* levels) {
  float scales[8], mins[8], weights[32];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* xs = xb + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float rms = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = rms + std::fabs(xs[l]);
    scales[j] = FitScaleMin(32, kMaxQ, xs, weights, rmin, 0.1f, nstep, levels + 32 * j, &mins[j]);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  for (int j = 0; j < 8; ++j) {
    // Truncated to 8 bits before the clamp, as llama.cpp stores nearest_int in a uint8_t.
    const uint8_t ls =
        std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_min * mins[j])));
    if (j < 4) {
      scales_out[j] = ls;
      scales_out[j + 4] = lm;
    } else {
      scales_out[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales_out[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales_out[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = F32ToF16(max_scale / 63.0f);
  *dmin_out = F32ToF16(max_min / 63.0f);
  const float d_all = F16ToF32(*d_out);
  const float dmin_all = F16ToF32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    GetScaleMinK4(j, scales_out, &sc, &m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = dmin_all * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int q = NearestInt((xb[32 * j + l] + dm) / d);
      levels[32 * j + l] = static_cast<uint8_t>(std::clamp(q, 0, kMaxQ));
    }
  }
}

void QuantizeQ4_K(const float* x, BlockQ4_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t levels[kQK_K];
    QuantizeScaleMinK<15>(x + i * kQK_K, -1.0f, 20, &y[i].d, &y[i].dmin, y[i].scales, levels);
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
    QuantizeScaleMinK<31>(x + i * kQK_K, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, levels);
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

// Symmetric fit of one sub-block of n values to x ~= scale * q with q in -nmax..nmax-1
// (llama.cpp make_qx_quants with rmse_type 1 and no importance weights): with max the value of
// largest magnitude, try inverse scales -(nmax + 0.1 * is) / max for is = 0, -9..9 and keep the
// one whose levels maximize (sum w x q)^2 / sum w q^2 with weights w = x^2; the scale is the
// least-squares sum w x q / sum w q^2 (negative when max > 0). Writes levels q + nmax. An
// all-zero sub-block (|x| < 1e-15) gets levels 0 (not nmax) and scale 0.
float FitScaleSymmetric(int n, int nmax, const float* x, uint8_t* levels) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < 1e-15f) {
    std::memset(levels, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  // Sums of w x q and w q^2 for one inverse scale; writes the levels when `out` is non-null.
  auto sums = [&](float iscale, float* sum_xq, float* sum_q2, uint8_t* out) {
    *sum_xq = 0.0f;
    *sum_q2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      if (out != nullptr) out[i] = static_cast<uint8_t>(q + nmax);
      const float w = x[i] * x[i];
      const float fq = static_cast<float>(q);
      *sum_xq += w * x[i] * fq;
      *sum_q2 += w * fq * fq;
    }
  };
  float sum_xq, sum_q2;
  sums(-fnmax / max, &sum_xq, &sum_q2, levels);
  float scale = sum_q2 != 0.0f ? sum_xq / sum_q2 : 0.0f;
  float best = scale * sum_xq;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float iscale = -(fnmax + 0.1f * static_cast<float>(is)) / max;
    sums(iscale, &sum_xq, &sum_q2, nullptr);
    if (sum_q2 > 0.0f && sum_xq * sum_xq > best * sum_q2) {
      sums(iscale, &sum_xq, &sum_q2, levels);
      scale = sum_xq / sum_q2;
      best = scale * sum_xq;
    }
  }
  return scale;
}

// llama.cpp quantize_row_q6_K_ref (no importance matrix): FitScaleSymmetric per 16-element
// sub-block; the 16 scales are quantized to int8 against d = -(signed scale of largest magnitude)
// / 128 (f16); the levels are then recomputed from the quantized scales, except in sub-blocks
// whose quantized scale is 0, which keep the fit's. A block whose scales are all ~0 is all zero.
void QuantizeQ6_K(const float* x, BlockQ6_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK_K;
    uint8_t levels[kQK_K];  // q + 32, 0..63
    float scales[16];
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scales[j] = FitScaleSymmetric(16, 32, xb + 16 * j, levels + 16 * j);
      if (std::fabs(scales[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    if (max_abs_scale < 1e-15f) {
      std::memset(&y[i], 0, sizeof(y[i]));
      continue;
    }
    const float iscale = -128.0f / max_scale;
    y[i].d = F32ToF16(1.0f / iscale);
    for (int j = 0; j < 16; ++j) {
      y[i].scales[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[j])));
    }
    const float d_all = F16ToF32(y[i].d);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * static_cast<float>(y[i].scales[j]);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        const int q = std::clamp(NearestInt(xb[16 * j + l] / d), -32, 31);
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

void DequantizeFP8(const BlockFP8* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    for (int j = 0; j < kQKFP8; ++j) y[i * kQKFP8 + j] = F8E4M3ToF32(x[i].qs[j]) * x[i].d;
  }
}

// Exact: e2m1 x 2^k is a float for every e8m0 exponent but 255, which reads as NaN.
void DequantizeMXFP4(const BlockMXFP4* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    for (int j = 0; j < kQKMXFP4; ++j) {
      y[b * kQKMXFP4 + j] = x[b].e == 255 ? NAN : Mxfp4Element(x[b], j);
    }
  }
}

// OCP's rule: the shared exponent floor(log2(amax)) - 2 (6 = 1.5 x 2^2 is e2m1's largest), codes
// x / d to the nearest e2m1 value (ties to the even code), saturating at +-6.
void QuantizeMXFP4(const float* x, BlockMXFP4* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQKMXFP4;
    float amax = 0.f;
    for (int j = 0; j < kQKMXFP4; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const int e = amax > 0.f ? std::clamp(std::ilogb(amax) - 2 + 127, 0, 254) : 0;
    const float d = std::ldexp(1.f, e - 127);
    y[b].e = static_cast<uint8_t>(e);
    uint8_t codes[kQKMXFP4];
    for (int j = 0; j < kQKMXFP4; ++j) {
      const float v = std::fabs(xb[j]) / d;
      uint8_t best = 0;
      for (uint8_t c = 1; c < 8; ++c) {
        const float dc = std::fabs(E2M1ToF32(c) - v), db = std::fabs(E2M1ToF32(best) - v);
        if (dc < db || (dc == db && c % 2 == 0)) best = c;
      }
      codes[j] = static_cast<uint8_t>(best | (std::signbit(xb[j]) && best != 0 ? 8 : 0));
    }
    for (int j = 0; j < kQKMXFP4 / 2; ++j) {
      y[b].qs[j] = static_cast<uint8_t>(codes[j] | codes[j + kQKMXFP4 / 2] << 4);
    }
  }
}

// d = amax / 448 (e4m3's largest finite value), codes x / d rounded to nearest even.
void QuantizeFP8(const float* x, BlockFP8* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQKFP8;
    float amax = 0.f;
    for (int j = 0; j < kQKFP8; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 448.f;
    y[i].d = d;
    for (int j = 0; j < kQKFP8; ++j) y[i].qs[j] = d > 0.f ? F32ToF8E4M3(xb[j] / d) : 0;
  }
}

int64_t NumBlocks(DType dtype, int64_t n) {
  const DTypeInfo& info = GetDTypeInfo(dtype);
  CHECK_EQ(n % info.block_elems, 0) << "row of " << n << " elements is not a multiple of the "
                                    << info.name << " block size " << info.block_elems;
  return n / info.block_elems;
}

}  // namespace

float E2M1ToF32(uint8_t c) {
  static constexpr float kValues[16] = {0.f,  0.5f,  1.f,  1.5f,  2.f,  3.f,  4.f,  6.f,
                                        -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f};
  return kValues[c & 0xf];
}

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
      return DequantizeK4Or5(static_cast<const BlockQ4_K*>(src), dst, nb);
    case DType::kQ6_K:
      return DequantizeQ6_K(static_cast<const BlockQ6_K*>(src), dst, nb);
    case DType::kQ5_K:
      return DequantizeK4Or5(static_cast<const BlockQ5_K*>(src), dst, nb);
    case DType::kF8E4M3: {
      const auto* b = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = F8E4M3ToF32(b[i]);
      return;
    }
    case DType::kFP8:
      return DequantizeFP8(static_cast<const BlockFP8*>(src), dst, nb);
    case DType::kMXFP4:
      return DequantizeMXFP4(static_cast<const BlockMXFP4*>(src), dst, nb);
    case DType::kI32:
    case DType::kU8:
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
    case DType::kF8E4M3: {
      auto* b = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) b[i] = F32ToF8E4M3(src[i]);
      return;
    }
    case DType::kFP8:
      return QuantizeFP8(src, static_cast<BlockFP8*>(dst), nb);
    case DType::kMXFP4:
      return QuantizeMXFP4(src, static_cast<BlockMXFP4*>(dst), nb);
    case DType::kI32:
    case DType::kU8:
      break;
  }
  CHECK(false) << "QuantizeRow: " << DTypeName(dtype) << " is not a float type";
}

}  // namespace loom
