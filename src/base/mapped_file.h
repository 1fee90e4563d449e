// MappedFile: a read-only mmap of a whole file (move-only RAII owner).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace loom {

class MappedFile {
 public:
  // Maps `path` read-only. Errors name the path (missing, unreadable, a directory).
  // An empty file maps to size() == 0 and data() == nullptr.
  static StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void Reset();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole (small) file into a string.
StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace loom
