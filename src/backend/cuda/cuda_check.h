// CUDA_CHECK / CUBLAS_CHECK: every CUDA runtime and cuBLAS(Lt) call goes through one of these.
// A failing call is a broken invariant (bad launch, device lost, out of memory after the
// allocator's retry): it aborts with the call, the error name and file:line.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "base/check.h"

#define CUDA_CHECK(expr)                                                                       \
  do {                                                                                         \
    const cudaError_t loom_cuda_err_ = (expr);                                                 \
    CHECK(loom_cuda_err_ == cudaSuccess) << #expr << ": " << cudaGetErrorName(loom_cuda_err_)  \
                                         << " (" << cudaGetErrorString(loom_cuda_err_) << ")"; \
  } while (0)

#define CUBLAS_CHECK(expr)                                                   \
  do {                                                                       \
    const cublasStatus_t loom_cublas_st_ = (expr);                           \
    CHECK(loom_cublas_st_ == CUBLAS_STATUS_SUCCESS)                          \
        << #expr << ": cublas status " << static_cast<int>(loom_cublas_st_); \
  } while (0)

// After a kernel launch: catches bad launch configurations immediately.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
