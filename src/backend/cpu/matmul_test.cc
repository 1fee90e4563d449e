// MatMul on every weight dtype against a double-precision reference on the dequantized weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_test_util.h"

namespace loom {
namespace {

using cpu_test::AllIsas;
using cpu_test::MakeTensor;
using cpu_test::RandomFloats;
using cpu_test::ToFloats;

constexpr DType kAllWeightTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                     DType::kQ4_0, DType::kQ4_K, DType::kQ6_K, DType::kQ5_K,
                                     DType::kFP8,  DType::kMXFP4};

// Block formats (rows of whole blocks).
bool IsQuantized(DType t) { return GetDTypeInfo(t).quantized; }
// Formats whose kernels round x to q8 blocks (fp8 weights meet f32 x, as the plain dtypes).
bool QuantizesX(DType t) { return IsQuantized(t) && t != DType::kFP8 && t != DType::kMXFP4; }
// Row lengths of whole blocks for a block format.
std::vector<int64_t> BlockKs(DType t, std::vector<int64_t> for_32) {
  const int b = GetDTypeInfo(t).block_elems;
  if (b == 256) return {256, 768};
  if (b == 128) return {128, 384};
  return for_32;
}

// Error bound of one output element out[i, j] of our kernels vs the exact dot product of x with
// the dequantized weights:
//   - f32 accumulation in 8 lanes of k/8 terms + an 8-way reduction: |err| <= (k/8 + 8) * u *
//     sum|w x| (u = 2^-24), doubled for slack;
//   - quantized weights also round x to q8 blocks (|x - x_q| <= d_x / 2 per element), adding
//     sum |w_l| * d_x(l) / 2 (block scales d_x = amax / 127).
std::vector<double> Tolerances(const std::vector<float>& x, const std::vector<float>& w, int64_t n,
                               int64_t m, int64_t k, bool quantized) {
  std::vector<double> tol(static_cast<size_t>(n * m));
  const double u = std::ldexp(1.0, -24);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> half_step(static_cast<size_t>(k), 0.0);
    if (quantized) {
      for (int64_t b = 0; b < k / 32; ++b) {
        double amax = 0;
        for (int64_t l = 32 * b; l < 32 * b + 32; ++l)
          amax = std::max(amax, std::fabs(static_cast<double>(x[i * k + l])));
        for (int64_t l = 32 * b; l < 32 * b + 32; ++l) half_step[l] = amax / 127.0 / 2.0 * 1.0001;
      }
    }
    for (int64_t j = 0; j < m; ++j) {
      double abs_sum = 0, q_err = 0;
      for (int64_t l = 0; l < k; ++l) {
        abs_sum += std::fabs(static_cast<double>(w[j * k + l]) * x[i * k + l]);
        q_err += std::fabs(w[j * k + l]) * half_step[static_cast<size_t>(l)];
      }
      tol[i * m + j] =
          2.0 * (static_cast<double>(k) / 8 + 8) * u * (abs_sum + q_err) + q_err + 1e-30;
    }
  }
  return tol;
}

struct MatMulCase {
  Tensor x, w, bias, out;
  std::vector<float> xv, wv;  // x and the dequantized w
};

MatMulCase MakeCase(std::mt19937& rng, DType wt, int64_t n, int64_t m, int64_t k, bool bias) {
  MatMulCase c;
  c.xv = RandomFloats(rng, n * k);
  c.x = MakeTensor(DType::kF32, Shape{n, k}, c.xv);
  c.w = MakeTensor(wt, Shape{m, k}, RandomFloats(rng, m * k, 0.05f));
  c.wv = ToFloats(c.w);
  if (bias) c.bias = MakeTensor(DType::kF32, Shape{m}, RandomFloats(rng, m));
  c.out = HostTensor(DType::kF32, Shape{n, m});
  return c;
}

void ExpectMatchesReference(const MatMulCase& c, bool quantized_act, const std::string& what) {
  const int64_t n = c.x.rows(), k = c.x.cols(), m = c.w.rows();
  std::vector<double> tol = Tolerances(c.xv, c.wv, n, m, k, quantized_act);
  const float* out = c.out.data_as<const float>();
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      double ref = c.bias.defined() ? c.bias.data_as<const float>()[j] : 0.0;
      for (int64_t l = 0; l < k; ++l) ref += static_cast<double>(c.wv[j * k + l]) * c.xv[i * k + l];
      if (std::fabs(out[i * m + j] - ref) > tol[i * m + j] + (c.bias.defined() ? 1e-6 : 0.0) &&
          ++bad <= 3) {
        ADD_FAILURE() << what << " out[" << i << ", " << j << "] = " << out[i * m + j]
                      << ", reference " << ref << ", tolerance " << tol[i * m + j];
      }
    }
  }
}

class MatMulTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatMulTest, MatchesDoubleReferenceOnAwkwardSizes) {
  const DType wt = GetParam();
  std::mt19937 rng(static_cast<unsigned>(wt) + 1);
  // Plain types: k not a multiple of 8; quantized: whole blocks.
  const std::vector<int64_t> ks =
      IsQuantized(wt) ? BlockKs(wt, {32, 96, 288}) : std::vector<int64_t>{1, 7, 67, 259};
  for (const cpu::DotKernels* isa : AllIsas()) {
    CpuBackend backend(CpuBackendOptions{.num_threads = 2, .kernels = isa});
    for (int64_t n : {1, 3, 17, 97}) {
      for (int64_t m : {1, 6, 33}) {
        for (int64_t k : ks) {
          MatMulCase c = MakeCase(rng, wt, n, m, k, /*bias=*/m == 6);
          backend.MatMul(c.x, c.w, c.bias, c.out);
          ExpectMatchesReference(c, QuantizesX(wt),
                                 std::string(DTypeName(wt)) + " " + backend.name() +
                                     " n=" + std::to_string(n) + " m=" + std::to_string(m) +
                                     " k=" + std::to_string(k));
        }
      }
    }
  }
}

// A row's result must not depend on the other rows of the batch or on the thread count.
TEST_P(MatMulTest, RowsAreBatchInvariantBitExactly) {
  const DType wt = GetParam();
  std::mt19937 rng(42);
  const int64_t n = 37, m = 45, k = 512;
  MatMulCase c = MakeCase(rng, wt, n, m, k, /*bias=*/true);
  CpuBackend two(2), one(1);
  two.MatMul(c.x, c.w, c.bias, c.out);
  Tensor solo_out = HostTensor(DType::kF32, Shape{1, m});
  for (int64_t i : {0, 5, 16, 17, 36}) {
    one.MatMul(c.x.Slice(i, 1), c.w, c.bias, solo_out);
    EXPECT_EQ(std::memcmp(solo_out.data(), c.out.data_as<float>() + i * m, m * 4), 0)
        << DTypeName(wt) << " row " << i;
  }
}

// Batches of every size up to past a row block (16 or 18) and two groups of 8, give each row
// exactly its solo result, for every kernel set: the grouping of rows into multi-row kernel calls,
// the tile split across threads and the partial last tile must not show in any bit.
TEST_P(MatMulTest, EveryBatchSizeEqualsSoloRowsBitExactly) {
  const DType wt = GetParam();
  std::mt19937 rng(7);
  const std::vector<int64_t> ks =
      IsQuantized(wt) ? BlockKs(wt, {32, 800}) : std::vector<int64_t>{8, 40, 100, 771};
  for (const cpu::DotKernels* isa : AllIsas()) {
    CpuBackend one(CpuBackendOptions{.num_threads = 1, .kernels = isa});
    CpuBackend two(CpuBackendOptions{.num_threads = 2, .kernels = isa});
    for (int64_t k : ks) {
      const int64_t m = 23;  // 5 full tiles + a partial one
      MatMulCase c = MakeCase(rng, wt, 19, m, k, /*bias=*/false);
      std::vector<float> solo(static_cast<size_t>(19 * m));
      Tensor solo_out = HostTensor(DType::kF32, Shape{1, m});
      for (int64_t i = 0; i < 19; ++i) {
        one.MatMul(c.x.Slice(i, 1), c.w, c.bias, solo_out);
        std::memcpy(solo.data() + i * m, solo_out.data(), m * 4);
      }
      for (int64_t n = 1; n <= 19; ++n) {
        for (CpuBackend* backend : {&one, &two}) {
          Tensor out = HostTensor(DType::kF32, Shape{n, m});
          backend->MatMul(c.x.Slice(0, n), c.w, c.bias, out);
          for (int64_t i = 0; i < n; ++i) {
            EXPECT_EQ(std::memcmp(out.data_as<float>() + i * m, solo.data() + i * m, m * 4), 0)
                << DTypeName(wt) << " " << backend->name() << " k=" << k << " n=" << n << " row "
                << i;
          }
        }
      }
    }
  }
}

