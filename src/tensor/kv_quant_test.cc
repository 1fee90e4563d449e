#include "tensor/kv_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace loom {
namespace {

constexpr KvQuant kAll[] = {KvQuant::kFp8, KvQuant::kInt8, KvQuant::kInt4};

std::vector<float> RandomRow(int n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = nd(rng);
  return x;
}

std::vector<float> RoundTrip(KvQuant q, const std::vector<float>& x) {
  const int n = static_cast<int>(x.size());
  std::vector<uint8_t> row(KvQuantRowBytes(q, n));
  QuantizeKvRow(q, x.data(), n, row.data());
  std::vector<float> y(x.size());
  DequantizeKvRow(q, row.data(), n, y.data());
  return y;
}

TEST(KvQuantTest, GroupsAndRowBytes) {
  EXPECT_EQ(KvQuantGroup(128), 64);
  EXPECT_EQ(KvQuantGroup(256), 64);
  EXPECT_EQ(KvQuantGroup(96), 32);
  EXPECT_EQ(KvQuantGroup(80), 16);
  EXPECT_EQ(KvQuantGroup(16), 16);
  EXPECT_EQ(KvQuantGroup(72), 0);
  EXPECT_EQ(KvQuantGroup(0), 0);
  // head_dim 128 against bf16's 256 bytes a row: 1.94x, 1.94x, 3.56x the tokens.
  EXPECT_EQ(KvQuantRowBytes(KvQuant::kFp8, 128), 132u);
  EXPECT_EQ(KvQuantRowBytes(KvQuant::kInt8, 128), 132u);
  EXPECT_EQ(KvQuantRowBytes(KvQuant::kInt4, 128), 72u);
  EXPECT_EQ(KvQuantRowBytes(KvQuant::kInt8, 16), 18u);
  EXPECT_EQ(KvQuantRowBytes(KvQuant::kInt4, 16), 12u);
  EXPECT_EQ(KvQuantRowBytes(KvQuant::kFp8, 96), 96u + 3 * 2);
  EXPECT_EQ(KvQuantRowBytes(KvQuant::kInt4, 80), 40u + 5 * 4);
}

// A block's rows: codes token-major from the block's start, each row's codes 16-byte aligned at
// head_dim 128; then the scales head-major; every byte of the block belongs to exactly one row.
TEST(KvQuantTest, BlockLayout) {
  for (KvQuant q : kAll) {
    const int D = 128, bs = 5, kvh = 3;
    const KvQuantBlock b(q, D, bs, kvh);
    EXPECT_EQ(b.BlockBytes(), static_cast<size_t>(bs) * kvh * KvQuantRowBytes(q, D));
    EXPECT_EQ(b.Codes(0, 0), 0u);
    EXPECT_EQ(b.Codes(1, 0), kvh * b.code_bytes);  // token-major
    EXPECT_EQ(b.Codes(0, 1), b.code_bytes);
    EXPECT_EQ(b.Scales(0, 0), static_cast<size_t>(bs) * kvh * b.code_bytes);
    EXPECT_EQ(b.Scales(1, 0), b.Scales(0, 0) + b.scale_bytes);  // head-major
    EXPECT_EQ(b.Scales(0, 1), b.Scales(0, 0) + bs * b.scale_bytes);
    std::vector<int> owner(b.BlockBytes(), 0);
    for (int t = 0; t < bs; ++t) {
      for (int h = 0; h < kvh; ++h) {
        EXPECT_EQ(b.Codes(t, h) % 16, 0u) << KvQuantName(q);
        for (size_t i = 0; i < b.code_bytes; ++i) ++owner[b.Codes(t, h) + i];
        for (size_t i = 0; i < b.scale_bytes; ++i) ++owner[b.Scales(t, h) + i];
      }
    }
    for (size_t i = 0; i < owner.size(); ++i) ASSERT_EQ(owner[i], 1) << KvQuantName(q) << " " << i;
  }
}

TEST(KvQuantTest, ParseAndNames) {
  EXPECT_EQ(*ParseKvQuant("off"), KvQuant::kNone);
  EXPECT_EQ(*ParseKvQuant("fp8"), KvQuant::kFp8);
  EXPECT_EQ(*ParseKvQuant("8"), KvQuant::kInt8);
  EXPECT_EQ(*ParseKvQuant("int8"), KvQuant::kInt8);
  EXPECT_EQ(*ParseKvQuant("4"), KvQuant::kInt4);
  EXPECT_EQ(*ParseKvQuant("int4"), KvQuant::kInt4);
  StatusOr<KvQuant> bad = ParseKvQuant("q3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'q3'"), std::string::npos) << bad.status().message();
  StatusOr<KvQuant> turbo = ParseKvQuant("turbo:k8v3");
  ASSERT_FALSE(turbo.ok());
  EXPECT_NE(turbo.status().message().find("not implemented"), std::string::npos);

