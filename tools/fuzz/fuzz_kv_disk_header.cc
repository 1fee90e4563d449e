// libFuzzer entry point for the KV block file header (kv/kv_disk_store.h): any input must parse to
// a header or a Status, never crash; an accepted header must re-encode to bytes that parse to the
// same header. The input is then stored as a .kvb file and a KvDiskStore opened on it must index
// it only if it is a complete, consistent file, and a Read of it must return exact bytes or a miss.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "base/logging.h"
#include "kv/kv_disk_store.h"

namespace {

namespace fs = std::filesystem;

loom::KvDiskFormat DefaultFormat() {
  loom::KvDiskFormat f;
  f.model_fingerprint = "fuzz";
  f.kv_dtype = "bf16";
  f.block_size = 1;
  f.num_layers = 1;
  f.num_kv_heads = 1;
  f.head_dim = 1;
  f.block_bytes = 4;
  return f;
}

void Require(bool cond, const char* what) {
  if (!cond) {
    std::fprintf(stderr, "fuzz_kv_disk_header: %s\n", what);
    std::abort();
  }
}

}  // namespace

// Quarantines are expected on almost every input: keep their warnings out of the fuzzer's output.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  loom::SetLogLevel(loom::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto header = loom::ParseKvDiskHeader(bytes);
  loom::KvDiskFormat format = DefaultFormat();
  loom::BlockHash hash{1, 2};
  if (header.ok()) {
    std::string again = loom::EncodeKvDiskHeader(*header);
    auto reparsed = loom::ParseKvDiskHeader(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(again.data()), again.size()));
    Require(reparsed.ok(), "a re-encoded header does not parse");
    Require(reparsed->hash == header->hash && reparsed->parent == header->parent &&
                reparsed->payload_xxh3 == header->payload_xxh3 &&
                reparsed->payload_bytes == header->payload_bytes &&
                reparsed->header_bytes == header->header_bytes &&
                reparsed->format == header->format,
            "a re-encoded header parses to another header");
    format = header->format;
    hash = header->hash;
  }

  // One directory per fuzzing process, emptied for every input.
  static const fs::path dir =
      fs::temp_directory_path() / ("loom_fuzz_kv_disk_" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(dir, ec);
  const std::string hex = hash.ToHex();
  fs::create_directories(dir / hex.substr(0, 2), ec);
  {
    std::ofstream f(dir / hex.substr(0, 2) / (hex + ".kvb"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto store = loom::KvDiskStore::Open(dir.string(), format, int64_t{1} << 40);
  Require(store.ok(), "Open failed on a valid format");
  const loom::KvDiskStats stats = (*store)->stats();
  Require(stats.entries + stats.quarantined == 1, "the file was neither indexed nor quarantined");
  if ((*store)->Contains(hash)) {
    // Indexed means the file holds the whole payload, so this allocation is bounded by `size`.
    Require(header.ok() && header->header_bytes + format.block_bytes == static_cast<int64_t>(size),
            "an incomplete file was indexed");
    std::vector<uint8_t> out(static_cast<size_t>(format.block_bytes));
    loom::Status s = (*store)->Read(hash, out);
    Require(s.ok() || s.code() == loom::StatusCode::kNotFound, "Read gave an unexpected error");
    if (s.ok()) {
      Require(std::equal(out.begin(), out.end(), data + header->header_bytes),
              "Read returned bytes that are not the file's payload");
    }
  }
  fs::remove_all(dir, ec);
  return 0;
}
