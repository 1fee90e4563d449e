// Tensor: a typed, contiguous, row-major view over a Buffer that may live on the host or on a
// device. Model code passes Tensors to the Backend and never dereferences data() itself (on CUDA
// it is a device pointer). Shapes have 1..4 dims; the last dim is the fastest-varying.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "base/check.h"
#include "tensor/dtype.h"

namespace loom {

enum class Device : uint8_t { kCpu, kCuda };

// Memory owned by a backend (or borrowed from an mmap'd file). Subclasses free it.
class Buffer {
 public:
  Buffer(void* data, size_t size_bytes, Device device)
      : data_(data), size_bytes_(size_bytes), device_(device) {}
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size_bytes() const { return size_bytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t size_bytes_;
  Device device_;
};

// Host memory from new[] (64-byte aligned), owned.
std::shared_ptr<Buffer> MakeHostBuffer(size_t size_bytes);
// Borrowed memory: `keep_alive` (e.g. the MappedFile holder) is held as long as the buffer lives.
std::shared_ptr<Buffer> MakeBorrowedBuffer(const void* data, size_t size_bytes, Device device,
                                           std::shared_ptr<const void> keep_alive);

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  int ndim() const { return ndim_; }
  int64_t operator[](int i) const {
    CHECK(i >= 0 && i < ndim_) << "dim " << i << " of a " << ndim_ << "-d shape";
    return dims_[static_cast<size_t>(i)];
  }
  int64_t numel() const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string ToString() const;  // "[2, 3]"

 private:
  std::array<int64_t, 4> dims_{};
  int ndim_ = 0;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset_bytes = 0);

  bool defined() const { return buffer_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return shape_.ndim(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  // Rows = product of all dims but the last; cols = the last dim.
  int64_t rows() const { return numel() / cols(); }
  int64_t cols() const { return shape_[ndim() - 1]; }
  size_t row_bytes() const { return RowBytes(dtype_, cols()); }
  size_t nbytes() const { return static_cast<size_t>(rows()) * row_bytes(); }
  Device device() const { return buffer_->device(); }

  // Raw pointer (device memory for CUDA tensors). Backends only.
  void* data() const { return static_cast<char*>(buffer_->data()) + offset_bytes_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data());
  }

  // A view of rows [begin, begin + count) along the first dimension.
  Tensor Slice(int64_t begin, int64_t count) const;
  // Same bytes, another shape (numel and dtype row layout must agree).
  Tensor Reshape(Shape shape) const;
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  std::string DebugString() const;  // "f32[2, 3]@cpu"

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_bytes_ = 0;
};

// A new host tensor (uninitialized).
Tensor HostTensor(DType dtype, Shape shape);

}  // namespace loom
