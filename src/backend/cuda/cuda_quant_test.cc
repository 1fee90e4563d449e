// GGUF quantized weights kept quantized on the GPU (quant_layout.h, quant_gemv.cuh): the row
// repacking round trip (host only), the dequantize kernel bit for bit against
// tensor/quant.h's DequantizeRow, and every MatMul-family op with quantized weights (the
// quantized GEMV for n <= 8, dequantized chunks through cuBLASLt above) against a reference in
// double over the dequantized weights. GPU tests skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_test_util.h"
#include "backend/cuda/quant_layout.h"
#include "tensor/quant.h"

namespace loom {
namespace {

using cuda_test::GpuValues;
using cuda_test::HostF32;
using cuda_test::HostI32;
using cuda_test::NormalizedError;
using cuda_test::Poison;
using cuda_test::RandBf16;

constexpr DType kFormats[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K,
                              DType::kQ5_K, DType::kQ6_K, DType::kFP8};

// x rounded to int8 per 32 (the GEMV's activations) costs about 1/254 of a group's largest
// value per element; bf16 output rounding another 2^-9. Measured errors are 2-4e-3.
constexpr double kTolQuantGemv = 1.2e-2;
// act(gate) * up: the relative errors of two such products add (measured up to 1.6e-2 for
// 48 outputs).
constexpr double kTolGated = 2 * kTolQuantGemv;

// A quantized [rows, k] host tensor of N(0, 0.05) values (QuantizeRow) and its dequantized
// values (DequantizeRow).
struct QuantWeight {
  Tensor host;
  std::vector<float> values;
};

QuantWeight MakeWeight(DType dtype, int64_t rows, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 0.05f);
  std::vector<float> v(static_cast<size_t>(rows * k));
  for (float& x : v) x = dist(rng);
  QuantWeight w{HostTensor(dtype, Shape{rows, k}), std::vector<float>(v.size())};
  for (int64_t r = 0; r < rows; ++r) {
    char* row = static_cast<char*>(w.host.data()) + r * w.host.row_bytes();
    QuantizeRow(dtype, v.data() + r * k, row, k);
    DequantizeRow(dtype, row, w.values.data() + r * k, k);
  }
  return w;
}

// ref[n, m] = x[n, k] @ w[m, k]^T in double.
std::vector<double> Product(const std::vector<float>& x, const std::vector<float>& w, int64_t n,
                            int64_t m, int64_t k) {
  std::vector<double> out(static_cast<size_t>(n * m));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < m; ++c) {
      double s = 0;
      for (int64_t i = 0; i < k; ++i) s += double{x[r * k + i]} * w[c * k + i];
      out[r * m + c] = s;
    }
  }
  return out;
}

std::vector<float> ToFloat(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// RMSNorm(x) * (w + offset), each row rounded to bf16 as the backend's norm output.
std::vector<float> Normed(const std::vector<float>& x, const std::vector<float>& w, int64_t n,
                          int64_t k, float eps, float offset) {
  std::vector<float> out(x.size());
  for (int64_t r = 0; r < n; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < k; ++i) ss += double{x[r * k + i]} * x[r * k + i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(k) + eps));
    for (int64_t i = 0; i < k; ++i) {
      out[r * k + i] = Bf16ToF32(F32ToBf16(x[r * k + i] * inv * (w[i] + offset)));
    }
  }
  return out;
}

double Silu(double g) { return g / (1.0 + std::exp(-g)); }

TEST(QuantLayoutTest, RepackRoundTripsAndRegroupsEveryFormat) {
  std::mt19937 rng(1);
  for (DType dt : kFormats) {
    for (int64_t k : {256, 512, 768}) {
      const int64_t rows = 3;
      const size_t bytes = RowBytes(dt, k) * rows;
      std::vector<uint8_t> src(bytes), packed(bytes), back(bytes);
      for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
      cuda::RepackRows(dt, src.data(), packed.data(), rows, k);
      cuda::UnpackRows(dt, packed.data(), back.data(), rows, k);
      EXPECT_EQ(back, src) << DTypeName(dt) << " k " << k;
      EXPECT_NE(packed, src) << DTypeName(dt) << " k " << k;  // every format moves its scales
    }
  }
}

class CudaQuantTest : public cuda_test::GpuTest {};

