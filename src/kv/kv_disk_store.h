// KvDiskStore: full KV blocks kept as files in a directory (the SSD tier under the prefix cache),
// keyed by their chained content hash (block_hash.h), so they survive a restart.
//
// One file per block:
//
//   DIR/<first 2 hex digits>/<32 hex digits of the hash>.kvb
//
//   offset 0                                     header_bytes (4096)       + payload_bytes
//   | magic "LOOMKVB1" | version | header_bytes | ... | zero padding | payload (block_bytes) |
//   '---------------------- KvDiskHeader (little-endian) ------------'
//
// The payload starts at a 4096-byte aligned offset so that a later O_DIRECT reader can use it.
// Writes go to DIR/tmp/<hex>.<pid>.<counter>, are fsync'ed, then renamed to the final name, so no
// reader (in this or another process) ever sees a partial file under a final name. Files that do
// not match this process's KvDiskFormat, or fail a check, are moved to DIR/quarantine/.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "kv/block_hash.h"

namespace loom {

// What must match for a stored block to be usable by this process.
struct KvDiskFormat {
  std::string model_fingerprint;  // the model's weights+config hash (opaque)
  std::string kv_dtype;           // "bf16", "f32", ...
  std::string tokenizer_hash;
  std::string adapter_id;  // "" when none
  int block_size = 0;      // tokens per block
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int64_t block_bytes = 0;  // payload size of one block (all layers, K and V)

  // Non-empty dtype and fingerprint, positive sizes, strings within kKvDiskMaxStringBytes.
  Status Validate() const;
  friend bool operator==(const KvDiskFormat&, const KvDiskFormat&) = default;
};

inline constexpr uint32_t kKvDiskFormatVersion = 1;
// The payload offset: the header is zero-padded up to it.
inline constexpr int64_t kKvDiskHeaderBytes = 4096;
// Caps on each length-prefixed string of the header (they all fit in one header page).
inline constexpr uint32_t kKvDiskMaxStringBytes = 512;

// The header of one .kvb file.
struct KvDiskHeader {
  BlockHash hash;                             // the block's chained hash (also its file name)
  BlockHash parent;                           // the previous block's hash (the root for block 0)
  int64_t payload_bytes = 0;                  // == format.block_bytes
  BlockHash payload_xxh3;                     // XXH3-128 of the payload
  int64_t header_bytes = kKvDiskHeaderBytes;  // payload offset; a multiple of 4096
  KvDiskFormat format;
};

// Serializes `header` to exactly header.header_bytes bytes (zero-padded). CHECKs that the header
// is encodable (valid format, header_bytes a multiple of 4096 large enough).
std::string EncodeKvDiskHeader(const KvDiskHeader& header);

// Parses the header at the start of `bytes` (at least the encoded fields; the padding and payload
// need not be present). Never crashes on any input. Errors: kDataLoss for a wrong magic, a bad
// checksum, a truncated or inconsistent header; kUnimplemented for another format version.
StatusOr<KvDiskHeader> ParseKvDiskHeader(std::span<const uint8_t> bytes);

// OK when a file written with format `stored` is usable by a process with format `want`;
// otherwise kFailedPrecondition naming the first field that differs.
Status CheckKvDiskFormat(const KvDiskFormat& want, const KvDiskFormat& stored);

struct KvDiskStats {
  int64_t entries = 0;  // blocks in the index
  int64_t bytes = 0;    // their total file size (header + payload)
  int64_t hits = 0;     // Reads that returned a verified block
  int64_t misses = 0;   // Reads that returned NotFound (absent, vanished or quarantined)
  int64_t writes = 0;   // blocks written (no-op Writes of a stored block not counted)
  int64_t write_errors = 0;
  int64_t evictions = 0;    // files deleted to stay within max_bytes
  int64_t quarantined = 0;  // files moved to DIR/quarantine (at Open or on Read)
  int64_t discovered = 0;   // files another process wrote, found after Open (Discover)
};

// Thread-safe: every method may be called from any thread (one mutex guards the index; file IO
// runs outside it). Several processes may share DIR: renames are atomic, two writers of one hash
// write the same bytes, and a file that vanishes under the store is a miss.
class KvDiskStore {
 public:
  // Opens (creating) `dir`, deletes temp files left by dead processes, and rebuilds the index from
  // the headers of the existing files; files that do not match `format`, cannot be parsed or are
  // truncated are quarantined, never indexed. Then evicts least-recently-used files (by mtime)
  // while the total exceeds `max_bytes`. Errors: an invalid format or an unusable directory.
  static StatusOr<std::unique_ptr<KvDiskStore>> Open(std::string dir, KvDiskFormat format,
                                                     int64_t max_bytes);

  KvDiskStore(const KvDiskStore&) = delete;
  KvDiskStore& operator=(const KvDiskStore&) = delete;

  // Whether `hash` is in the index (its file may still vanish before a Read).
  bool Contains(const BlockHash& hash) const;
  // Contains, or else whether another process sharing the directory wrote the block since the
  // index was built: a file of the expected size under its name joins the index (its header and
  // payload are checked when it is read, as every file's are). One stat when not indexed.
  bool Discover(const BlockHash& hash);

  // Stores one block; payload.size() must equal format.block_bytes (else kInvalidArgument).
  // A block already indexed is not rewritten, only marked as recently used. After the write,
  // evicts LRU files while the total exceeds max_bytes (possibly this block, if max_bytes is
  // smaller than one file). IO errors: kResourceExhausted (ENOSPC, EDQUOT) or kUnavailable,
  // counted in write_errors; no temp file is left behind.
  Status Write(const BlockHash& hash, const BlockHash& parent, std::span<const uint8_t> payload);

  // Reads the block into `out` (size format.block_bytes, else kInvalidArgument). kNotFound when
  // absent — also when the file vanished or fails verification (header, size, payload XXH3-128),
  // in which case it is quarantined and dropped from the index; `out` is then zeroed, never wrong
  // bytes. A hit marks the block as recently used.
  Status Read(const BlockHash& hash, std::span<uint8_t> out);

  KvDiskStats stats() const;
  const std::string& dir() const { return dir_; }
  const KvDiskFormat& format() const { return format_; }

  // The final path of a block's file (for tests and tools).
  std::string PathOf(const BlockHash& hash) const;

 private:
  struct Entry {
    int64_t file_bytes = 0;
    std::list<BlockHash>::iterator lru_it;  // position in lru_
  };

  KvDiskStore(std::string dir, KvDiskFormat format, int64_t max_bytes);

  Status Scan();
  void CleanTempFiles();
  // Verifies the header of an open file against format_, `expected` and the file size; on success
  // returns the parsed header.
  StatusOr<KvDiskHeader> VerifyHeader(int fd, const BlockHash& expected) const;
  // Moves `path` to DIR/quarantine/; true when this call moved it (false: it had vanished).
  bool Quarantine(const std::string& path, const Status& why);
  // Both need mu_ held.
  void InsertLocked(const BlockHash& hash, int64_t file_bytes);
  void EraseLocked(const BlockHash& hash);
  void EvictLocked();

  const std::string dir_;
  const KvDiskFormat format_;
  const int64_t max_bytes_;
  const int64_t file_bytes_;  // header + payload of every file
  std::atomic<uint64_t> temp_counter_{0};

  mutable std::mutex mu_;
  std::unordered_map<BlockHash, Entry, BlockHashHasher> index_;  // guarded by mu_
  std::list<BlockHash> lru_;  // guarded by mu_; front = least recently used
  KvDiskStats stats_;         // guarded by mu_ (entries/bytes derived in stats())
};

}  // namespace loom
