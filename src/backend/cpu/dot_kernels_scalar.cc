// Portable kernels: the exact lane structure of the AVX2 ones (see dot_kernels.h), unfused. A
// call with several activation rows runs the one-row kernel per row (this path is the reference,
// not the fast one).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "backend/cpu/dot_kernels.h"
#include "base/check.h"
#include "tensor/quant.h"

namespace loom::cpu {
namespace {

constexpr int R = kDotTileRows;

float Reduce8(const float* a) {
  const float s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
  return (s0 + s2) + (s1 + s3);
}

template <typename Load>
void DotPlain(const void* const* w, const float* x, int64_t k, float* out, Load load) {
  for (int r = 0; r < R; ++r) {
    float acc[8] = {};
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
      for (int l = 0; l < 8; ++l) acc[l] += load(w[r], i + l) * x[i + l];
    }
    float s = Reduce8(acc);
    for (; i < k; ++i) s += load(w[r], i) * x[i];
    out[r] = s;
  }
}

void DotF32(const void* const* w, const float* x, int64_t k, float* out) {
  DotPlain(w, x, k, out, [](const void* p, int64_t i) { return static_cast<const float*>(p)[i]; });
}
void DotF16(const void* const* w, const float* x, int64_t k, float* out) {
  DotPlain(w, x, k, out,
           [](const void* p, int64_t i) { return F16ToF32(static_cast<const uint16_t*>(p)[i]); });
}
void DotBF16(const void* const* w, const float* x, int64_t k, float* out) {
  DotPlain(w, x, k, out,
           [](const void* p, int64_t i) { return Bf16ToF32(static_cast<const uint16_t*>(p)[i]); });
}
void DotFP8(const void* const* w, const float* x, int64_t k, float* out) {
  DotPlain(w, x, k, out, [](const void* p, int64_t i) {
    const BlockFP8& b = static_cast<const BlockFP8*>(p)[i / kQKFP8];
    return F8E4M3ToF32(b.qs[i % kQKFP8]) * b.d;
  });
}
void DotMXFP4(const void* const* w, const float* x, int64_t k, float* out) {
  DotPlain(w, x, k, out, [](const void* p, int64_t i) {
    return Mxfp4Element(static_cast<const BlockMXFP4*>(p)[i / kQKMXFP4],
                        static_cast<int>(i % kQKMXFP4));
  });
}

// acc[l] += scale * (sum of wq[4l..4l+3] * xq[4l..4l+3]) for the 8 lanes of one 32-block.
inline void AccBlock(const int8_t* wq, const int8_t* xq, float scale, float* acc) {
  for (int l = 0; l < 8; ++l) {
    int32_t p = 0;
    for (int j = 4 * l; j < 4 * l + 4; ++j) p += static_cast<int32_t>(wq[j]) * xq[j];
    acc[l] += scale * static_cast<float>(p);
  }
}

void DotQ8_0(const void* const* w, const ActQ8Row& x, int64_t k, float* out) {
  for (int r = 0; r < R; ++r) {
    const auto* b = static_cast<const BlockQ8_0*>(w[r]);
    float acc[8] = {};
    for (int64_t i = 0; i < k / 32; ++i) {
      AccBlock(b[i].qs, x.qs + 32 * i, F16ToF32(b[i].d) * x.d[i], acc);
    }
    out[r] = Reduce8(acc);
  }
}

void DotQ4_0(const void* const* w, const ActQ8Row& x, int64_t k, float* out) {
  for (int r = 0; r < R; ++r) {
    const auto* b = static_cast<const BlockQ4_0*>(w[r]);
    float acc[8] = {};
    for (int64_t i = 0; i < k / 32; ++i) {
      int8_t wq[32];
      for (int j = 0; j < 16; ++j) {
        wq[j] = static_cast<int8_t>((b[i].qs[j] & 0xF) - 8);
        wq[j + 16] = static_cast<int8_t>((b[i].qs[j] >> 4) - 8);
      }
      AccBlock(wq, x.qs + 32 * i, F16ToF32(b[i].d) * x.d[i], acc);
    }
    out[r] = Reduce8(acc);
  }
}

// q4_K and q5_K (the same scales and mins; q5_K adds a 5th bit from qh).
template <class Block>
void DotQK4Or5(const void* const* w, const ActQ8Row& x, int64_t k, float* out) {
  for (int r = 0; r < R; ++r) {
    const auto* b = static_cast<const Block*>(w[r]);
    float acc[8] = {};
    float mins = 0.0f;
    for (int64_t i = 0; i < k / kQK_K; ++i) {
      const float d = F16ToF32(b[i].d);
      const float dmin = F16ToF32(b[i].dmin);
      for (int j = 0; j < 8; ++j) {
        const int64_t xb = i * 8 + j;
        uint8_t sc, m;
        GetScaleMinK4(j, b[i].scales, &sc, &m);
        int8_t wq[32];
        const uint8_t* q = b[i].qs + 32 * (j / 2);
        for (int l = 0; l < 32; ++l) {
          int v = (j % 2 == 0) ? (q[l] & 0xF) : (q[l] >> 4);
          if constexpr (std::is_same_v<Block, BlockQ5_K>) v |= ((b[i].qh[l] >> j) & 1) << 4;
          wq[l] = static_cast<int8_t>(v);
        }
        AccBlock(wq, x.qs + 32 * xb, d * static_cast<float>(sc) * x.d[xb], acc);
        mins += dmin * static_cast<float>(m) * x.ds[xb];
      }
    }
    out[r] = Reduce8(acc) - mins;
  }
}

void DotQ6_K(const void* const* w, const ActQ8Row& x, int64_t k, float* out) {
  for (int r = 0; r < R; ++r) {
    const auto* b = static_cast<const BlockQ6_K*>(w[r]);
    float acc[8] = {};
    for (int64_t i = 0; i < k / kQK_K; ++i) {
      const float d = F16ToF32(b[i].d);
      for (int half = 0; half < 2; ++half) {
        const uint8_t* ql = b[i].ql + 64 * half;
        const uint8_t* qh = b[i].qh + 32 * half;
        int8_t wq[4][32];
        for (int l = 0; l < 32; ++l) {
          wq[0][l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
          wq[1][l] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
          wq[2][l] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
          wq[3][l] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
        for (int c = 0; c < 4; ++c) {
          const int chunk = half * 4 + c;  // 32-element chunk within the super-block
          const int64_t xb = i * 8 + chunk;
          const float s0 = d * static_cast<float>(b[i].scales[2 * chunk]) * x.d[xb];
          const float s1 = d * static_cast<float>(b[i].scales[2 * chunk + 1]) * x.d[xb];
          const int8_t* xq = x.qs + 32 * xb;
          for (int l = 0; l < 8; ++l) {
            int32_t p = 0;
            for (int j = 4 * l; j < 4 * l + 4; ++j) p += static_cast<int32_t>(wq[c][j]) * xq[j];
            acc[l] += (l < 4 ? s0 : s1) * static_cast<float>(p);
          }
        }
      }
    }
    out[r] = Reduce8(acc);
  }
}

// The DotTileF / DotTileQ signatures over the one-row kernels above.
template <void (*Dot1)(const void* const*, const float*, int64_t, float*)>
void PlainRows(const void* const* w, const float* const* x, int num_x, int64_t k, DotPrefetch,
               float* out) {
  for (int a = 0; a < num_x; ++a) Dot1(w, x[a], k, out + a * R);
}
template <void (*Dot1)(const void* const*, const ActQ8Row&, int64_t, float*)>
void QuantRows(const void* const* w, const ActQ8Row* x, int num_x, int64_t k, DotPrefetch,
               float* out) {
  for (int a = 0; a < num_x; ++a) Dot1(w, x[a], k, out + a * R);
}

}  // namespace

void QuantizeActRow(const float* x, int64_t k, int8_t* qs, float* d, float* ds) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float db = amax / 127.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(std::roundf(xb[j] * id));
      qs[32 * b + j] = static_cast<int8_t>(q);
      sum += q;
    }
    d[b] = db;
    ds[b] = db * static_cast<float>(sum);
  }
}

