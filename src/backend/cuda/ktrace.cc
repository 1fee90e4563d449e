#include "backend/cuda/ktrace.cuh"

#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace loom::cuda {

#if defined(LOOM_KTRACE)
void KTraceBind_stream_gemv();
void KTraceBind_decode_attention();
void KTraceBind_argmax();
void KTraceBind_decode_inputs();
void KTraceBind_rows();
#endif

namespace {
void* ring = nullptr;
constexpr size_t kRingBytes = 8 + sizeof(KTraceRecord) * size_t{kKTraceCapacity};
}  // namespace

// A diagnostic build's own buffer (not the device allocator's: it outlives every backend and is
// written at exit). Normal builds never allocate it: the device allocator stays the only
// cudaMalloc there.
void* KTraceDeviceRing() {
#if defined(LOOM_KTRACE)
  if (ring == nullptr) {
    CUDA_CHECK(cudaMalloc(&ring, kRingBytes));
    CUDA_CHECK(cudaMemset(ring, 0, kRingBytes));
  }
#endif
  return ring;
}

void KTraceInit() {
#if defined(LOOM_KTRACE)
  static const bool done = [] {
    KTraceBind_stream_gemv();
    KTraceBind_decode_attention();
    KTraceBind_argmax();
    KTraceBind_decode_inputs();
    KTraceBind_rows();
    return true;
  }();
  (void)done;
#endif
}

bool KTraceBuilt() {
#if defined(LOOM_KTRACE)
  return true;
#else
  return false;
#endif
}

void KTraceDump(const char* path) {
  if (ring == nullptr || path == nullptr || path[0] == '\0') return;
  std::vector<char> host(kRingBytes);
  if (cudaDeviceSynchronize() != cudaSuccess ||
      cudaMemcpy(host.data(), ring, kRingBytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::fprintf(stderr, "ktrace: copy failed\n");
    return;
  }
  FILE* f = std::fopen(path, "wb");
  if (f == nullptr) {
    std::fprintf(stderr, "ktrace: cannot write %s\n", path);
    return;
  }
  std::fwrite(host.data(), 1, host.size(), f);
  std::fclose(f);
  std::fprintf(stderr, "ktrace: wrote %s\n", path);
}

}  // namespace loom::cuda
