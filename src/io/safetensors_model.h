// SafetensorsModel: all the safetensors weights of a Hugging Face model directory, as one
// name -> tensor table over one or more validated, mmap'd SafetensorsFiles.
//
// Which files (first match wins):
//   1. <dir>/model.safetensors.index.json  -> its "weight_map" {tensor: shard file}; every shard
//      must exist and hold every tensor the index assigns to it. Only indexed names are exposed.
//   2. <dir>/model.safetensors             -> that file.
//   3. <dir>/*.safetensors                  -> all of them (a name in two files is an error).
// `dir` may also be the path of a single .safetensors file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/safetensors.h"
#include "tensor/tensor.h"

namespace loom {

class SafetensorsModel {
 public:
  // Opens and validates every file (see above). Errors name the directory or file and the
  // problem: NOT_FOUND (no weights, a missing shard, a tensor missing from its shard),
  // INVALID_ARGUMENT (bad index.json, duplicate names), or any SafetensorsFile::Open error.
  static StatusOr<SafetensorsModel> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // All tensor names, sorted.
  std::vector<std::string> names() const;
  size_t num_tensors() const { return entries_.size(); }
  bool Has(const std::string& name) const { return entries_.count(name) > 0; }
  // The entry for `name` (in whichever shard holds it), or nullptr.
  const SafetensorsTensorInfo* Find(const std::string& name) const;
  // The distinct files opened, in path order.
  const std::vector<std::shared_ptr<SafetensorsFile>>& files() const { return files_; }

  // A zero-copy host tensor (see SafetensorsFile::GetTensor). NOT_FOUND names the tensor and the
  // directory. Thread-safe (read-only).
  StatusOr<Tensor> GetTensor(const std::string& name) const;

 private:
  std::string dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> entries_;  // tensor name -> file holding it
};

}  // namespace loom
