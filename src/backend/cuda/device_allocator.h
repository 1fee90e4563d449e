// DeviceAllocator: the one place that calls cudaMalloc/cudaFree. A caching allocator: freed
// blocks go to a per-size free list and are handed out again (sizes rounded up to 512 B below
// 1 MiB, to 1 MiB above), so the per-step activation Allocs of the decoder cost no cudaMalloc and
// no device synchronization after the first step.
//
// Reuse is stream-ordered: a block released while kernels on the backend's (single) stream still
// read it can be handed to later work on that same stream only. Every user of the blocks must
// therefore enqueue on that one stream (CudaBackend does).
//
// Private pool (CUDA graphs): between BeginPrivatePool() and EndPrivatePool(), NewBuffer hands
// out blocks of a separate pool, and those blocks go back to that pool (never to the general
// cache) when released. A graph captured in that window bakes the addresses of its activations;
// since no allocation outside the window can ever receive a pool block, replaying the graph later
// cannot clobber a live tensor. Graphs captured one after another share the pool (they replay on
// the same stream, never concurrently), so the pool holds about one step's activations.
//
// Buffers hold a shared_ptr to the allocator, so they may outlive the backend that made them.
// Thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor/tensor.h"

namespace loom::cuda {

class DeviceAllocator : public std::enable_shared_from_this<DeviceAllocator> {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // A device Buffer of at least `bytes` bytes (uninitialized); freed back to the cache when the
  // last Tensor referring to it dies. Out of memory: drops the cache and retries, then CHECK-fails
  // naming the size.
  std::shared_ptr<Buffer> NewBuffer(size_t bytes);

  // Frees every cached (unused) block of the general cache (pool blocks stay).
  void EmptyCache();

  // Routes NewBuffer to the private pool until EndPrivatePool (see above). Not nestable.
  void BeginPrivatePool();
  void EndPrivatePool();
  size_t pool_bytes() const;  // bytes ever taken by the private pool

  size_t bytes_in_use() const;
  size_t bytes_reserved() const;  // in use + cached
  int device() const { return device_; }

  static size_t RoundSize(size_t bytes);

 private:
  void* Allocate(size_t rounded, bool pooled);
  void Release(void* p, size_t rounded, bool pooled);

  const int device_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // rounded size -> cached blocks
  size_t in_use_ = 0;
  size_t cached_ = 0;
  bool pool_active_ = false;
  std::map<size_t, std::vector<void*>> pool_free_;  // private pool: rounded size -> free blocks
  std::vector<void*> pool_all_;                     // every block the pool owns
  size_t pool_bytes_ = 0;

  friend class DeviceBuffer;
};

}  // namespace loom::cuda
