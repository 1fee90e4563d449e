#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tensor/tensor.h"

namespace loom {
namespace {

TEST(DTypeTest, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t bits = static_cast<uint16_t>(h);
    float f = F16ToF32(bits);
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToF16(f), bits) << std::hex << h;
  }
}

TEST(DTypeTest, F16KnownValues) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));         // smallest subnormal
  EXPECT_EQ(F32ToF16(65520.f), 0x7c00);                       // rounds to inf
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
}

TEST(DTypeTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie -> even
}

TEST(DTypeTest, RowBytes) {
  EXPECT_EQ(RowBytes(DType::kF32, 10), 40u);
  EXPECT_EQ(RowBytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(RowBytes(DType::kQ4_K, 512), 288u);
  EXPECT_EQ(RowBytes(DType::kQ6_K, 256), 210u);
  EXPECT_EQ(RowBytes(DType::kQ5_K, 512), 352u);
}

// Anchors of the OCP FP8 e4m3fn table (torch.float8_e4m3fn): bias 7, no infinities.
TEST(DTypeTest, F8E4M3DecodesTheOcpTable) {
  EXPECT_EQ(F8E4M3ToF32(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(F8E4M3ToF32(0x80)));
  EXPECT_EQ(F8E4M3ToF32(0x38), 1.0f);  // exponent 7 = bias
  EXPECT_EQ(F8E4M3ToF32(0xC0), -2.0f);
  EXPECT_EQ(F8E4M3ToF32(0x39), 1.125f);        // one mantissa step at 1
  EXPECT_EQ(F8E4M3ToF32(0x7E), 448.0f);        // the largest finite value
  EXPECT_EQ(F8E4M3ToF32(0x08), 0.015625f);     // the smallest normal, 2^-6
  EXPECT_EQ(F8E4M3ToF32(0x07), 0.013671875f);  // the largest subnormal, 7 * 2^-9
  EXPECT_EQ(F8E4M3ToF32(0x01), 0.001953125f);  // the smallest subnormal, 2^-9
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0x7F)));
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0xFF)));
  EXPECT_EQ(GetDTypeInfo(DType::kF8E4M3).block_bytes, 1);
}

TEST(DTypeTest, F8E4M3EncodesToTheNearestCodeTiesToEven) {
  for (int c = 0; c < 256; ++c) {  // every finite code round-trips
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(F32ToF8E4M3(F8E4M3ToF32(static_cast<uint8_t>(c))), c) << c;
  }
  EXPECT_EQ(F32ToF8E4M3(1.0625f), 0x38);  // halfway 1 and 1.125: to even (1.0)
  EXPECT_EQ(F32ToF8E4M3(1.1875f), 0x3A);  // halfway 1.125 and 1.25: to even (1.25)
  EXPECT_EQ(F32ToF8E4M3(1.07f), 0x39);
  EXPECT_EQ(F32ToF8E4M3(-1000.0f), 0xFE);  // saturates to -448
  EXPECT_EQ(F32ToF8E4M3(0.0009f), 0x00);   // below half of 2^-9
  EXPECT_EQ(F32ToF8E4M3(0.001f), 0x01);    // above half of 2^-9
  EXPECT_EQ(F32ToF8E4M3(std::nanf("")), 0x7F);
}

// The nearest finite code by search (ties to the even code), saturating at 448: what
// F32ToF8E4M3's bit arithmetic must reproduce.
uint8_t NearestF8E4M3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  int best = 0;
  for (int c = 1; c <= 0x7E; ++c) {
    const float dc = std::fabs(F8E4M3ToF32(static_cast<uint8_t>(c)) - a);
    const float db = std::fabs(F8E4M3ToF32(static_cast<uint8_t>(best)) - a);
    if (dc < db || (dc == db && c % 2 == 0)) best = c;
  }
  return sign | static_cast<uint8_t>(best);
}

TEST(DTypeTest, F8E4M3EncodeMatchesNearestCode) {
  std::vector<float> values;
  for (int c = 0; c < 0x7E; ++c) {  // every midpoint and its neighbours
    const float lo = F8E4M3ToF32(static_cast<uint8_t>(c));
    const float mid = (lo + F8E4M3ToF32(static_cast<uint8_t>(c + 1))) / 2;
    for (float v : {lo, mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f)}) {
      values.push_back(v);
      values.push_back(-v);
    }
  }
  uint64_t state = 42;
  for (int i = 0; i < 20000; ++i) {  // log-uniform over e4m3's range and a little beyond
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(state >> 11) / 9007199254740992.0;
    values.push_back(static_cast<float>(std::ldexp(1.0 + u, static_cast<int>(u * 1e6) % 22 - 12)));
  }
  values.push_back(447.99f);
  values.push_back(1e-30f);
  for (float v : values) {
    ASSERT_EQ(F32ToF8E4M3(v), NearestF8E4M3(v)) << v;
  }
}

TEST(TensorTest, SliceAndReshape) {
  Tensor t = HostTensor(DType::kF32, Shape{4, 3});
  for (int i = 0; i < 12; ++i) t.data_as<float>()[i] = static_cast<float>(i);
  Tensor s = t.Slice(1, 2);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.data_as<float>()[0], 3.0f);
  Tensor r = t.Reshape(Shape{2, 6});
  EXPECT_EQ(r.rows(), 2);
  EXPECT_EQ(r.data_as<float>()[6], 6.0f);
}

}  // namespace
}  // namespace loom
