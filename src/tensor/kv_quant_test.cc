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
  for (KvQuant q : {KvQuant::kFp8, KvQuant::kInt8, KvQuant::kInt4, KvQuant::kRot8, KvQuant::kRot4,
                    KvQuant::kRot3}) {
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
  EXPECT_EQ(*ParseKvQuant("turbo3"), KvQuant::kRot3);
  // --kv-quant: one scheme for both, or a turbo pair (plain turbo: k8v3).
  EXPECT_EQ(ParseKvQuantPair("8")->k, KvQuant::kInt8);
  EXPECT_EQ(ParseKvQuantPair("8")->v, KvQuant::kInt8);
  EXPECT_EQ(ParseKvQuantPair("turbo")->k, KvQuant::kRot8);
  EXPECT_EQ(ParseKvQuantPair("turbo")->v, KvQuant::kRot3);
  EXPECT_EQ(ParseKvQuantPair("turbo:k4v8")->k, KvQuant::kRot4);
  EXPECT_EQ(ParseKvQuantPair("turbo:k4v8")->v, KvQuant::kRot8);
  for (const char* bad_pair : {"turbo:k3v3", "turbo:k8", "turbo:k8v5", "turbo:", "turbo8v3"}) {
    StatusOr<KvQuantPair> p = ParseKvQuantPair(bad_pair);
    ASSERT_FALSE(p.ok()) << bad_pair;
    EXPECT_NE(p.status().message().find(bad_pair), std::string::npos) << p.status().message();
  }
  EXPECT_TRUE(KvQuantFits(KvQuant::kRot3, 128));
  EXPECT_FALSE(KvQuantFits(KvQuant::kRot3, 96));  // not a power of two
  EXPECT_TRUE(KvQuantFits(KvQuant::kInt8, 96));
  EXPECT_EQ(KvQuantRowBytes(KvQuant::kRot3, 128), 48u + 4u);
  EXPECT_EQ(KvQuantRowBytes(KvQuant::kRot4, 128), 64u + 4u);
  EXPECT_EQ(KvQuantRowBytes(KvQuant::kRot8, 128), 128u + 4u);
  // turbo k8v3 at head_dim 128: 2.78x the tokens of bf16 (bar: 2.4x).
  EXPECT_EQ(KvFormat(DType::kBF16, KvQuant::kRot8, KvQuant::kRot3).RowPairBytes(128), 184u);
  EXPECT_EQ(KvFormat(DType::kF32, KvQuant::kRot8, KvQuant::kRot3).Name(), "turbo:k8v3");
  EXPECT_EQ(KvFormat(DType::kF32, KvQuant::kRot4, KvQuant::kRot4).Name(), "turbo:k4v4");
  EXPECT_EQ(KvFormat(DType::kF32, KvQuant::kRot8, KvQuant::kInt4).Name(), "k:turbo8,v:int4");

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

// The turbo rotation is orthogonal: R^T R x = x, |R x| = |x|, R x . R y = x . y (within f32
// rounding), and it spreads a single outlier over every dimension.
TEST(KvQuantTest, RotationIsOrthogonalAndSpreadsOutliers) {
  for (int D : {16, 64, 128, 256}) {
    const std::vector<float> x = RandomRow(D, 3, 1.0f), y = RandomRow(D, 4, 1.0f);
    std::vector<float> rx = x, ry = y;
    RotateKvRow(rx.data(), D);
    RotateKvRow(ry.data(), D);
    double xy = 0, rxy = 0, xx = 0, rxx = 0;
    for (int i = 0; i < D; ++i) {
      xy += double{x[i]} * y[i];
      rxy += double{rx[i]} * ry[i];
      xx += double{x[i]} * x[i];
      rxx += double{rx[i]} * rx[i];
    }
    EXPECT_NEAR(rxy, xy, 1e-4 * xx) << D;
    EXPECT_NEAR(rxx, xx, 1e-4 * xx) << D;
    UnrotateKvRow(rx.data(), D);
    for (int i = 0; i < D; ++i) EXPECT_NEAR(rx[i], x[i], 1e-5f) << D << " " << i;
    std::vector<float> spike(static_cast<size_t>(D), 0.0f);
    spike[5] = 1.0f;
    RotateKvRow(spike.data(), D);
    for (int i = 0; i < D; ++i) EXPECT_NEAR(std::fabs(spike[i]), 1.0f / std::sqrt(D), 1e-6f);
  }
}

// The turbo schemes' error on Gaussian rows, as RMS relative to the row's: int8 of the rotated
// values, and the Lloyd-Max quantizers' MSE for a unit Gaussian (16 levels 0.0095, 8 levels
// 0.0345: 9.7% / 18.6% RMS) with some slack for a finite sample and bf16 scales. A row with an
// outlier loses no more: the rotation spreads it.
TEST(KvQuantTest, TurboRoundTripErrorIsTheQuantizersMse) {
  const int D = 128;
  struct Bound {
    KvQuant q;
    double rms;
  };
  for (const Bound b :
       {Bound{KvQuant::kRot8, 0.01}, Bound{KvQuant::kRot4, 0.11}, Bound{KvQuant::kRot3, 0.21}}) {
    for (bool outlier : {false, true}) {
      double err = 0, ref = 0;
      for (uint32_t seed = 0; seed < 50; ++seed) {
        std::vector<float> x = RandomRow(D, 100 + seed, 2.0f);
        if (outlier) x[7] = 40.0f;
        const std::vector<float> y = RoundTrip(b.q, x);
        std::vector<float> turned = x;
        RotateKvRow(turned.data(), D);  // the values come back rotated
        for (int i = 0; i < D; ++i) {
          err += (double{y[i]} - turned[i]) * (double{y[i]} - turned[i]);
          ref += double{turned[i]} * turned[i];
        }
      }
      EXPECT_LT(std::sqrt(err / ref), b.rms) << KvQuantName(b.q) << (outlier ? " outlier" : "");
      EXPECT_GT(std::sqrt(err / ref), b.rms / 20) << KvQuantName(b.q);
    }
  }
}

}  // namespace
}  // namespace loom