  EXPECT_EQ(KvFormat(DType::kF32).Name(), "f32");
  EXPECT_EQ(KvFormat(DType::kBF16).Name(), "bf16");
  EXPECT_EQ(KvFormat(DType::kF32, KvQuant::kFp8, KvQuant::kFp8).Name(), "fp8");
  EXPECT_EQ(KvFormat(DType::kBF16, KvQuant::kInt4, KvQuant::kInt4).Name(), "int4");
  EXPECT_EQ(KvFormat(DType::kF32, KvQuant::kInt8, KvQuant::kInt4).Name(), "k:int8,v:int4");
  EXPECT_EQ(KvFormat(DType::kBF16, KvQuant::kInt8, KvQuant::kNone).Name(), "k:int8,v:bf16");
  // A quantized cache's name does not depend on the unquantized dtype when both are quantized.
  EXPECT_EQ(KvFormat(DType::kF32, KvQuant::kInt8, KvQuant::kInt8).Name(),
            KvFormat(DType::kBF16, KvQuant::kInt8, KvQuant::kInt8).Name());
  EXPECT_EQ(KvFormat(DType::kBF16, KvQuant::kInt8, KvQuant::kNone).RowPairBytes(128), 132u + 256u);
}

// Each scheme's error bound per element, on rows of several scales (a group of tiny values keeps
// its relative precision: the scales are bf16, with f32's range).
TEST(KvQuantTest, RoundTripWithinTheSchemesBounds) {
  for (int D : {16, 64, 96, 128, 256}) {
    for (float scale : {1e-30f, 1e-3f, 1.0f, 300.0f}) {
      const std::vector<float> x = RandomRow(D, static_cast<uint32_t>(D) * 7 + 1, scale);
      const int g = KvQuantGroup(D);
      for (KvQuant q : kAll) {
        const std::vector<float> y = RoundTrip(q, x);
        for (int g0 = 0; g0 < D; g0 += g) {
          float amax = 0, lo = x[g0], hi = x[g0];
          for (int i = g0; i < g0 + g; ++i) {
            amax = std::max(amax, std::fabs(x[i]));
            lo = std::min(lo, x[i]);
            hi = std::max(hi, x[i]);
          }
          for (int i = g0; i < g0 + g; ++i) {
            const float err = std::fabs(y[i] - x[i]);
            float bound;
            if (q == KvQuant::kFp8) {  // e4m3: 3 mantissa bits; subnormals step amax * 2^-9 / 448
              bound = std::fabs(x[i]) * 0x1p-4f + amax * 0x1p-17f;
            } else if (q == KvQuant::kInt8) {
              bound = amax / 127 * 0.51f + amax * 0x1p-8f;
            } else {  // int4: half a step, plus the bf16 rounding of the minimum
              bound = (hi - lo) / 15 * 0.51f + std::fabs(lo) * 0x1p-8f;
            }
            ASSERT_LE(err, bound) << KvQuantName(q) << " D " << D << " scale " << scale
                                  << " element " << i << ": " << x[i] << " -> " << y[i];
          }
        }
      }
    }
  }
}

TEST(KvQuantTest, ZerosAndConstantsAreExact) {
  for (KvQuant q : kAll) {
    std::vector<float> zeros(64, 0.0f);
    EXPECT_EQ(RoundTrip(q, zeros), zeros) << KvQuantName(q);
  }
  std::vector<float> halves(64, 0.5f);  // 0.5 is a bf16 value: int4's minimum holds it exactly
  EXPECT_EQ(RoundTrip(KvQuant::kInt4, halves), halves);
  // int8 and fp8 reach their extremes exactly when amax / qmax is a bf16 value.
  std::vector<float> x(16, 0.0f);
  x[3] = -127.0f;
  x[5] = 1.0f;
  EXPECT_EQ(RoundTrip(KvQuant::kInt8, x), x);
  x[3] = -448.0f;
  EXPECT_EQ(RoundTrip(KvQuant::kFp8, x), x);
}

// Rows are independent: a row's bytes depend only on its own values (the prefix cache may serve
// a block to any later request), and groups only on theirs.
TEST(KvQuantTest, GroupsAreQuantizedOnTheirOwn) {
  const int D = 128;
  std::vector<float> x = RandomRow(D, 5, 1.0f);
  for (KvQuant q : kAll) {
    std::vector<uint8_t> a(KvQuantRowBytes(q, D)), b(a.size());
    QuantizeKvRow(q, x.data(), D, a.data());
    std::vector<float> x2 = x;
    x2[100] = 1000.0f;  // second group only
    QuantizeKvRow(q, x2.data(), D, b.data());
    std::vector<float> ya(D), yb(D);
    DequantizeKvRow(q, a.data(), D, ya.data());
    DequantizeKvRow(q, b.data(), D, yb.data());
    for (int i = 0; i < 64; ++i) EXPECT_EQ(ya[i], yb[i]) << KvQuantName(q) << " " << i;
    EXPECT_NE(ya[100], yb[100]);
  }
}

}  // namespace
}  // namespace loom
