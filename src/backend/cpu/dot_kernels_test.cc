// The dot kernels with several activation rows per call against the same kernels called once per
// row: bit-identical on every dtype, awkward k and every num_x (dot_kernels.h's numerics).
#include "backend/cpu/dot_kernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_test_util.h"
#include "tensor/quant.h"

namespace loom::cpu {
namespace {

using cpu_test::MakeTensor;
using cpu_test::RandomFloats;

std::vector<const DotKernels*> AllIsas() {
  std::vector<const DotKernels*> isas = {&ScalarDotKernels()};
  if (Avx2DotKernels() != nullptr) isas.push_back(Avx2DotKernels());
  return isas;
}

// Plain dtypes: k around and not on multiples of 8 (tails of 0..7); quantized: whole blocks.
std::vector<int64_t> AwkwardKs(DType wt) {
  const DTypeInfo& info = GetDTypeInfo(wt);
  if (!info.quantized) return {1, 7, 8, 32, 40, 100, 259, 768, 4096 + 8, 4096 + 3};
  if (info.block_elems == 32) return {32, 64, 96, 768, 4096 + 32};
  return {256, 512, 768, 4096 + 256};
}

DotTileF PlainKernel(const DotKernels& k, DType t) {
  switch (t) {
    case DType::kF32:
      return k.f32;
    case DType::kF16:
      return k.f16;
    case DType::kBF16:
      return k.bf16;
    default:
      return nullptr;
  }
}
DotTileQ QuantKernel(const DotKernels& k, DType t) {
  switch (t) {
    case DType::kQ8_0:
      return k.q8_0;
    case DType::kQ4_0:
      return k.q4_0;
    case DType::kQ4_K:
      return k.q4_K;
    case DType::kQ6_K:
      return k.q6_K;
    default:
      return nullptr;
  }
}

class DotKernelsTest : public ::testing::TestWithParam<DType> {};

TEST_P(DotKernelsTest, ManyActivationRowsEqualOneAtATimeBitExactly) {
  const DType wt = GetParam();
  std::mt19937 rng(static_cast<unsigned>(wt) + 100);
  for (const DotKernels* isa : AllIsas()) {
    const DotTileF plain = PlainKernel(*isa, wt);
    const DotTileQ quant = QuantKernel(*isa, wt);
    ASSERT_TRUE(plain != nullptr || quant != nullptr);
    for (int64_t k : AwkwardKs(wt)) {
      // 5 weight rows; tiles {0,1,2,3} and a repeating last tile {3,4,4,4} as MatMul builds it.
      Tensor w = MakeTensor(wt, Shape{5, k}, RandomFloats(rng, 5 * k, 0.05f));
      auto row = [&](int r) { return static_cast<const char*>(w.data()) + r * w.row_bytes(); };
      const void* tiles[2][kDotTileRows] = {{row(0), row(1), row(2), row(3)},
                                            {row(3), row(4), row(4), row(4)}};
      // kDotMaxActRows activation rows, with q8 copies for quantized weights.
      std::vector<float> xv = RandomFloats(rng, kDotMaxActRows * k);
      std::vector<int8_t> qs(xv.size());
      std::vector<float> d(xv.size() / 32 + 1), ds(xv.size() / 32 + 1);
      const float* xs[kDotMaxActRows];
      ActQ8Row acts[kDotMaxActRows];
      for (int a = 0; a < kDotMaxActRows; ++a) {
        xs[a] = xv.data() + a * k;
        if (quant != nullptr) {
          QuantizeActRow(xs[a], k, qs.data() + a * k, d.data() + a * (k / 32),
                         ds.data() + a * (k / 32));
          acts[a] = ActQ8Row{qs.data() + a * k, d.data() + a * (k / 32), ds.data() + a * (k / 32)};
        }
      }
      for (const auto& tile : tiles) {
        float solo[kDotMaxActRows][kDotTileRows];
        for (int a = 0; a < kDotMaxActRows; ++a) {
          if (quant != nullptr) {
            quant(tile, &acts[a], 1, k, solo[a]);
          } else {
            plain(tile, &xs[a], 1, k, solo[a]);
          }
        }
        // Every num_x, starting at every row it fits from.
        for (int num_x = 2; num_x <= kDotMaxActRows; ++num_x) {
          for (int a0 = 0; a0 + num_x <= kDotMaxActRows; ++a0) {
            float out[kDotMaxActRows * kDotTileRows];
            if (quant != nullptr) {
              quant(tile, acts + a0, num_x, k, out);
            } else {
              plain(tile, xs + a0, num_x, k, out);
            }
            for (int a = 0; a < num_x; ++a) {
              EXPECT_EQ(std::memcmp(out + a * kDotTileRows, solo[a0 + a], sizeof(solo[0])), 0)
                  << DTypeName(wt) << " " << isa->isa << " k=" << k << " num_x=" << num_x << " row "
                  << a0 + a << ": " << out[a * kDotTileRows] << " vs " << solo[a0 + a][0];
            }
          }
        }
      }
    }
  }
}

TEST(DotKernelsTest, ActRowsPerCallAreInRange) {
  for (const DotKernels* isa : AllIsas()) {
    EXPECT_GE(isa->plain_act_rows, 1) << isa->isa;
    EXPECT_LE(isa->plain_act_rows, kDotMaxActRows) << isa->isa;
    EXPECT_GE(isa->quant_act_rows, 1) << isa->isa;
    EXPECT_LE(isa->quant_act_rows, kDotMaxActRows) << isa->isa;
  }
}

constexpr DType kAllWeightTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                     DType::kQ4_0, DType::kQ4_K, DType::kQ6_K};

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, DotKernelsTest, ::testing::ValuesIn(kAllWeightTypes),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace loom::cpu
