// Test-only helpers for io/ tests: a scratch directory per test, file writing, and a minimal
// safetensors writer (so the reader is tested against bytes built independently of it).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/status.h"

namespace loom::testing {

// Passes when `status` has `code` and its message contains every phrase.
inline ::testing::AssertionResult HasError(const Status& status, StatusCode code,
                                           const std::vector<std::string>& phrases) {
  if (status.ok()) return ::testing::AssertionFailure() << "expected an error, got OK";
  if (status.code() != code) {
    return ::testing::AssertionFailure()
           << "expected " << StatusCodeName(code) << ", got " << status.ToString();
  }
  for (const std::string& p : phrases) {
    if (status.message().find(p) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message lacks \"" << p << "\": " << status.ToString();
    }
  }
  return ::testing::AssertionSuccess();
}

// A fresh, empty directory unique to the running test.
inline std::string ScratchDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                              ("loom_io_" + std::to_string(::getpid())) /
                              (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

inline std::string Le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file from a literal JSON header and data section (the header is not padded).
inline std::string SafetensorsBytes(const std::string& header_json, const std::string& data) {
  return Le64(header_json.size()) + header_json + data;
}

inline std::string FloatBytes(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// One tensor for MakeSafetensors: dtype name as in the format ("F32", "BF16", ...).
struct StTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// A well-formed safetensors file: tensors laid out back to back in the given order, header
// padded with spaces to a multiple of 8 (as the reference writer does).
inline std::string MakeSafetensors(const std::vector<StTensor>& tensors,
                                   const std::string& metadata_json = "") {
  std::string header = "{";
  if (!metadata_json.empty()) header += "\"__metadata__\":" + metadata_json;
  size_t offset = 0;
  std::string data;
  for (const StTensor& t : tensors) {
    if (header.size() > 1) header += ",";
    header += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      header += (i ? "," : "") + std::to_string(t.shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t.bytes.size()) + "]}";
    offset += t.bytes.size();
    data += t.bytes;
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  return SafetensorsBytes(header, data);
}

}  // namespace loom::testing
