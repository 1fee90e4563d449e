// Kernel launches with programmatic dependent launch (PDL, Hopper+), for the decode step's chain
// of small kernels (.cu files only).
//
// A kernel launched by LaunchPdl may start while the kernel before it on the stream is still
// running: its blocks become resident as soon as every block of the previous kernel has called
// PdlLaunchDependents() (or exited), and run up to their PdlWait(), which returns once the
// previous kernel has completed and its writes are visible. Work that reads nothing the previous
// kernels write (a GEMV's first weight loads) goes before PdlWait and overlaps their tail; the
// launch latency itself is hidden too. Inside a CUDA graph the same edges become programmatic
// dependencies.
//
// Rules for a kernel launched this way (each kernel's comment says where it waits):
//   - before PdlWait: no read of anything the previous kernel may write (activations; this
//     step's new KV rows), no write at all (the previous kernel may still read what this one
//     would overwrite). Everything older is safe: when a kernel starts, every kernel before its
//     predecessor has completed (the predecessor only lets it start after its own PdlWait).
//     Weights (stream_gemv.cu's producer warp never waits) and earlier steps' KV rows
//     (decode_attention.cu's first tile) are read early this way;
//   - every block reaches PdlWait before it exits, even blocks with no work: a kernel that could
//     finish before its predecessor would break the ordering the kernel after it relies on;
//   - PdlLaunchDependents goes after PdlWait, so at most two kernels overlap.
// Kernels launched with <<<>>> keep full stream ordering; griddepcontrol is a no-op for them.
//
// Every launcher takes `pdl`: false launches without the attribute (CudaTuning::cuda_pdl, the
// CLI's --cuda-tune cuda_pdl=0: A/B, debugging).
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"

namespace loom::cuda {

// True when the current device is Hopper or newer (the Hopper-only paths: PDL, clusters, TMA);
// false without a device. Queried on the first call (one device a process).
inline bool HopperOrNewer() {
  static const bool hopper = [] {
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return hopper;
}

__device__ __forceinline__ void PdlWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void PdlLaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when `pdl` (on Hopper+),
// in thread-block clusters of `cluster` blocks when that is more than one (Hopper+).
template <typename... Params, typename... Args>
void LaunchPdlCluster(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                      cudaStream_t stream, bool pdl, dim3 cluster, Args... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (pdl && HopperOrNewer()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x;
    attr[n].val.clusterDim.y = cluster.y;
    attr[n].val.clusterDim.z = cluster.z;
    ++n;
  }
  config.attrs = attr;
  config.numAttrs = n;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

template <typename... Params, typename... Args>
void LaunchPdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
               bool pdl, Args... args) {
  LaunchPdlCluster(kernel, grid, block, smem, stream, pdl, dim3(1, 1, 1), args...);
}

}  // namespace loom::cuda
