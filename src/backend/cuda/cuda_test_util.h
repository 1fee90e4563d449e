// Helpers for the CUDA parity tests: a GPU fixture that skips without a device, bf16-exact
// random inputs (so the CPU reference and the GPU see identical values), readback, poisoning,
// and the normalized error ||got - ref|| / ||ref||.
//
// Tolerances (normalized L2 error vs the f32 CPU backend on identical inputs):
//   kTolRounded = 4e-3: the GPU computes in f32 and rounds the result to bf16 once. bf16 keeps
//     8 significant bits, so each element's relative rounding error is <= 2^-9 = 1.95e-3 (RMS
//     about 2^-9 / sqrt(3) = 1.1e-3); 4e-3 is twice the worst case, leaving room for f32
//     summation order and transcendental ulps, and is still far below what one wrong index or a
//     dropped term (errors of order 1e-1..1) produces.
//   kTolReRounded = 1e-2: additionally the weights were rounded to bf16 on upload (f32 / q8_0 /
//     q4_K weights), one more 2^-9 relative error per weight entering every dot product.
//   Model end-to-end (cuda_model_test.cc) has its own, looser bound: every op rounds again.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "tensor/tensor.h"

namespace loom::cuda_test {

inline constexpr double kTolRounded = 4e-3;
inline constexpr double kTolReRounded = 1e-2;

// A backend on the first CUDA device, or null when there is none this build runs on (the caller
// skips): the defaults, plus the kernels still being checked (fp8 weights kept in 1 byte), so
// that their tests exercise them.
inline std::unique_ptr<CudaBackend> GpuOrNull() {
  if (!CudaBackend::CheckGpu(0).ok()) return nullptr;
  CudaBackendOptions options;
  options.tuning.quant_fp8 = true;
  auto be = CudaBackend::Create(options);
  CHECK(be.ok()) << be.status().ToString();
  return std::move(*be);
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gpu_ = GpuOrNull();
    if (gpu_ == nullptr) GTEST_SKIP() << CudaBackend::CheckGpu(0).message();
  }
  std::unique_ptr<CudaBackend> gpu_;
  CpuBackend cpu_{4};
};

// Normal(0, stddev) values rounded to bf16 (exactly representable on both backends).
inline std::vector<float> RandBf16(std::mt19937& rng, int64_t count, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = Bf16ToF32(F32ToBf16(dist(rng)));
  return v;
}

inline Tensor HostF32(Shape shape, const std::vector<float>& values) {
  Tensor t = HostTensor(DType::kF32, shape);
  CHECK_EQ(static_cast<int64_t>(values.size()), t.numel());
  std::memcpy(t.data(), values.data(), values.size() * 4);
  return t;
}

inline Tensor HostI32(const std::vector<int32_t>& values) {
  Tensor t =
      HostTensor(DType::kI32, Shape{static_cast<int64_t>(std::max<size_t>(values.size(), 1))});
  t.data_as<int32_t>()[0] = 0;
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * 4);
  return values.empty() ? t : t.Slice(0, static_cast<int64_t>(values.size()));
}

// Values of a CPU f32 tensor.
inline std::vector<float> CpuValues(const Tensor& t) {
  CHECK(t.dtype() == DType::kF32 && t.device() == Device::kCpu) << t.DebugString();
  const float* p = t.data_as<const float>();
  return std::vector<float>(p, p + t.numel());
}

// Values of a GPU bf16 or f32 tensor, as floats.
inline std::vector<float> GpuValues(CudaBackend& gpu, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kF32) {
    gpu.CopyToHost(t, out.data());
  } else {
    CHECK(t.dtype() == DType::kBF16) << t.DebugString();
    std::vector<uint16_t> raw(out.size());
    gpu.CopyToHost(t, raw.data());
    for (size_t i = 0; i < raw.size(); ++i) out[i] = Bf16ToF32(raw[i]);
  }
  return out;
}

// Fills a device tensor with NaN bit patterns (0xFF bytes), so unwritten outputs are caught.
inline void Poison(CudaBackend& gpu, const Tensor& t) {
  std::vector<unsigned char> bytes(t.nbytes(), 0xFF);
  gpu.CopyFromHost(bytes.data(), t);
}

// ||got - ref|| / ||ref||; infinity when got has a non-finite value or sizes differ.
inline double NormalizedError(const std::vector<float>& got, const std::vector<float>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    const double d = double{got[i]} - ref[i];
    num += d * d;
    den += double{ref[i]} * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

}  // namespace loom::cuda_test