// Embed over a quantized table takes the dequantize kernel: rows equal DequantizeRow's values
// times the scale, rounded to bf16, bit for bit; ids outside the table give zeros. Includes
// widths whose rows are not 16-byte aligned (q8_0 / q4_0 k = 224, q6_K k = 768).
TEST_F(CudaQuantTest, DequantizedRowsAreDequantizeRowBitForBit) {
  std::mt19937 rng(2);
  for (DType dt : kFormats) {
    const int multiple = cuda::QuantRowMultiple(dt);
    for (int64_t k : multiple == 256   ? std::vector<int64_t>{256, 768, 4096}
                     : multiple == 128 ? std::vector<int64_t>{384, 640, 4096}
                                       : std::vector<int64_t>{224, 256, 4096}) {
      const int64_t rows = 37;
      QuantWeight w = MakeWeight(dt, rows, k, rng);
      Tensor table = gpu_->Upload(w.host);
      ASSERT_EQ(table.dtype(), dt);
      const std::vector<int32_t> ids = {0, 36, 5, -1, 17, 37, 5};
      for (float scale : {1.f, 2.5f}) {
        Tensor out = gpu_->Alloc(DType::kBF16, Shape{static_cast<int64_t>(ids.size()), k});
        Poison(*gpu_, out);
        gpu_->Embed(table, gpu_->Upload(HostI32(ids)), scale, out);
        const std::vector<float> got = GpuValues(*gpu_, out);
        for (size_t i = 0; i < ids.size(); ++i) {
          const bool valid = ids[i] >= 0 && ids[i] < rows;
          for (int64_t j = 0; j < k; ++j) {
            const float want = valid ? Bf16ToF32(F32ToBf16(w.values[ids[i] * k + j] * scale)) : 0.f;
            ASSERT_EQ(got[i * k + j], want)
                << DTypeName(dt) << " k " << k << " id " << ids[i] << " col " << j;
          }
        }
      }
    }
  }
}

// --dummy-weights --quantize fp8 builds its weights on the device: the same bytes as the host's
// FillUniform (QuantizeRow of the hashed values) repacked, including rows that are not 16-byte
// aligned (k = 384).
TEST_F(CudaQuantTest, Fp8FillUniformIsTheHostQuantizationBitForBit) {
  for (int64_t k : {384, 4096}) {
    const int64_t rows = 33;
    Tensor host = HostTensor(DType::kFP8, Shape{rows, k});
    cpu_.FillUniform(host, 9, -0.03f, 0.06f);
    Tensor dev = gpu_->Alloc(DType::kFP8, Shape{rows, k});
    gpu_->FillUniform(dev, 9, -0.03f, 0.06f);
    std::vector<uint8_t> packed(host.nbytes()), got(host.nbytes());
    gpu_->CopyToHost(dev, packed.data());
    cuda::UnpackRows(DType::kFP8, packed.data(), got.data(), rows, k);
    EXPECT_EQ(std::memcmp(got.data(), host.data(), got.size()), 0) << "k " << k;
  }
}

// quant_layout.h's converse: with quant_weights off, Upload dequantizes to bf16 as before.
TEST_F(CudaQuantTest, QuantWeightsOffDequantizesOnUpload) {
  CudaTuning t = gpu_->tuning();
  t.quant_weights = false;
  gpu_->set_tuning(t);
  std::mt19937 rng(3);
  for (DType dt : kFormats) {
    QuantWeight w = MakeWeight(dt, 3, 512, rng);
    Tensor g = gpu_->Upload(w.host);
    ASSERT_EQ(g.dtype(), DType::kBF16) << DTypeName(dt);
    const std::vector<float> back = GpuValues(*gpu_, g);
    for (size_t i = 0; i < back.size(); ++i) {
      ASSERT_EQ(back[i], Bf16ToF32(F32ToBf16(w.values[i]))) << DTypeName(dt) << " " << i;
    }
  }
}

