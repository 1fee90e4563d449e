#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_copy.cuh"

namespace loom::cuda {
namespace {

__global__ void CopySegmentsKernel(const CopySegment* segments) {
  const CopySegment seg = segments[blockIdx.x];
  const auto* src = static_cast<const uint4*>(seg.src);
  auto* dst = static_cast<uint4*>(seg.dst);
  const uint64_t units = seg.bytes / sizeof(uint4);
  for (uint64_t u = threadIdx.x; u < units; u += blockDim.x) dst[u] = src[u];
}

}  // namespace

void LaunchCopySegments(const CopySegment* segments, int num_segments, cudaStream_t stream) {
  if (num_segments <= 0) return;
  CopySegmentsKernel<<<num_segments, 256, 0, stream>>>(segments);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace loom::cuda
