// GgufWriter: builds a GGUF v3 file (metadata of every type + tensors already in their on-disk
// block format), in memory or streamed (DeclareTensor + Header). Used by tests, benchmark
// tooling and `loom quantize` (io/gguf_quantize.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "io/gguf_value.h"
#include "tensor/tensor.h"

namespace loom {

class GgufWriter {
 public:
  // `alignment` (a power of two, CHECKed) of the data section and of every tensor; values other
  // than the GGUF default 32 are recorded as general.alignment (u32).
  explicit GgufWriter(uint32_t alignment = 32);

  // Sets metadata `key` (a key set twice keeps its first position and the last value).
  void Set(const std::string& key, GgufValue value);
  void SetString(const std::string& key, std::string v) {
    Set(key, GgufValue::String(std::move(v)));
  }
  void SetU32(const std::string& key, uint32_t v) { Set(key, GgufValue::U32(v)); }
  void SetI32(const std::string& key, int32_t v) { Set(key, GgufValue::I32(v)); }
  void SetU64(const std::string& key, uint64_t v) { Set(key, GgufValue::U64(v)); }
  void SetF32(const std::string& key, float v) { Set(key, GgufValue::F32(v)); }
  void SetBool(const std::string& key, bool v) { Set(key, GgufValue::Bool(v)); }
  void SetStringArray(const std::string& key, const std::vector<std::string>& v) {
    Set(key, GgufValue::StringArray(v));
  }
  void SetF32Array(const std::string& key, const std::vector<float>& v) {
    Set(key, GgufValue::F32Array(v));
  }
  void SetI32Array(const std::string& key, const std::vector<int32_t>& v) {
    Set(key, GgufValue::I32Array(v));
  }

  // Adds a tensor. `shape` is in loom order (last dim fastest; written reversed as GGUF ne);
  // `bytes` is the row-major data already in `dtype`'s layout and must be exactly
  // rows * RowBytes(dtype, cols) long (CHECKed, as is a unique name). The bytes are copied.
  void AddTensor(const std::string& name, DType dtype, const Shape& shape, std::string_view bytes);
  // Adds a host tensor's bytes.
  void AddTensor(const std::string& name, const Tensor& tensor);
  // Declares a tensor whose bytes the caller streams after Header() (see Header): its info and
  // offset are written, its data is not. Same checks as AddTensor.
  void DeclareTensor(const std::string& name, DType dtype, const Shape& shape);

  // The file image up to the data section: magic, metadata, tensor infos, padding. A streamed
  // file is Header(), then each tensor's bytes in AddTensor / DeclareTensor order, each followed
  // by zeros up to the next multiple of alignment() (PaddingAfter).
  std::string Header() const;
  uint32_t alignment() const { return alignment_; }
  size_t PaddingAfter(size_t tensor_bytes) const {
    return (alignment_ - tensor_bytes % alignment_) % alignment_;
  }
  // The complete file image (CHECKs that no tensor was only declared).
  std::string Serialize() const;
  // Writes Serialize() to `path`. Errors (cannot create / short write) name the path.
  Status WriteFile(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    DType dtype;
    Shape shape;
    size_t nbytes;
    std::string bytes;  // empty for a declared tensor
    bool declared;
  };
  // The checks AddTensor and DeclareTensor share; returns the tensor's byte count.
  size_t CheckedTensorBytes(const std::string& name, DType dtype, const Shape& shape) const;

  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;  // in insertion order
  std::vector<PendingTensor> tensors_;
};

}  // namespace loom
