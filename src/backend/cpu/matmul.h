// CpuMatMul: out = x @ w^T (+ bias) for every weight dtype, on OpenMP threads.
//
//   x [n, k] f32   w [m, k] any float dtype (rows decoded inside the kernels, never copied to f32
//   as a whole)   bias [m] f32 or undefined   out [n, m] f32
//
// Two paths:
//   - kernels (default, any n): tiles of kDotTileRows weight rows x a group of up to
//     kDotMaxActRows activation rows through the dot kernels (each weight vector is decoded once
//     per group); rows of x are processed in blocks so the block stays cache-resident while the
//     weights stream. Every out element is computed the same way for any n or thread count,
//     so a row's result does not depend on the rest of the batch (ARCHITECTURE.md: "same numerics
//     alone or batched ... on CPU not at all").
//   - BLAS (n >= blas_min_rows > 0): each thread dequantizes tiles of weight rows to f32 and calls
//     single-threaded OpenBLAS sgemm. Faster prefill, but rows then differ from the kernel path
//     by f32 rounding (and, for quantized weights, by the activation quantization).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/dot_kernels.h"
#include "tensor/tensor.h"

namespace loom::cpu {

class CpuMatMul {
 public:
  // num_threads >= 1; blas_min_rows = 0 disables the BLAS path. bf16_activations: bf16 weights
  // go through kernels.bf16_bf16act with x rounded to bf16 (when the set has that kernel).
  CpuMatMul(const DotKernels& kernels, int num_threads, int blas_min_rows,
            bool bf16_activations = false);

  // Computes out (shapes above; CHECKed). Not thread-safe (uses scratch buffers).
  void Run(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out);

 private:
  void RunKernels(const float* x, int64_t n, int64_t k, const Tensor& w, float* out, int64_t m);
  void RunBlas(const float* x, int64_t n, int64_t k, const Tensor& w, float* out, int64_t m);

  const DotKernels& kernels_;
  int num_threads_;
  int blas_min_rows_;
  bool bf16_activations_;
  // Activation rows rounded to bf16 for the bf16-activation kernel: [n, k].
  std::vector<uint16_t> act_bf16_;
  // Activation rows quantized to q8 blocks for quantized weights: [n, k], [n, k/32], [n, k/32].
  std::vector<int8_t> act_qs_;
  std::vector<float> act_d_, act_ds_;
  std::vector<ActQ8Row> act_rows_q8_;  // [n] views of the above
  // Per-thread f32 tiles of dequantized weights for the BLAS path.
  std::vector<std::vector<float>> blas_tiles_;
};

}  // namespace loom::cpu