TEST_P(MatMulTest, ScalarAndAvx2Agree) {
  const DType wt = GetParam();
  if (cpu::Avx2DotKernels() == nullptr) GTEST_SKIP() << "no AVX2 on this CPU";
  CpuBackend avx2(CpuBackendOptions{.num_threads = 1, .kernels = cpu::Avx2DotKernels()});
  CpuBackend scalar(CpuBackendOptions{.num_threads = 1, .force_scalar = true});
  std::mt19937 rng(3);
  const int64_t m = 13, k = IsQuantized(wt) ? 1024 : 1001;
  // n = 1: the one-row kernels; 5 and 9: multi-row groups with leftovers.
  for (int64_t n : {1, 5, 9}) {
    MatMulCase c = MakeCase(rng, wt, n, m, k, false);
    Tensor out2 = HostTensor(DType::kF32, Shape{n, m});
    avx2.MatMul(c.x, c.w, c.bias, c.out);
    scalar.MatMul(c.x, c.w, c.bias, out2);
    // Same lanes and order; only FMA vs separate multiply-add rounding differs: each of the
    // k/8 + 8 accumulation steps may differ by one rounding (u = 2^-24) of the running sum of
    // |terms|.
    std::vector<double> tol = Tolerances(c.xv, c.wv, n, m, k, false);
    for (int64_t i = 0; i < n * m; ++i) {
      EXPECT_NEAR(c.out.data_as<float>()[i], out2.data_as<float>()[i], tol[i])
          << "n=" << n << " " << i;
    }
  }
}

// The AVX-512 set (its own act_rows per call) gives every output bit of the AVX2 set, at batch
// sizes that group rows differently in the two and with 1 or 2 threads.
TEST_P(MatMulTest, Avx512AndAvx2AgreeBitExactly) {
  if (cpu::Avx512DotKernels() == nullptr) GTEST_SKIP() << "no AVX-512F/VL/BW on this CPU";
  const DType wt = GetParam();
  std::mt19937 rng(13);
  const int64_t m = 29, k = IsQuantized(wt) ? 1024 : 1003;
  for (int threads : {1, 2}) {
    CpuBackend avx2(CpuBackendOptions{.num_threads = threads, .kernels = cpu::Avx2DotKernels()});
    CpuBackend avx512(
        CpuBackendOptions{.num_threads = threads, .kernels = cpu::Avx512DotKernels()});
    for (int64_t n : {1, 2, 3, 5, 6, 7, 8, 9, 12, 16, 21}) {
      MatMulCase c = MakeCase(rng, wt, n, m, k, /*bias=*/n == 5);
      Tensor out2 = HostTensor(DType::kF32, Shape{n, m});
      avx512.MatMul(c.x, c.w, c.bias, c.out);
      avx2.MatMul(c.x, c.w, c.bias, out2);
      EXPECT_EQ(std::memcmp(c.out.data(), out2.data(), n * m * 4), 0)
          << DTypeName(wt) << " n=" << n << " threads=" << threads;
    }
  }
}

