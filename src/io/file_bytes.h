// FileBytes: the read-only bytes of a model file, either mmap'd from disk or owned in memory
// (the in-memory form lets the fuzzers and tests parse without touching disk). Move-only.
// Also the small helpers both parsers share for turning untrusted sizes into Shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "tensor/tensor.h"

namespace loom {

class FileBytes {
 public:
  // Maps `path` read-only. Errors (missing, unreadable, a directory) name the path.
  static StatusOr<FileBytes> Map(const std::string& path);
  // Takes ownership of `bytes`; `name` stands in for the path in error messages.
  static FileBytes FromMemory(std::string bytes, std::string name);

  FileBytes(FileBytes&&) = default;
  FileBytes& operator=(FileBytes&&) = default;

  const uint8_t* data() const;
  size_t size() const { return owned_ ? owned_->size() : mapped_.size(); }
  // The path (or in-memory name) used in error messages.
  const std::string& name() const { return name_; }

 private:
  FileBytes() = default;

  MappedFile mapped_;
  std::unique_ptr<std::string> owned_;  // heap-held so that moves keep data() stable
  std::string name_;
};

// Largest element count of a tensor we accept from a file (2^48): keeps numel * 8 in int64.
inline constexpr int64_t kMaxTensorElems = int64_t{1} << 48;

// Product of `dims` (each already checked non-negative), or -1 when it, or the product of the
// nonzero dims alone, exceeds kMaxTensorElems.
int64_t CheckedNumel(const std::vector<int64_t>& dims);

// A Shape from 1..4 dims (CHECKed: callers validate the count first).
Shape ShapeFromDims(const std::vector<int64_t>& dims);

}  // namespace loom
