// LOOM_HOST_DEVICE: a function both the host code and CUDA kernels call (one definition, so both
// compute the same bits): __host__ __device__ __forceinline__ under nvcc, inline elsewhere.
#pragma once

#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LOOM_HOST_DEVICE inline
#endif