TEST_P(MatMulTest, BlasPathMatchesReference) {
  const DType wt = GetParam();
  std::mt19937 rng(11);
  CpuBackend blas(CpuBackendOptions{.num_threads = 2, .blas_min_rows = 4});
  for (int64_t n : {4, 97}) {
    // BLAS multiplies f32 x by the dequantized weights: f32 rounding only (no activation
    // quantization); OpenBLAS's blocking is within the same (k/8 + 8) u bound's slack for these k.
    MatMulCase c = MakeCase(rng, wt, n, 130, 512, /*bias=*/true);
    blas.MatMul(c.x, c.w, c.bias, c.out);
    ExpectMatchesReference(c, false, std::string("blas ") + std::string(DTypeName(wt)));
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, MatMulTest, ::testing::ValuesIn(kAllWeightTypes),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// bf16 activations (CpuBackendOptions::bf16_activations, AVX512-BF16): x is rounded to bf16,
// the products are then exact in f32, and the kernel sums them in f32. So the result is within
// the f32-summation bound of the exact dot of w with bf16(x); every batch size and thread count
// gives each row its solo bits; and weights other than bf16 keep the f32 path's exact bits.
TEST(MatMulTest, Bf16ActivationsRoundXThenSumInF32BatchInvariantly) {
  if (cpu::Bf16ActDotKernel() == nullptr) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  std::mt19937 rng(11);
  CpuBackend one(CpuBackendOptions{.num_threads = 1, .bf16_activations = true});
  CpuBackend two(CpuBackendOptions{.num_threads = 2, .bf16_activations = true});
  for (int64_t k : {16, 40, 771, 2048}) {
    const int64_t m = 23, n = 19;
    MatMulCase c = MakeCase(rng, DType::kBF16, n, m, k, /*bias=*/false);
    MatMulCase rounded = c;  // the reference sees bf16(x)
    for (float& v : rounded.xv) v = Bf16ToF32(F32ToBf16(v));
    two.MatMul(c.x, c.w, c.bias, c.out);
    rounded.out = c.out;
    ExpectMatchesReference(rounded, /*quantized_act=*/false, "bf16 act k=" + std::to_string(k));
    Tensor solo_out = HostTensor(DType::kF32, Shape{1, m});
    for (int64_t i = 0; i < n; ++i) {
      one.MatMul(c.x.Slice(i, 1), c.w, c.bias, solo_out);
      EXPECT_EQ(std::memcmp(solo_out.data(), c.out.data_as<float>() + i * m, m * 4), 0)
          << "k=" << k << " row " << i;
    }
    for (int64_t rows = 2; rows <= n; ++rows) {
      Tensor out = HostTensor(DType::kF32, Shape{rows, m});
      one.MatMul(c.x.Slice(0, rows), c.w, c.bias, out);
      EXPECT_EQ(std::memcmp(out.data(), c.out.data(), static_cast<size_t>(rows * m * 4)), 0)
          << "k=" << k << " n=" << rows;
    }
  }
  // f16 weights are not affected by the option.
  MatMulCase f = MakeCase(rng, DType::kF16, 5, 9, 64, /*bias=*/false);
  Tensor plain_out = HostTensor(DType::kF32, Shape{5, 9});
  CpuBackend(1).MatMul(f.x, f.w, f.bias, plain_out);
  one.MatMul(f.x, f.w, f.bias, f.out);
  EXPECT_EQ(std::memcmp(plain_out.data(), f.out.data(), 5 * 9 * 4), 0);
}

// fp8 weights decode to exactly DequantizeRow's f32 values and then take the f32 kernels' lanes and
// order: every output bit equals an f32 MatMul of the dequantized weights, on every kernel set.
TEST(MatMulTest, Fp8EqualsDequantizedF32BitExactly) {
  std::mt19937 rng(17);
  for (const cpu::DotKernels* isa : AllIsas()) {
    CpuBackend backend(CpuBackendOptions{.num_threads = 2, .kernels = isa});
    for (int64_t n : {1, 3, 8, 21}) {
      MatMulCase c = MakeCase(rng, DType::kFP8, n, 37, 640, /*bias=*/true);
      Tensor wf = MakeTensor(DType::kF32, Shape{37, 640}, c.wv);
      Tensor out_f = HostTensor(DType::kF32, Shape{n, 37});
      backend.MatMul(c.x, c.w, c.bias, c.out);
      backend.MatMul(c.x, wf, c.bias, out_f);
      EXPECT_EQ(std::memcmp(c.out.data(), out_f.data(), static_cast<size_t>(n * 37 * 4)), 0)
          << isa->isa << " n=" << n;
    }
  }
}

TEST(MatMulTest, QuantizedEqualsDequantizedF32WithinActivationRounding) {
  // The quantized kernel vs an f32 MatMul on the same weights dequantized to f32: they differ
  // only by the q8 rounding of x (bounded per element by Tolerances' q_err) and f32 rounding.
  std::mt19937 rng(5);
  CpuBackend backend(2);
  for (DType wt : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    MatMulCase c = MakeCase(rng, wt, 9, 40, 1024, false);
    Tensor wf = MakeTensor(DType::kF32, Shape{40, 1024}, c.wv);
    Tensor out_f = HostTensor(DType::kF32, Shape{9, 40});
    backend.MatMul(c.x, c.w, c.bias, c.out);
    backend.MatMul(c.x, wf, c.bias, out_f);
    std::vector<double> tol = Tolerances(c.xv, c.wv, 9, 40, 1024, true);
    double max_err = 0;
    for (int64_t i = 0; i < 9 * 40; ++i) {
      const double err = std::fabs(c.out.data_as<float>()[i] - out_f.data_as<float>()[i]);
      EXPECT_LE(err, 2 * tol[i]) << DTypeName(wt) << " " << i;
      max_err = std::max(max_err, err);
    }
    EXPECT_GT(max_err, 0.0) << "activation quantization should be visible";
  }
}

}  // namespace
}  // namespace loom
