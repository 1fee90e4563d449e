// BlockPool: the ref-counted KV blocks, their LRU free queue and the hash → block map (the
// prefix cache). Pure bookkeeping: it never touches KV memory, which the runner owns.
//
//   free queue (LRU; front is evicted first)      hash map (full, computed blocks)
//   front → [7] ⇄ [3] ⇄ [9] ⇄ … ⇄ [12] ← back     h(a) → 3, h(b) → 5, h(c) → 9
//
// A block is either in use (ref_count > 0, owned by one or more requests' block tables) or free
// (ref_count == 0, in the free queue). A free block keeps its hash and contents until it is
// popped for reuse, so a later request with the same prefix can take it back (Touch) for free.
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/ids.h"
#include "kv/block_hash.h"

namespace loom {

class BlockPool {
 public:
  // Creates `num_blocks` (> 0) free, unhashed blocks; the free queue starts as 0, 1, …, n-1.
  explicit BlockPool(int num_blocks);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  // Blocks with ref_count == 0 (cached or not): what Allocate can hand out.
  int num_free_blocks() const { return num_free_; }
  int num_used_blocks() const { return num_blocks() - num_free_; }
  // Blocks registered in the hash map, in use or free.
  int num_cached_blocks() const { return static_cast<int>(cached_.size()); }
  // Cached blocks sitting in the free queue (reusable by a prefix hit, evictable by Allocate).
  int num_cached_free_blocks() const;
  // Hashed blocks dropped from the map because Allocate reused them.
  uint64_t num_evictions() const { return num_evictions_; }

  // Pops `num` blocks from the front of the free queue, evicting any hash they carry; each comes
  // back with ref_count 1. Returns nullopt and changes nothing when fewer than `num` are free.
  std::optional<std::vector<BlockId>> Allocate(int num);

  // Takes one more reference on each block (a prefix-cache hit). A block at ref_count 0 leaves
  // the free queue. Precondition: every id is valid.
  void Touch(std::span<const BlockId> blocks);

  // Drops one reference per block, in order; a block reaching 0 is appended to the back of the
  // free queue, keeping its hash. The order given is therefore the eviction order among them.
  // Precondition: every block is in use.
  void Free(std::span<const BlockId> blocks);

  // The block registered under `hash`, if any.
  std::optional<BlockId> LookupCached(const BlockHash& hash) const;

  // Registers an in-use, full, computed block under `hash`, whose chain's previous block hashes
  // to `parent` (kept for the tiers below the pool, which store chains). Returns false and
  // changes nothing when another block already holds `hash` (two requests computed the same
  // block): that block stays unhashed and is recycled as a plain block when freed. Precondition:
  // `block` is in use and has no hash yet.
  bool CacheBlock(BlockId block, const BlockHash& hash, const BlockHash& parent = {});

  const std::optional<BlockHash>& block_hash(BlockId block) const;
  // The `parent` CacheBlock was given (meaningful only while block_hash is set).
  const BlockHash& block_parent(BlockId block) const;
  int ref_count(BlockId block) const;

  // The free queue from front (next evicted) to back. For tests and debugging: O(num_free).
  std::vector<BlockId> FreeQueue() const;

  // CHECKs the invariants: free + used == total; the free queue holds exactly the ref_count-0
  // blocks, each once; every hashed block is in the map exactly once and the map points back.
  void CheckIntegrity() const;

 private:
  static constexpr BlockId kNone = -1;
  struct Block {
    int ref_count = 0;
    std::optional<BlockHash> hash;
    BlockHash parent;
    // Links of the intrusive free queue; kNone at the ends or when not in the queue.
    BlockId prev = kNone;
    BlockId next = kNone;
    bool in_free_queue = false;
  };

  void CheckValid(BlockId block) const;
  void PushBack(BlockId block);
  void Unlink(BlockId block);

  std::vector<Block> blocks_;
  BlockId head_ = kNone;  // front of the free queue: evicted first
  BlockId tail_ = kNone;  // back: most recently freed
  int num_free_ = 0;
  std::unordered_map<BlockHash, BlockId, BlockHashHasher> cached_;
  uint64_t num_evictions_ = 0;
};

}  // namespace loom
