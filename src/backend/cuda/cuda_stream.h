// RAII owners of CUDA runtime objects: a stream, an event and a pinned (page-locked) host buffer.
// Move-only; the destructors release without CHECKs (they may run during teardown).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace loom::cuda {

class CudaStream {
 public:
  // A non-blocking stream (does not synchronize with the legacy default stream).
  CudaStream() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  CudaStream(CudaStream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&&) = delete;
  CudaStream(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  void Synchronize() const { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent() { CUDA_CHECK(cudaEventCreate(&event_)); }
  ~CudaEvent() {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
  }
  CudaEvent(CudaEvent&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&&) = delete;
  CudaEvent(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  void Record(cudaStream_t s) const { CUDA_CHECK(cudaEventRecord(event_, s)); }
  void Synchronize() const { CUDA_CHECK(cudaEventSynchronize(event_)); }
  // Whether the work before the recorded point has completed (does not wait).
  bool Done() const {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) return false;
    CUDA_CHECK(e);
    return true;
  }
  // Milliseconds from `start` to this event (both recorded and completed).
  float MillisSince(const CudaEvent& start) const {
    float ms = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

// Page-locked host memory (async copies from/to it overlap with compute).
class PinnedHostBuffer {
 public:
  explicit PinnedHostBuffer(size_t bytes) : bytes_(bytes) {
    CUDA_CHECK(cudaMallocHost(&data_, bytes == 0 ? 1 : bytes));
  }
  ~PinnedHostBuffer() {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
  }
  PinnedHostBuffer(PinnedHostBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(o.bytes_) {}
  PinnedHostBuffer& operator=(PinnedHostBuffer&&) = delete;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace loom::cuda
