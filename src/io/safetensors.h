// SafetensorsFile: a validated, zero-copy reader of one .safetensors file.
//
// File layout (all little-endian):
//   [0, 8)            u64 N: length of the JSON header
//   [8, 8 + N)        JSON: {"__metadata__": {str: str}?,
//                            "<tensor>": {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]}}
//   [8 + N, size)     data section; tensor bytes are [8 + N + b, 8 + N + e)
//
// Open() validates everything up front, so GetTensor() on a listed name cannot fail for a reason
// hidden in the file. Every error message starts with the file path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/file_bytes.h"
#include "tensor/tensor.h"

namespace loom {

// One tensor entry of a safetensors header.
struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::kF32;  // F32, F16, BF16 or F8_E4M3 (other dtypes are rejected by Open)
  Shape shape;                // 1..4 dims; a 0-d scalar is stored as [1]
  size_t offset_bytes = 0;    // absolute offset of the first byte in the file
  size_t size_bytes = 0;      // == numel * element size
};

class SafetensorsFile : public std::enable_shared_from_this<SafetensorsFile> {
 public:
  // Largest JSON header accepted (the format's reference implementation uses the same cap).
  static constexpr uint64_t kMaxHeaderBytes = 100'000'000;

  // Maps and validates `path`. Errors: NOT_FOUND (no such file), DATA_LOSS (truncated: header
  // length or tensor bytes past the end of the file), INVALID_ARGUMENT (bad JSON, bad fields,
  // overlapping or mis-sized data_offsets), UNIMPLEMENTED (dtype other than F32/F16/BF16/F8_E4M3,
  // more than 4 dims). Messages name the path and, where there is one, the tensor.
  static StatusOr<std::shared_ptr<SafetensorsFile>> Open(const std::string& path);
  // Same validation over bytes held in memory; `name` stands in for the path in messages.
  static StatusOr<std::shared_ptr<SafetensorsFile>> OpenFromMemory(std::string bytes,
                                                                   std::string name);

  const std::string& path() const { return bytes_.name(); }
  size_t file_size() const { return bytes_.size(); }
  // The optional "__metadata__" string map (e.g. {"format": "pt"}).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Tensor names, sorted.
  std::vector<std::string> names() const;
  size_t num_tensors() const { return tensors_.size(); }
  // The entry for `name`, or nullptr. The pointer lives as long as this object.
  const SafetensorsTensorInfo* Find(const std::string& name) const;

  // A host tensor viewing the file's bytes (zero-copy: the tensor's buffer keeps this file
  // mapped). If the bytes are not aligned to the element size (the format does not require it)
  // they are copied into an aligned host buffer instead. NOT_FOUND names the tensor and path;
  // a tensor with zero elements -> INVALID_ARGUMENT (a Tensor cannot represent it).
  StatusOr<Tensor> GetTensor(const std::string& name) const;

 private:
  explicit SafetensorsFile(FileBytes bytes) : bytes_(std::move(bytes)) {}
  static StatusOr<std::shared_ptr<SafetensorsFile>> Parse(FileBytes bytes);
  Status ParseHeader();

  FileBytes bytes_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, SafetensorsTensorInfo> tensors_;
};

}  // namespace loom
