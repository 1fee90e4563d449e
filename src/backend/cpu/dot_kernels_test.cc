// The dot kernels with several activation rows per call against the same kernels called once per
// row: bit-identical on every dtype, awkward k and every num_x (dot_kernels.h's numerics); and
// the AVX-512 kernels against the AVX2 ones.
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

using cpu_test::AllIsas;
using cpu_test::MakeTensor;
using cpu_test::RandomFloats;

// Plain dtypes: k around and not on multiples of 8 (tails of 0..7); quantized: whole blocks.
std::vector<int64_t> AwkwardKs(DType wt) {
  const DTypeInfo& info = GetDTypeInfo(wt);
  if (!info.quantized) return {1, 7, 8, 32, 40, 100, 259, 768, 4096 + 8, 4096 + 3};
  if (info.block_elems == 32) return {32, 64, 96, 768, 4096 + 32};
  if (info.block_elems == 128) return {128, 384, 768, 4096 + 128};
  return {256, 512, 768, 4096 + 256};
}

// Whether wt's kernels take q8 activation rows (fp8 weights meet f32 x, as the plain dtypes).
bool IsQuantized(DType t) { return QuantKernel(ScalarDotKernels(), t) != nullptr; }

// 5 weight rows of k elements in tiles {0,1,2,3} and a repeating last tile {3,4,4,4} as MatMul
// builds it, and kDotMaxActRows activation rows (with q8 copies for quantized weights).
struct TileCase {
  TileCase(std::mt19937& rng, DType wt, int64_t k_)
      : dtype(wt),
        k(k_),
        w(MakeTensor(wt, Shape{5, k}, RandomFloats(rng, 5 * k, 0.05f))),
        xv(RandomFloats(rng, kDotMaxActRows * k)),
        qs(xv.size()),
        d(xv.size() / 32 + 1),
        ds(xv.size() / 32 + 1) {
    auto row = [&](int r) { return static_cast<const char*>(w.data()) + r * w.row_bytes(); };
    const void* t[2][kDotTileRows] = {{row(0), row(1), row(2), row(3)},
                                      {row(3), row(4), row(4), row(4)}};
    std::memcpy(tiles, t, sizeof(tiles));
    for (int a = 0; a < kDotMaxActRows; ++a) {
      xs[a] = xv.data() + a * k;
      if (IsQuantized(wt)) {
        QuantizeActRow(xs[a], k, qs.data() + a * k, d.data() + a * (k / 32),
                       ds.data() + a * (k / 32));
        acts[a] = ActQ8Row{qs.data() + a * k, d.data() + a * (k / 32), ds.data() + a * (k / 32)};
      }
    }
  }
  // out[a * kDotTileRows + r] for activation rows a0 .. a0 + num_x - 1 against tiles[tile].
  void Run(const DotKernels& isa, int tile, int a0, int num_x, float* out) const {
    if (IsQuantized(dtype)) {
      const DotTileQ quant = QuantKernel(isa, dtype);
      ASSERT_NE(quant, nullptr);
      quant(tiles[tile], acts + a0, num_x, k, DotPrefetch{}, out);
    } else {
      const DotTileF plain = PlainKernel(isa, dtype);
      ASSERT_NE(plain, nullptr);
      plain(tiles[tile], xs + a0, num_x, k, DotPrefetch{}, out);
    }
  }

  DType dtype;
  int64_t k;
  Tensor w;
  const void* tiles[2][kDotTileRows];
  std::vector<float> xv;
  std::vector<int8_t> qs;
  std::vector<float> d, ds;
  const float* xs[kDotMaxActRows];
  ActQ8Row acts[kDotMaxActRows];
};

class DotKernelsTest : public ::testing::TestWithParam<DType> {};

