// KvSsdTier: the SSD tier under the prefix cache (--ssd-cache DIR). A KvDiskStore plus the two
// kinds of background IO the engine must never wait for:
//
//   write-behind   engine thread: Spill(blocks, bytes) ──► bounded queue ──► writer thread
//                  (a full queue refuses the newest spills: a later miss, never a wrong answer —
//                  the newest, because blocks arrive in chain order and a chain is only usable
//                  from its head; a full disk turns spilling off with one warning)
//   restore        engine thread: StartRestore(chain) ──► reader threads read the blocks in
//                  parallel into one host buffer ──► the engine polls done() and copies them up
//
// It deals in host bytes only: the engine copies a block's KV out of the runner's pool before
// Spill and into a freshly allocated pool block after a restore. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kv/block_hash.h"
#include "kv/kv_disk_store.h"

namespace loom {

struct KvSsdTierConfig {
  std::string dir;
  int64_t max_bytes = 32'000'000'000;  // --ssd-cache-max: the store's LRU cap
  KvDiskFormat format;
  // Spills queued for the writer, in payload bytes; past it new spills are dropped.
  int64_t max_pending_bytes = int64_t{1} << 30;
  int num_readers = 4;  // threads reading a restore's blocks in parallel

  Status Validate() const;
};

struct KvSsdTierStats {
  KvDiskStats store;            // entries, bytes, hits, misses, writes, quarantined, ...
  int64_t pending_spills = 0;   // queued for the writer (or being written)
  int64_t dropped_spills = 0;   // dropped from a full queue, or after the disk filled up
  int64_t restores = 0;         // restore jobs that read at least one block
  int64_t restored_blocks = 0;  // blocks they read
  bool spill_disabled = false;  // the disk filled up (or failed): spilling is off
};

// One restore: a chain of block hashes read into one buffer, block i at i * block_bytes.
class KvRestoreJob {
 public:
  KvRestoreJob(std::vector<BlockHash> hashes, int64_t block_bytes);

  const std::vector<BlockHash>& hashes() const { return hashes_; }
  bool done() const { return done_.load(std::memory_order_acquire); }
  void Wait();
  // After done(): how many leading blocks were read and verified (the chain stops at the first
  // block that was missing or corrupt), and their bytes.
  int num_read() const;
  std::span<const uint8_t> block(int i) const;

 private:
  friend class KvSsdTier;
  std::vector<BlockHash> hashes_;
  int64_t block_bytes_;
  std::vector<uint8_t> data_;
  std::vector<char> ok_;  // per block, written by the readers
  std::atomic<size_t> remaining_;
  std::atomic<bool> done_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
};

class KvSsdTier {
 public:
  // Opens the store (KvDiskStore::Open: index rebuilt, foreign files quarantined) and starts the
  // writer and reader threads.
  static StatusOr<std::unique_ptr<KvSsdTier>> Open(const KvSsdTierConfig& config);
  // Stops the threads; spills still queued are dropped (call Flush first to keep them).
  ~KvSsdTier();
  KvSsdTier(const KvSsdTier&) = delete;
  KvSsdTier& operator=(const KvSsdTier&) = delete;

  int64_t block_bytes() const { return config_.format.block_bytes; }

  // Whether the block is stored or queued: the engine skips copying it out again.
  bool Has(const BlockHash& hash) const;
  // Whether the block is stored (what a restore can read).
  bool Contains(const BlockHash& hash) const { return store_->Contains(hash); }

  // Queues blocks for the writer: block i's payload is bytes[i * block_bytes(), +block_bytes())
  // (bytes->size() == blocks.size() * block_bytes()). Never blocks on IO.
  struct SpillBlock {
    BlockHash hash;
    BlockHash parent;
  };
  void Spill(std::span<const SpillBlock> blocks, std::shared_ptr<const std::vector<uint8_t>> bytes);
  // Waits until every queued spill is written, or `timeout` passes; true when the queue drained.
  bool Flush(std::chrono::milliseconds timeout);

  // Starts reading `hashes` (a chain, in order) on the reader threads.
  std::shared_ptr<KvRestoreJob> StartRestore(std::vector<BlockHash> hashes);
  // Counts a finished restore of `blocks` blocks in the stats (the engine calls it once it used
  // the job's blocks).
  void RecordRestore(int blocks);

  KvSsdTierStats stats() const;
  KvDiskStore& store() { return *store_; }

 private:
  struct Spilled {
    BlockHash hash;
    BlockHash parent;
    std::shared_ptr<const std::vector<uint8_t>> bytes;  // shared by one Spill's blocks
    size_t offset = 0;
  };

  KvSsdTier(const KvSsdTierConfig& config, std::unique_ptr<KvDiskStore> store);
  void WriterLoop();

  const KvSsdTierConfig config_;
  std::unique_ptr<KvDiskStore> store_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // the writer waits for spills or stop
  std::condition_variable drained_;  // Flush waits for an empty queue and an idle writer
  std::deque<Spilled> queue_;        // guarded by mu_
  std::unordered_set<BlockHash, BlockHashHasher> queued_;  // hashes in queue_ or being written
  int64_t queued_bytes_ = 0;
  bool writing_ = false;
  bool stop_ = false;
  bool spill_disabled_ = false;
  int64_t dropped_ = 0;
  int64_t restores_ = 0;
  int64_t restored_blocks_ = 0;
  std::thread writer_;
  ThreadPool readers_;
};

}  // namespace loom
