#include "backend/cuda/device_allocator.h"

#include "backend/cuda/cuda_check.h"

namespace loom::cuda {

// A Buffer on the device that returns its block to the allocator's cache.
class DeviceBuffer final : public Buffer {
 public:
  DeviceBuffer(std::shared_ptr<DeviceAllocator> owner, void* data, size_t bytes, size_t rounded,
               bool pooled)
      : Buffer(data, bytes, Device::kCuda),
        owner_(std::move(owner)),
        rounded_(rounded),
        pooled_(pooled) {}
  ~DeviceBuffer() override { owner_->Release(data(), rounded_, pooled_); }

 private:
  std::shared_ptr<DeviceAllocator> owner_;
  size_t rounded_;
  bool pooled_;
};

DeviceAllocator::~DeviceAllocator() {
  // No CHECKs here: this can run during process teardown, after the CUDA runtime has unloaded.
  if (cudaSetDevice(device_) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) return;
  for (auto& [size, ptrs] : free_) {
    for (void* p : ptrs) (void)cudaFree(p);
  }
  for (void* p : pool_all_) (void)cudaFree(p);
}

size_t DeviceAllocator::RoundSize(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{1} << 20;
  if (bytes == 0) bytes = 1;
  if (bytes < kLarge) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

std::shared_ptr<Buffer> DeviceAllocator::NewBuffer(size_t bytes) {
  const size_t rounded = RoundSize(bytes);
  bool pooled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pooled = pool_active_;
  }
  void* p = Allocate(rounded, pooled);
  return std::make_shared<DeviceBuffer>(shared_from_this(), p, bytes, rounded, pooled);
}

void DeviceAllocator::BeginPrivatePool() {
  std::lock_guard<std::mutex> lock(mu_);
  CHECK(!pool_active_) << "DeviceAllocator: private pool already active";
  pool_active_ = true;
}

void DeviceAllocator::EndPrivatePool() {
  std::lock_guard<std::mutex> lock(mu_);
  CHECK(pool_active_) << "DeviceAllocator: no private pool active";
  pool_active_ = false;
}

size_t DeviceAllocator::pool_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_bytes_;
}

void* DeviceAllocator::Allocate(size_t rounded, bool pooled) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& cache = pooled ? pool_free_ : free_;
    auto it = cache.find(rounded);
    if (it != cache.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      if (!pooled) cached_ -= rounded;
      in_use_ += rounded;
      return p;
    }
  }
  CUDA_CHECK(cudaSetDevice(device_));
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, rounded);
  if (err == cudaErrorMemoryAllocation && !pooled) {  // (no device sync while capturing)
    (void)cudaGetLastError();                         // clear the sticky-free error state
    EmptyCache();
    err = cudaMalloc(&p, rounded);
  }
  CHECK(err == cudaSuccess) << "cudaMalloc of " << rounded << " bytes failed ("
                            << cudaGetErrorString(err) << "); " << bytes_in_use()
                            << " bytes in use on device " << device_;
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ += rounded;
  if (pooled) {
    pool_all_.push_back(p);
    pool_bytes_ += rounded;
  }
  return p;
}

void DeviceAllocator::Release(void* p, size_t rounded, bool pooled) {
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= rounded;
  if (pooled) {
    pool_free_[rounded].push_back(p);
    return;
  }
  free_[rounded].push_back(p);
  cached_ += rounded;
}

void DeviceAllocator::EmptyCache() {
  std::map<size_t, std::vector<void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.swap(free_);
    cached_ = 0;
  }
  if (blocks.empty()) return;
  // Cached blocks may still be read by queued work: wait for it before freeing.
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (auto& [size, ptrs] : blocks) {
    for (void* p : ptrs) CUDA_CHECK(cudaFree(p));
  }
}

size_t DeviceAllocator::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

size_t DeviceAllocator::bytes_reserved() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_ + cached_;
}

}  // namespace loom::cuda
