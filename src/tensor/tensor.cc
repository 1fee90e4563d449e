#include "tensor/tensor.h"

#include <cstdlib>
#include <sstream>

namespace loom {
namespace {

class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(size_t size_bytes) : Buffer(Allocate(size_bytes), size_bytes, Device::kCpu) {}
  ~HostBuffer() override { std::free(data()); }

 private:
  static void* Allocate(size_t n) {
    size_t rounded = (n + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    CHECK(p != nullptr) << "host allocation of " << n << " bytes failed";
    return p;
  }
};

class BorrowedBuffer final : public Buffer {
 public:
  BorrowedBuffer(const void* data, size_t size_bytes, Device device,
                 std::shared_ptr<const void> keep_alive)
      : Buffer(const_cast<void*>(data), size_bytes, device), keep_alive_(std::move(keep_alive)) {}

 private:
  std::shared_ptr<const void> keep_alive_;
};

}  // namespace

std::shared_ptr<Buffer> MakeHostBuffer(size_t size_bytes) {
  return std::make_shared<HostBuffer>(size_bytes);
}

std::shared_ptr<Buffer> MakeBorrowedBuffer(const void* data, size_t size_bytes, Device device,
                                           std::shared_ptr<const void> keep_alive) {
  return std::make_shared<BorrowedBuffer>(data, size_bytes, device, std::move(keep_alive));
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  CHECK(dims.size() >= 1 && dims.size() <= 4) << "shapes have 1..4 dims, got " << dims.size();
  for (int64_t d : dims) {
    CHECK_GE(d, 0);
    dims_[static_cast<size_t>(ndim_++)] = d;
  }
}

int64_t Shape::numel() const {
  if (ndim_ == 0) return 0;
  for (int i = 0; i < ndim_; ++i) {
    if (dims_[static_cast<size_t>(i)] == 0) return 0;  // before any product can overflow
  }
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) {
    CHECK(!__builtin_mul_overflow(n, dims_[static_cast<size_t>(i)], &n))
        << "shape " << ToString() << " has more elements than int64 holds";
  }
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim_ != o.ndim_) return false;
  for (int i = 0; i < ndim_; ++i) {
    if (dims_[static_cast<size_t>(i)] != o.dims_[static_cast<size_t>(i)]) return false;
  }
  return true;
}

std::string Shape::ToString() const {
  std::ostringstream ss;
  ss << "[";
  for (int i = 0; i < ndim_; ++i) ss << (i ? ", " : "") << dims_[static_cast<size_t>(i)];
  ss << "]";
  return ss.str();
}

Tensor::Tensor(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset_bytes)
    : dtype_(dtype), shape_(shape), buffer_(std::move(buffer)), offset_bytes_(offset_bytes) {
  CHECK(buffer_ != nullptr);
  CHECK_LE(offset_bytes_ + nbytes(), buffer_->size_bytes())
      << "tensor " << shape_.ToString() << " " << DTypeName(dtype_) << " overruns its buffer";
}

Tensor Tensor::Slice(int64_t begin, int64_t count) const {
  CHECK(begin >= 0 && count >= 0 && begin + count <= dim(0))
      << "slice [" << begin << ", " << begin + count << ") of " << shape_.ToString();
  int64_t inner_rows = dim(0) == 0 ? 0 : rows() / dim(0);
  size_t stride = static_cast<size_t>(inner_rows) * row_bytes();
  Shape s;
  switch (ndim()) {
    case 1:
      s = Shape{count};
      break;
    case 2:
      s = Shape{count, dim(1)};
      break;
    case 3:
      s = Shape{count, dim(1), dim(2)};
      break;
    default:
      s = Shape{count, dim(1), dim(2), dim(3)};
      break;
  }
  if (ndim() == 1) {
    CHECK_EQ(begin % GetDTypeInfo(dtype_).block_elems, 0);
    return Tensor(dtype_, s, buffer_, offset_bytes_ + RowBytes(dtype_, begin));
  }
  return Tensor(dtype_, s, buffer_, offset_bytes_ + static_cast<size_t>(begin) * stride);
}

Tensor Tensor::Reshape(Shape shape) const {
  CHECK_EQ(shape.numel(), numel()) << shape.ToString() << " vs " << shape_.ToString();
  Tensor t = *this;
  t.shape_ = shape;
  CHECK_EQ(t.nbytes(), nbytes()) << "reshape changes the block layout";
  return t;
}

std::string Tensor::DebugString() const {
  std::ostringstream ss;
  ss << DTypeName(dtype_) << shape_.ToString() << "@"
     << (defined() && device() == Device::kCuda ? "cuda" : "cpu");
  return ss.str();
}

Tensor HostTensor(DType dtype, Shape shape) {
  int64_t cols = shape[shape.ndim() - 1];
  int64_t rows = cols == 0 ? 0 : shape.numel() / cols;
  size_t bytes = static_cast<size_t>(rows) * RowBytes(dtype, cols);
  return Tensor(dtype, shape, MakeHostBuffer(bytes));
}

}  // namespace loom
