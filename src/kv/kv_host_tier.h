// KvHostTier: the host-RAM tier under the prefix cache (--host-cache GB). One arena of
// block-sized slots, allocated once (page-locked on CUDA: the KV copy kernel reads and writes it
// in place over PCIe), each holding one cached block's KV found by its hash; the least recently
// used is evicted first.
//
//   device pool ──(every block entering the prefix cache, after its step)──► host slot
//   host slot   ──(Hold, while queued for the SSD writer)──► SSD tier
//   host slot   ──(a waiting request's prefix continues here)──► fresh pool block, before its
//                 first step
//
// Write-through rather than demotion on eviction: a block is copied down once, right after its
// step, so evicting it from the pool costs nothing and the copy never sits between an
// allocation and the step that needed the block. A held slot (queued for the SSD writer, or part
// of a restore in flight) is never evicted; when every slot is held, new blocks are refused (a
// later miss, never a wrong answer).
//
// Reserve / Publish / Unreserve / Find run on the engine thread; a Hold may be dropped on any
// thread (the SSD writer). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kv/block_hash.h"

namespace loom {

struct KvHostTierConfig {
  int64_t capacity_bytes = 0;  // rounded down to whole blocks: at least one
  int64_t block_bytes = 0;
  // The arena (page-locked on CUDA: ModelRunner::AllocKvStaging); plain host memory when unset.
  std::function<std::shared_ptr<uint8_t>(size_t bytes)> alloc;

  Status Validate() const;
};

struct KvHostTierStats {
  int64_t capacity_blocks = 0;
  int64_t capacity_bytes = 0;
  int64_t entries = 0;          // blocks findable
  int64_t bytes = 0;            // their KV bytes
  int64_t held = 0;             // slots held (queued for the SSD writer, or a restore's)
  int64_t inserts = 0;          // blocks copied in
  int64_t evictions = 0;        // entries evicted for a new block
  int64_t refused = 0;          // blocks not copied in: every slot was held
  int64_t hits = 0;             // lookups (Find) that found their block
  int64_t restores = 0;         // restores that copied at least one block up from here
  int64_t restored_blocks = 0;  // blocks they copied up
};

class KvHostTier {
 public:
  static StatusOr<std::unique_ptr<KvHostTier>> Create(const KvHostTierConfig& config);
  KvHostTier(const KvHostTier&) = delete;
  KvHostTier& operator=(const KvHostTier&) = delete;

  int64_t block_bytes() const { return block_bytes_; }
  int64_t capacity_blocks() const { return static_cast<int64_t>(slots_.size()); }

  // A slot to fill with a block: a free one, else the least recently used entry's that nobody
  // holds (evicted). nullopt, counted as refused, when every slot is held or reserved.
  std::optional<int> Reserve();
  // Makes reserved `slot` (filled) findable under `hash`, as the most recently used. False when
  // `hash` is already here: the slot goes back free.
  bool Publish(int slot, const BlockHash& hash);
  // Gives a reserved slot back unfilled.
  void Unreserve(int slot);

  // The slot holding `hash`, made the most recently used (a hit); nullopt when absent.
  std::optional<int> Find(const BlockHash& hash);
  bool Contains(const BlockHash& hash) const;
  // A slot's block_bytes() bytes.
  uint8_t* data(int slot) const;
  // Keeps published `slot` from eviction while the returned pointer to its bytes (or a copy of
  // it) lives.
  std::shared_ptr<const uint8_t> Hold(int slot);

  // Counts a finished restore of `blocks` blocks copied up from here.
  void RecordRestore(int blocks);
  KvHostTierStats stats() const;

 private:
  enum class State : uint8_t { kFree, kReserved, kPublished };
  struct Slot {
    State state = State::kFree;
    int holds = 0;
    BlockHash hash;
    std::list<int>::iterator lru;  // in lru_ while published
  };

  KvHostTier(int64_t block_bytes, int64_t num_slots, std::shared_ptr<uint8_t> arena);
  void Unhold(int slot);

  const int64_t block_bytes_;
  const std::shared_ptr<uint8_t> arena_;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  std::vector<int> free_;  // free slots (a stack)
  std::list<int> lru_;     // published slots, least recently used first
  std::unordered_map<BlockHash, int, BlockHashHasher> index_;
  KvHostTierStats stats_;  // the counters; entries/bytes/held derived in stats()
  int64_t held_ = 0;       // slots with holds > 0
};

}  // namespace loom