const DotKernels& ScalarDotKernels() {
  static const DotKernels k = {
      .isa = "scalar",
      .f32 = PlainRows<DotF32>,
      .f16 = PlainRows<DotF16>,
      .bf16 = PlainRows<DotBF16>,
      .fp8 = PlainRows<DotFP8>,
      .mxfp4 = PlainRows<DotMXFP4>,
      .q8_0 = QuantRows<DotQ8_0>,
      .q4_0 = QuantRows<DotQ4_0>,
      .q4_K = QuantRows<DotQK4Or5<BlockQ4_K>>,
      .q6_K = QuantRows<DotQ6_K>,
      .q5_K = QuantRows<DotQK4Or5<BlockQ5_K>>,
      .quantize_act = QuantizeActRow,
      // Rows per call change nothing here; MatMul's grouping is exercised as with AVX2.
      .plain_act_rows = kDotMaxActRows,
      .quant_act_rows = kDotMaxActRows,
  };
  return k;
}

std::optional<CpuIsa> ParseCpuIsa(std::string_view name) {
  if (name == "auto") return CpuIsa::kAuto;
  if (name == "avx512") return CpuIsa::kAvx512;
  if (name == "avx2") return CpuIsa::kAvx2;
  if (name == "scalar") return CpuIsa::kScalar;
  return std::nullopt;
}

const DotKernels& SelectDotKernels(CpuIsa cap) {
  if (cap == CpuIsa::kScalar) return ScalarDotKernels();
  if (cap != CpuIsa::kAvx2 && Avx512DotKernels() != nullptr) return *Avx512DotKernels();
  if (Avx2DotKernels() != nullptr) return *Avx2DotKernels();
  return ScalarDotKernels();
}

}  // namespace loom::cpu
