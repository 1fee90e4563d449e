#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

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
