// GgufFile: a validated, zero-copy reader of a GGUF (v2 or v3, little-endian) model file.
//
// File layout:
//   "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv x      { string key | u32 value type | value }          (string = u64 length + bytes)
//   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset }
//   padding to general.alignment (default 32)
//   data section: tensor i's bytes start at data_offset + offset_i (a multiple of the alignment)
//
// GGUF's ne[0] is the fastest-varying dim; loom's Shape lists dims slowest first, so a tensor
// with ne = [64, 512] has Shape [512, 64]. Open() validates everything up front; every error
// message starts with the file path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/file_bytes.h"
#include "io/gguf_types.h"
#include "io/gguf_value.h"
#include "tensor/tensor.h"

namespace loom {

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;     // the on-disk ggml type id
  DType dtype = DType::kF32;  // what it loads as
  Shape shape;                // loom order (reversed ne); 1..4 dims
  size_t offset_bytes = 0;    // absolute offset of the first byte in the file
  size_t size_bytes = 0;      // rows * RowBytes(dtype, ne[0])
};

class GgufFile : public std::enable_shared_from_this<GgufFile> {
 public:
  // Sanity caps on counts read from the header (real models have < 10^4 tensors, < 10^3 keys).
  static constexpr uint64_t kMaxTensors = 1u << 20;
  static constexpr uint64_t kMaxMetadataKeys = 1u << 20;
  static constexpr int kMaxArrayDepth = 4;
  // Per metadata array (the largest real ones, vocabularies and merges, have < 10^6 entries).
  static constexpr uint64_t kMaxArrayElems = 1u << 24;

  // Maps and validates `path`. Errors: NOT_FOUND (no file), DATA_LOSS (truncated anywhere),
  // INVALID_ARGUMENT (wrong magic, bad version, absurd counts or lengths, bad alignment,
  // unaligned or overlapping tensor data, bad dims), UNIMPLEMENTED (GGUF v1, big-endian files,
  // tensor types other than f32/f16/bf16/q8_0/q4_0/q4_K/q6_K, naming the tensor and the type).
  static StatusOr<std::shared_ptr<GgufFile>> Open(const std::string& path);
  // Same over bytes held in memory; `name` stands in for the path in messages.
  static StatusOr<std::shared_ptr<GgufFile>> OpenFromMemory(std::string bytes, std::string name);
  // The header only, for describing a file without loading it (`loom list`): the metadata and
  // each tensor's name, shape and ggml_type, with the header's checks but none of the data's.
  // Tensor types loom cannot load are accepted (their `dtype` is meaningless: kF32, and
  // size_bytes 0); GetTensor() on such a file is FailedPrecondition.
  static StatusOr<std::shared_ptr<GgufFile>> OpenHeader(const std::string& path);
  bool header_only() const { return header_only_; }

  const std::string& path() const { return bytes_.name(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }

  // --- metadata ---
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  // The metadata keys in file order.
  const std::vector<std::string>& metadata_keys() const { return metadata_keys_; }
  // The value of `key`, or nullptr.
  const GgufValue* Find(const std::string& key) const;
  bool Has(const std::string& key) const { return Find(key) != nullptr; }
  // Typed reads of `key` (see GgufValue::As*). Missing key -> NOT_FOUND; wrong type ->
  // INVALID_ARGUMENT; both name the file and the key.
  StatusOr<std::string> GetString(const std::string& key) const;
  StatusOr<int64_t> GetInt(const std::string& key) const;
  StatusOr<double> GetFloat(const std::string& key) const;
  StatusOr<bool> GetBool(const std::string& key) const;
  StatusOr<std::vector<std::string>> GetStringArray(const std::string& key) const;
  StatusOr<std::vector<float>> GetFloatArray(const std::string& key) const;
  StatusOr<std::vector<int64_t>> GetIntArray(const std::string& key) const;
  // general.architecture ("llama", "qwen2", ...), or "" when absent or not a string.
  std::string architecture() const;

  // --- tensors ---
  // In file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  // The entry for `name`, or nullptr.
  const GgufTensorInfo* FindTensor(const std::string& name) const;
  // A host tensor viewing the file's bytes (zero-copy; the tensor keeps this file mapped; copied
  // only if the bytes are misaligned for the dtype). NOT_FOUND names the tensor and the path; a
  // tensor with zero elements -> INVALID_ARGUMENT.
  StatusOr<Tensor> GetTensor(const std::string& name) const;

 private:
  explicit GgufFile(FileBytes bytes) : bytes_(std::move(bytes)) {}
  static StatusOr<std::shared_ptr<GgufFile>> Parse(FileBytes bytes, bool header_only);
  Status ParseAll();
  Status Lookup(const std::string& key, const GgufValue** value) const;

  FileBytes bytes_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  size_t data_offset_ = 0;
  bool header_only_ = false;  // OpenHeader: tensor data not validated, GetTensor refused
  std::map<std::string, GgufValue> metadata_;
  std::vector<std::string> metadata_keys_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;  // name -> index into tensors_
};

}  // namespace loom