TEST_P(DotKernelsTest, ManyActivationRowsEqualOneAtATimeBitExactly) {
  const DType wt = GetParam();
  std::mt19937 rng(static_cast<unsigned>(wt) + 100);
  for (const DotKernels* isa : AllIsas()) {
    for (int64_t k : AwkwardKs(wt)) {
      const TileCase c(rng, wt, k);
      for (int tile = 0; tile < 2; ++tile) {
        float solo[kDotMaxActRows][kDotTileRows];
        for (int a = 0; a < kDotMaxActRows; ++a) c.Run(*isa, tile, a, 1, solo[a]);
        // Every num_x, starting at every row it fits from.
        for (int num_x = 2; num_x <= kDotMaxActRows; ++num_x) {
          for (int a0 = 0; a0 + num_x <= kDotMaxActRows; ++a0) {
            float out[kDotMaxActRows * kDotTileRows];
            c.Run(*isa, tile, a0, num_x, out);
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

// The AVX-512 set runs AVX2's 8-lane operations in the same order (with VNNI's exact int8 dots
// for quantized weights): every output bit equals AVX2's, for every num_x.
TEST_P(DotKernelsTest, Avx512EqualsAvx2BitExactly) {
  if (Avx512DotKernels() == nullptr) GTEST_SKIP() << "no AVX-512F/VL/BW on this CPU";
  const DType wt = GetParam();
  std::mt19937 rng(static_cast<unsigned>(wt) + 200);
  for (int64_t k : AwkwardKs(wt)) {
    const TileCase c(rng, wt, k);
    for (int tile = 0; tile < 2; ++tile) {
      for (int num_x = 1; num_x <= kDotMaxActRows; ++num_x) {
        float out2[kDotMaxActRows * kDotTileRows], out512[kDotMaxActRows * kDotTileRows];
        c.Run(*Avx2DotKernels(), tile, 0, num_x, out2);
        c.Run(*Avx512DotKernels(), tile, 0, num_x, out512);
        EXPECT_EQ(std::memcmp(out2, out512, sizeof(float) * num_x * kDotTileRows), 0)
            << DTypeName(wt) << " k=" << k << " num_x=" << num_x << ": " << out512[0] << " vs "
            << out2[0];
      }
    }
  }
}

// Every set's activation quantization equals QuantizeActRow's bytes and floats, rounding ties
// (half away from zero), zero blocks and tiny values included.
TEST(DotKernelsTest, QuantizeActEqualsScalarBitExactly) {
  std::mt19937 rng(9);
  const int64_t k = 32 * 40;
  std::vector<float> x = RandomFloats(rng, k, 3.0f);
  for (int j = 0; j < 32; ++j) x[j] = 0.0f;  // block 0: all zero
  x[32] = 127.0f;                            // block 1: d = 1, ties
  for (int j = 1; j < 32; ++j) x[32 + j] = static_cast<float>(j - 16) + 0.5f;
  for (int j = 64; j < 96; ++j) x[j] *= 1e-30f;                      // block 2: tiny
  for (int j = 96; j < 128; ++j) x[j] = j % 2 == 0 ? -0.0f : 1e-3f;  // block 3: -0 and one value
  std::vector<int8_t> qs_ref(k), qs(k);
  std::vector<float> d_ref(k / 32), ds_ref(k / 32), d(k / 32), ds(k / 32);
  QuantizeActRow(x.data(), k, qs_ref.data(), d_ref.data(), ds_ref.data());
  for (const DotKernels* isa : AllIsas()) {
    isa->quantize_act(x.data(), k, qs.data(), d.data(), ds.data());
    EXPECT_EQ(qs, qs_ref) << isa->isa;
    EXPECT_EQ(std::memcmp(d.data(), d_ref.data(), d.size() * 4), 0) << isa->isa;
    EXPECT_EQ(std::memcmp(ds.data(), ds_ref.data(), ds.size() * 4), 0) << isa->isa;
  }
}

// The bf16-activation path's vector rounding equals F32ToBf16 bit for bit: ties to even, NaNs
// (kept quiet), infinities, denormals, signed zeros, the largest finite values, any count.
TEST(DotKernelsTest, Bf16RoundingEqualsScalarBitExactly) {
  const Bf16RoundFn round = Bf16RoundRowsKernel();
  if (round == nullptr) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  std::mt19937 rng(3);
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                0x7f800001u, 0xffbfffffu, 0x00000001u, 0x807fffffu, 0x3f808000u,
                                0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0xff7fffffu, 0x00008000u,
                                0x00018000u, 0x7f7f8000u};
  for (int i = 0; i < 1000; ++i) bits.push_back(static_cast<uint32_t>(rng()));
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * 4);
  for (size_t count : {bits.size(), size_t{16}, size_t{17}, size_t{5}}) {
    std::vector<uint16_t> got(count, 0xdead);
    round(x.data(), got.data(), static_cast<int64_t>(count));
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(got[i], F32ToBf16(x[i])) << "bits 0x" << std::hex << bits[i] << " count " << count;
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
                                     DType::kQ4_0, DType::kQ4_K, DType::kQ6_K, DType::kQ5_K,
                                     DType::kFP8,  DType::kMXFP4};

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, DotKernelsTest, ::testing::ValuesIn(kAllWeightTypes),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace loom::cpu