// MatMul (bf16 and f32 out), MatMulAdd, FuseGateUp + MatMulGated, RmsNormMatMul and
// RmsNormMatMulGated with quantized weights, n on both sides of quant_gemv_rows (8), m small
// (the GEMV's split rows) and large, against double over the dequantized weights.
TEST_F(CudaQuantTest, MatMulOpsMatchTheDequantizedProduct) {
  std::mt19937 rng(4);
  for (DType dt : kFormats) {
    for (int64_t k : {256, 2048}) {
      for (int64_t m : {96, 4400}) {
        for (int64_t n : {1, 2, 3, 8, 17}) {
          const std::string what = std::string(DTypeName(dt)) + " n " + std::to_string(n) + " m " +
                                   std::to_string(m) + " k " + std::to_string(k);
          QuantWeight w = MakeWeight(dt, m, k, rng);
          const std::vector<float> xv = RandBf16(rng, n * k);
          Tensor gw = gpu_->Upload(w.host);
          Tensor gx = gpu_->Upload(HostF32(Shape{n, k}, xv));
          const std::vector<double> ref = Product(xv, w.values, n, m, k);
          for (DType out_t : {DType::kF32, DType::kBF16}) {
            Tensor out = gpu_->Alloc(out_t, Shape{n, m});
            Poison(*gpu_, out);
            gpu_->MatMul(gx, gw, Tensor(), out);
            EXPECT_LT(NormalizedError(GpuValues(*gpu_, out), ToFloat(ref)), kTolQuantGemv)
                << "MatMul " << what << " out " << DTypeName(out_t);
          }
          {  // acc += x @ w^T
            const std::vector<float> av = RandBf16(rng, n * m);
            Tensor acc = gpu_->Upload(HostF32(Shape{n, m}, av));
            gpu_->MatMulAdd(gx, gw, Tensor(), acc);
            std::vector<double> want = ref;
            for (size_t i = 0; i < want.size(); ++i) want[i] += av[i];
            EXPECT_LT(NormalizedError(GpuValues(*gpu_, acc), ToFloat(want)), kTolQuantGemv)
                << "MatMulAdd " << what;
          }
          {  // silu(x @ gate^T) * (x @ up^T) through FuseGateUp's pairs
            const int64_t f = m / 2;
            QuantWeight up = MakeWeight(dt, f, k, rng);
            Tensor fused = gpu_->FuseGateUp(gw.Slice(0, f), gpu_->Upload(up.host));
            ASSERT_EQ(fused.dtype(), dt);
            const std::vector<double> gate_ref = Product(
                xv, std::vector<float>(w.values.begin(), w.values.begin() + f * k), n, f, k);
            const std::vector<double> up_ref = Product(xv, up.values, n, f, k);
            std::vector<double> want(gate_ref.size());
            for (size_t i = 0; i < want.size(); ++i) want[i] = Silu(gate_ref[i]) * up_ref[i];
            Tensor out = gpu_->Alloc(DType::kBF16, Shape{n, f});
            Poison(*gpu_, out);
            gpu_->MatMulGated(gx, fused, Backend::GatedAct::kSilu, out);
            EXPECT_LT(NormalizedError(GpuValues(*gpu_, out), ToFloat(want)), kTolGated)
                << "MatMulGated " << what;
            // The norm prologue (one row): RmsNormMatMul and RmsNormMatMulGated.
            const std::vector<float> nw = RandBf16(rng, k, 0.3f);
            const Backend::NormSpec norm{gpu_->Upload(HostF32(Shape{k}, nw)), 1e-6f, 1.f};
            const std::vector<float> xn = Normed(xv, nw, n, k, 1e-6f, 1.f);
            Tensor normed = gpu_->Alloc(DType::kF32, Shape{n, m});
            Poison(*gpu_, normed);
            gpu_->RmsNormMatMul(gx, norm, gw, Tensor(), normed);
            EXPECT_LT(
                NormalizedError(GpuValues(*gpu_, normed), ToFloat(Product(xn, w.values, n, m, k))),
                kTolQuantGemv)
                << "RmsNormMatMul " << what;
            const std::vector<double> gate_n = Product(
                xn, std::vector<float>(w.values.begin(), w.values.begin() + f * k), n, f, k);
            const std::vector<double> up_n = Product(xn, up.values, n, f, k);
            for (size_t i = 0; i < want.size(); ++i) want[i] = Silu(gate_n[i]) * up_n[i];
            Poison(*gpu_, out);
            gpu_->RmsNormMatMulGated(gx, norm, fused, Backend::GatedAct::kSilu, out);
            EXPECT_LT(NormalizedError(GpuValues(*gpu_, out), ToFloat(want)), kTolGated)
                << "RmsNormMatMulGated " << what;
          }
        }
      }
    }
  }
}

// The quantized GEMV and the dequantize + cuBLASLt path give the same products (within the
// activation rounding), and the GEMV is deterministic launch to launch.
TEST_F(CudaQuantTest, GemvAgreesWithTheDequantizedPathAndRepeatsExactly) {
  std::mt19937 rng(5);
  for (DType dt : kFormats) {
    const int64_t n = 4, m = 1536, k = 4096;
    QuantWeight w = MakeWeight(dt, m, k, rng);
    Tensor gw = gpu_->Upload(w.host);
    Tensor gx = gpu_->Upload(HostF32(Shape{n, k}, RandBf16(rng, n * k)));
    std::vector<std::vector<float>> runs;
    for (int rows : {8, 8, 0}) {  // GEMV twice, then quant_gemv_rows = 0: dequantized
      CudaTuning t = gpu_->tuning();
      t.quant_gemv_rows = rows;
      gpu_->set_tuning(t);
      Tensor out = gpu_->Alloc(DType::kF32, Shape{n, m});
      gpu_->MatMul(gx, gw, Tensor(), out);
      runs.push_back(GpuValues(*gpu_, out));
    }
    EXPECT_EQ(runs[0], runs[1]) << DTypeName(dt);
    EXPECT_LT(NormalizedError(runs[0], runs[2]), kTolQuantGemv) << DTypeName(dt);
  }
}

}  // namespace
}  // namespace loom
