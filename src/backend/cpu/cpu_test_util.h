// Test helpers for backend/cpu tests: host tensors from vectors, random data.
#pragma once

#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/dot_kernels.h"
#include "tensor/quant.h"
#include "tensor/tensor.h"

namespace loom::cpu_test {

inline std::vector<float> RandomFloats(std::mt19937& rng, int64_t count, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = dist(rng);
  return v;
}

// Every kernel set this CPU runs: scalar, then AVX2 and AVX-512 where available.
inline std::vector<const cpu::DotKernels*> AllIsas() {
  std::vector<const cpu::DotKernels*> isas = {&cpu::ScalarDotKernels()};
  if (cpu::Avx2DotKernels() != nullptr) isas.push_back(cpu::Avx2DotKernels());
  if (cpu::Avx512DotKernels() != nullptr) isas.push_back(cpu::Avx512DotKernels());
  return isas;
}

// A host tensor of `dtype` holding `values` (quantized row by row).
inline Tensor MakeTensor(DType dtype, Shape shape, const std::vector<float>& values) {
  Tensor t = HostTensor(dtype, shape);
  const int64_t cols = t.cols();
  for (int64_t r = 0; r < t.rows(); ++r) {
    QuantizeRow(dtype, values.data() + r * cols, static_cast<char*>(t.data()) + r * t.row_bytes(),
                cols);
  }
  return t;
}

inline Tensor MakeI32(const std::vector<int32_t>& values) {
  Tensor t = HostTensor(DType::kI32, Shape{static_cast<int64_t>(values.size())});
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * 4);
  return t;
}

// The f32 values a tensor of any float dtype decodes to.
inline std::vector<float> ToFloats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (int64_t r = 0; r < t.rows(); ++r) {
    DequantizeRow(t.dtype(), static_cast<const char*>(t.data()) + r * t.row_bytes(),
                  v.data() + r * t.cols(), t.cols());
  }
  return v;
}

}  // namespace loom::cpu_test
