// KvCacheManager: the block tables of the running requests over a BlockPool, and the prefix
// cache built on block hashes. Modeled on vLLM v1's KVCacheManager.
//
// A request's tokens map onto its block table (block_size B = 4 here):
//
//   tokens     t0 t1 t2 t3 | t4 t5 t6 t7 | t8 t9 __ __
//   table      [    17     |     4       |     9     ]
//              full, hashed  full, hashed  partial (never hashed)
//              ^-- num_computed_tokens = 10: KV written for t0..t9
//
// A block is hashed (entered into the prefix cache) only once all its tokens are computed, i.e.
// after the step that wrote them (CommitComputed), so no request can hit a block whose KV is not
// yet written. Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/ids.h"
#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace loom {

struct KvCacheConfig {
  int num_blocks = 0;   // blocks in the pool (> 0)
  int block_size = 16;  // tokens per block (> 0)
  bool enable_prefix_cache = true;
  BlockHash root_hash;  // RootBlockHash(model fingerprint, KV dtype, tokenizer hash)
  // Record every block CommitComputed or CacheRestored enters into the prefix cache
  // (TakeNewCached), for the tiers below the pool that keep a copy of each (write-through).
  bool track_new_cached = false;
};

// A block CommitComputed just entered into the prefix cache: its KV is written.
struct NewCachedBlock {
  BlockId block;
  BlockHash hash;
  BlockHash parent;  // the previous block's hash (the root for a request's first block)
};

// Cached full blocks that cover a prefix of a request's tokens.
struct PrefixHit {
  std::vector<BlockId> blocks;  // in order; blocks.size() * block_size == num_tokens
  int num_tokens = 0;
};

struct KvCacheStats {
  int num_blocks = 0;
  int num_used_blocks = 0;         // ref_count > 0
  int num_free_blocks = 0;         // ref_count == 0 (includes cached_free)
  int num_cached_blocks = 0;       // hashed blocks, used or free
  int num_cached_free_blocks = 0;  // hashed and free: reusable by a hit, evictable
  uint64_t prefix_queries = 0;     // requests admitted with a prefix lookup
  uint64_t prefix_hits = 0;        // ... of which hit at least one block
  uint64_t prefix_query_tokens = 0;
  uint64_t prefix_hit_tokens = 0;
  uint64_t evictions = 0;  // hashed blocks dropped for reuse
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);

  int block_size() const { return config_.block_size; }
  const BlockHash& root_hash() const { return config_.root_hash; }
  int num_blocks() const { return pool_.num_blocks(); }
  int num_free_blocks() const { return pool_.num_free_blocks(); }
  const BlockPool& pool() const { return pool_; }

  // The longest run of cached full blocks matching a prefix of `tokens` under `extra_keys`. Never
  // covers the last token (at most (size-1)/B blocks), so at least one token is computed and
  // yields logits. Empty when prefix caching is off. Takes no references and mutates nothing: the
  // result is only valid until the next mutating call.
  PrefixHit ComputedPrefix(std::span<const TokenId> tokens, std::string_view extra_keys) const;

  // The chained hashes of the full blocks ComputedPrefix may cover: (size - 1) / B of them.
  std::vector<BlockHash> PrefixHashes(std::span<const TokenId> tokens,
                                      std::string_view extra_keys) const;
  // The block cached under `hash`, if any.
  std::optional<BlockId> LookupCached(const BlockHash& hash) const {
    return pool_.LookupCached(hash);
  }

  // Pins: references a waiting request holds on cached blocks so that the prefix it will hit at
  // admission cannot be evicted first (blocks restored from a tier below the pool, and the pool
  // blocks before them). Released when AllocateSlots admits the request (after taking its own
  // references), by ReleasePins, or by Free (the scheduler also drops them under pressure). Pin
  // takes one reference per block.
  void Pin(RequestId id, std::span<const BlockId> blocks);
  void ReleasePins(RequestId id);
  void ReleaseAllPins();
  int num_pinned_blocks() const;
  std::vector<RequestId> pinned_requests() const;

  // A block for KV restored from a tier below the pool: allocated (as Allocate does, evicting the
  // least recently freed cached block) and pinned for `id`, not yet hashed. Fill it, then
  // CacheRestored. nullopt when no block is free.
  std::optional<BlockId> AllocateForRestore(RequestId id);
  // Enters a filled restore block under `hash` (reported by TakeNewCached too: a tier that
  // lacks it, say host RAM after a restore from disk, may keep a copy). Returns false when `hash`
  // is already cached (the block stays a plain block; ComputedPrefix finds the other one).
  bool CacheRestored(BlockId block, const BlockHash& hash, const BlockHash& parent);

  // The blocks entered into the prefix cache since the last call (config.track_new_cached), in
  // the order they were computed or restored.
  std::vector<NewCachedBlock> TakeNewCached();
  // The hashed blocks in the free queue (no request holds them), each after its parent when
  // that is among them too, least recently freed chains first. O(num_free).
  std::vector<NewCachedBlock> CachedFreeBlocks() const;

  // Grows the request's block table to cover num_computed_tokens + hit.num_tokens +
  // num_new_tokens tokens. `hit` (from ComputedPrefix, just before) may only be non-empty when the
  // request holds no blocks yet; its blocks are adopted (Touch) and it is recorded in the
  // prefix-cache statistics when `record_prefix_query`. Returns false and changes nothing when
  // the free blocks do not suffice ("doesn't fit" is an expected outcome, not an error).
  bool AllocateSlots(RequestId id, int num_computed_tokens, int num_new_tokens,
                     const PrefixHit& hit = {}, bool record_prefix_query = false);

  // Records that the request's KV is now written for tokens[0, num_computed_tokens): hashes each
  // newly full block (chained, under `extra_keys`) and enters it into the prefix cache. No-op
  // when prefix caching is off. Precondition: the table covers num_computed_tokens.
  void CommitComputed(RequestId id, std::span<const TokenId> tokens, int num_computed_tokens,
                      std::string_view extra_keys);

  // Releases all the request's blocks (tail block first, so the tail of a prefix is evicted
  // before its head) and its pins, and forgets the request. No-op for an unknown id.
  void Free(RequestId id);

  // The request's block table (empty for an unknown id). Valid until the next mutating call.
  std::span<const BlockId> block_table(RequestId id) const;
  bool HasRequest(RequestId id) const { return requests_.contains(id); }

  KvCacheStats stats() const;

  // CHECKs BlockPool::CheckIntegrity and that every block's ref_count equals the number of
  // request tables and pins holding it (so every used block is reachable from some request).
  void CheckIntegrity() const;

 private:
  struct RequestBlocks {
    std::vector<BlockId> table;
    int num_hashed_blocks = 0;  // leading blocks whose hash chain is known (and cached or dup)
    BlockHash last_hash;        // hash of block num_hashed_blocks - 1 (root when 0)
  };

  static int CeilDiv(int a, int b) { return (a + b - 1) / b; }

  KvCacheConfig config_;
  BlockPool pool_;
  std::unordered_map<RequestId, RequestBlocks> requests_;
  std::unordered_map<RequestId, std::vector<BlockId>> pins_;
  std::vector<NewCachedBlock> new_cached_;
  uint64_t prefix_queries_ = 0;
  uint64_t prefix_hits_ = 0;
  uint64_t prefix_query_tokens_ = 0;
  uint64_t prefix_hit_tokens_ = 0;
};

}  // namespace loom
