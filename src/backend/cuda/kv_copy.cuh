// Copies of byte segments between device memory and page-locked host memory in one launch (the
// host side through unified addressing, zero-copy over PCIe): CudaBackend::CopyKvBlocks moves the
// K and V parts of many KV blocks between the paged pools and a host bounce buffer with it, instead
// of one cudaMemcpy per part (64 per block for a 32-layer model).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace loom::cuda {

struct CopySegment {
  const void* src;
  void* dst;
  uint64_t bytes;  // a multiple of 16; src and dst 16-byte aligned
};

// Copies every segment (`segments` may itself live in page-locked host memory). One CTA a segment.
void LaunchCopySegments(const CopySegment* segments, int num_segments, cudaStream_t stream);

}  // namespace loom::cuda
