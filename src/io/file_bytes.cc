#include "io/file_bytes.h"

#include <utility>

namespace loom {

StatusOr<FileBytes> FileBytes::Map(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
  FileBytes bytes;
  bytes.mapped_ = std::move(mapped);
  bytes.name_ = path;
  return bytes;
}

FileBytes FileBytes::FromMemory(std::string bytes, std::string name) {
  FileBytes out;
  out.owned_ = std::make_unique<std::string>(std::move(bytes));
  out.name_ = std::move(name);
  return out;
}

const uint8_t* FileBytes::data() const {
  return owned_ ? reinterpret_cast<const uint8_t*>(owned_->data()) : mapped_.data();
}

int64_t CheckedNumel(const std::vector<int64_t>& dims) {
  // The nonzero dims must stay within the limit even when another dim is 0: a [2^41, 2^41, 0]
  // tensor holds nothing, but every later product over its shape would overflow.
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : dims) {
    if (d == 0) {
      empty = true;
      continue;
    }
    if (d > kMaxTensorElems || n > kMaxTensorElems / d) return -1;
    n *= d;
  }
  return empty ? 0 : n;
}

Shape ShapeFromDims(const std::vector<int64_t>& dims) {
  switch (dims.size()) {
    case 1:
      return Shape{dims[0]};
    case 2:
      return Shape{dims[0], dims[1]};
    case 3:
      return Shape{dims[0], dims[1], dims[2]};
    case 4:
      return Shape{dims[0], dims[1], dims[2], dims[3]};
    default:
      CHECK(false) << "ShapeFromDims: " << dims.size() << " dims";
      return Shape{};
  }
}

}  // namespace loom
