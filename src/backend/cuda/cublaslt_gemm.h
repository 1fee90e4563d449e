// CublasLtGemm: out[n, m] = x[n, k] @ w[m, k]^T through cuBLASLt, bf16 inputs, f32 accumulation,
// bf16 or f32 output. One handle and one workspace per instance; the algorithm for each
// (n, m, k, out dtype) is chosen once by cuBLASLt's heuristic (or by timing its first `tune`
// candidates) and cached with its descriptors.
//
// Row-major [n, m] = col-major [m, n]: C = W^T(k x m stored, op T) * X^T(k x n stored, op N).
// Not thread-safe (one stream).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "tensor/tensor.h"

namespace loom::cuda {

class DeviceAllocator;

class CublasLtGemm {
 public:
  // tune > 1: time cuBLASLt's first `tune` heuristic candidates on the real operands (not while
  // the stream captures a graph, not when accumulating) and keep the fastest
  // (CudaTuning::cublaslt_tune). print_plans: each new plan's candidates and timings to stderr
  // (CudaBackendOptions::profile).
  CublasLtGemm(DeviceAllocator& allocator, cudaStream_t stream, int tune = 1,
               bool print_plans = false);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // out = x @ w^T, or out += x @ w^T when `accumulate` (beta = 1: one rounding of the f32 sum
  // plus the old value). x [n, k] bf16, w [m, k] bf16, out [n, m] bf16 or f32 (device pointers,
  // 16-byte aligned for the fast kernels). Enqueued on the stream. ldc: the distance between
  // out's rows in elements (0: m; larger writes m columns of a wider matrix).
  void Run(const void* x, const void* w, void* out, DType out_dtype, int64_t n, int64_t m,
           int64_t k, bool accumulate = false, int64_t ldc = 0);

  size_t num_cached_plans() const { return plans_.size(); }

 private:
  struct Plan;
  using Key = std::tuple<int64_t, int64_t, int64_t, int, bool, int64_t>;
  Plan& GetPlan(int64_t n, int64_t m, int64_t k, DType out_dtype, bool accumulate, int64_t ldc,
                const void* x, const void* w, void* out);

  DeviceAllocator& allocator_;  // the backend's; outlives this
  cudaStream_t stream_;
  int tune_ = 1;
  bool print_plans_ = false;
  cublasLtHandle_t handle_ = nullptr;
  Tensor workspace_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace loom::cuda
