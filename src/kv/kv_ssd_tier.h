// KvSsdTier: the SSD tier under the prefix cache (--ssd-cache DIR). A KvDiskStore plus the two
// kinds of background IO the engine must never wait for:
//
//   write-behind   engine thread: Spill(blocks, bytes) ──► bounded queue ──► writer thread
//                  (a full queue refuses the newest spills: a later miss, never a wrong answer —
//                  the newest, because blocks arrive in chain order and a chain is only usable
//                  from its head; so a block whose parent is neither stored nor queued is
//                  refused too, and a full disk turns spilling off with one warning)
//   restore        engine thread: StartRestore(chain) ──► reader threads read the blocks in
//                  parallel, chunk after chunk, into a few staging slots ──► the engine takes
//                  each chunk (Next) and copies it up while the next ones are read
//
// It deals in host bytes only: the engine copies a block's KV out of the runner's pool before
// Spill and into a freshly allocated pool block after a restore. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
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
  // Restore staging: `staging_slots` buffers of up to `staging_chunk_bytes` (whole blocks, at
  // least one), at most `max_chunk_blocks` blocks each when > 0 (the pool's size: no chunk larger
  // than what could land). Allocated once, at Open, by `alloc_staging` (page-locked memory on
  // CUDA, so that the copy up reads it directly); plain host memory when unset.
  int64_t staging_chunk_bytes = int64_t{32} << 20;
  int staging_slots = 4;
  int64_t max_chunk_blocks = 0;
  std::function<std::shared_ptr<uint8_t>(size_t bytes)> alloc_staging;

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

class KvSsdTier;

// One restore: a chain of block hashes read in order, chunk by chunk (chunk_blocks() blocks
// each), into the tier's staging slots, at most num_slots chunks ahead of the consumer. The
// engine takes the chunks with Next, copies each into its pool and asks for the next: reading
// overlaps copying and the staging memory stays bounded whatever the chain's length. One job at
// a time per tier: end it (Cancel, or take every chunk) and Wait before the next; its tier must
// outlive that Wait.
class KvRestoreJob : public std::enable_shared_from_this<KvRestoreJob> {
 public:
  struct Chunk {
    int first = 0;                   // index in hashes() of its first block
    int count = 0;                   // blocks read and verified, from `first` on
    std::span<const uint8_t> bytes;  // their payloads back to back (count * block_bytes)
  };

  const std::vector<BlockHash>& hashes() const { return hashes_; }
  int chunk_blocks() const { return chunk_blocks_; }

  // The next chunk once its reads are done — waiting for them when `wait`, else nullopt while
  // they run. nullopt too once the job ended(). The previous chunk's bytes are released (its
  // slot reads on) by this call. A chunk shorter than chunk_blocks() (but the last) means the
  // chain broke there (a block missing or corrupt): the job ends after it.
  std::optional<Chunk> Next(bool wait);
  // Every chunk was returned, the chain broke, or Cancel was called.
  bool ended() const;
  // Reads no further chunk; reads in flight finish (Wait for them).
  void Cancel();
  // Waits for the reads in flight (a job's slots are reused by the next one).
  void Wait();

  KvRestoreJob(KvSsdTier* tier, std::vector<BlockHash> hashes);

 private:
  friend class KvSsdTier;
  void SubmitLocked(int chunk);  // reads `chunk` into its slot (mu_ held)
  void Read(int chunk, int i);   // reader thread: block i of `chunk`

  KvSsdTier* const tier_;
  const std::vector<BlockHash> hashes_;
  const int64_t block_bytes_;
  const int chunk_blocks_;
  const int num_chunks_;
  const int num_slots_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> remaining_;  // per slot: reads of its chunk still running
  std::vector<int> first_bad_;  // per slot: the first block (in its chunk) that failed
  int next_submit_ = 0;         // chunks handed to the readers
  int next_consume_ = 0;        // chunks returned by Next
  int in_flight_ = 0;           // reads running
  bool ended_ = false;
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
  // Contains, or a file another process sharing the directory wrote since (KvDiskStore::Discover).
  bool Discover(const BlockHash& hash) { return store_->Discover(hash); }

  // Queues blocks for the writer. Never blocks on IO. Each block's block_bytes() payload stays
  // alive (and unchanged) while its `bytes` pointer does: the writer drops it once written (a
  // host-tier slot's Hold, or an alias into one buffer shared by a step's blocks).
  struct SpillBlock {
    BlockHash hash;
    BlockHash parent;
    std::shared_ptr<const uint8_t> bytes;
  };
  void Spill(std::span<const SpillBlock> blocks);
  // How many more blocks the queue takes now (0 once spilling is off): the engine copies no more
  // than that out of its pool. Refused counts blocks it did not offer, as dropped spills.
  int64_t QueueRoom() const;
  void Refused(int64_t blocks);
  // Waits until every queued spill is written, or `timeout` passes; true when the queue drained.
  bool Flush(std::chrono::milliseconds timeout);

  // Starts reading `hashes` (a chain, in order) on the reader threads. One job at a time: the
  // previous one must be gone (or ended and waited for).
  std::shared_ptr<KvRestoreJob> StartRestore(std::vector<BlockHash> hashes);
  // Counts a finished restore of `blocks` blocks in the stats (the engine calls it once it used
  // the job's blocks).
  void RecordRestore(int blocks);

  KvSsdTierStats stats() const;
  KvDiskStore& store() { return *store_; }

 private:
  friend class KvRestoreJob;
  KvSsdTier(const KvSsdTierConfig& config, std::unique_ptr<KvDiskStore> store);
  void WriterLoop();
  std::span<uint8_t> Slot(int slot, int block) const;

  const KvSsdTierConfig config_;
  std::unique_ptr<KvDiskStore> store_;
  const BlockHash root_;  // block 0's parent: a chain on disk always starts there
  int chunk_blocks_ = 1;
  std::vector<std::shared_ptr<uint8_t>> slots_;  // staging, chunk_blocks_ blocks each
  std::weak_ptr<KvRestoreJob> last_job_;         // the slots' user: ended and idle before the next

  mutable std::mutex mu_;
  std::condition_variable cv_;       // the writer waits for spills or stop
  std::condition_variable drained_;  // Flush waits for an empty queue and an idle writer
  std::deque<SpillBlock> queue_;     // guarded by mu_
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
