#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <unordered_map>

#include "base/check.h"

namespace loom {

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : config_(config), pool_(config.num_blocks) {
  CHECK_GT(config_.block_size, 0);
}

PrefixHit KvCacheManager::ComputedPrefix(std::span<const TokenId> tokens,
                                         std::string_view extra_keys) const {
  PrefixHit hit;
  if (!config_.enable_prefix_cache || tokens.empty()) return hit;
  const int bs = config_.block_size;
  // Leave the last token uncovered so the step that computes it yields logits.
  const int max_blocks = (static_cast<int>(tokens.size()) - 1) / bs;
  BlockHash parent = config_.root_hash;
  for (int i = 0; i < max_blocks; ++i) {
    BlockHash h = HashBlock(parent, tokens.subspan(static_cast<size_t>(i) * bs, bs), extra_keys);
    std::optional<BlockId> block = pool_.LookupCached(h);
    if (!block.has_value()) break;
    hit.blocks.push_back(*block);
    parent = h;
  }
  hit.num_tokens = static_cast<int>(hit.blocks.size()) * bs;
  return hit;
}

std::vector<BlockHash> KvCacheManager::PrefixHashes(std::span<const TokenId> tokens,
                                                    std::string_view extra_keys) const {
  std::vector<BlockHash> out;
  if (tokens.empty()) return out;
  const int bs = config_.block_size;
  const int max_blocks = (static_cast<int>(tokens.size()) - 1) / bs;
  out.reserve(max_blocks);
  BlockHash parent = config_.root_hash;
  for (int i = 0; i < max_blocks; ++i) {
    parent = HashBlock(parent, tokens.subspan(static_cast<size_t>(i) * bs, bs), extra_keys);
    out.push_back(parent);
  }
  return out;
}

void KvCacheManager::Pin(RequestId id, std::span<const BlockId> blocks) {
  pool_.Touch(blocks);
  std::vector<BlockId>& pinned = pins_[id];
  pinned.insert(pinned.end(), blocks.begin(), blocks.end());
}

void KvCacheManager::ReleasePins(RequestId id) {
  auto it = pins_.find(id);
  if (it == pins_.end()) return;
  // Last pinned first, as Free releases a table: the tail of a prefix is evicted before its head.
  std::vector<BlockId> reversed(it->second.rbegin(), it->second.rend());
  pins_.erase(it);
  pool_.Free(reversed);
}

void KvCacheManager::ReleaseAllPins() {
  while (!pins_.empty()) ReleasePins(pins_.begin()->first);
}

std::vector<RequestId> KvCacheManager::pinned_requests() const {
  std::vector<RequestId> ids;
  for (const auto& [id, blocks] : pins_) ids.push_back(id);
  return ids;
}

int KvCacheManager::num_pinned_blocks() const {
  size_t n = 0;
  for (const auto& [id, blocks] : pins_) n += blocks.size();
  return static_cast<int>(n);
}

std::optional<BlockId> KvCacheManager::AllocateForRestore(RequestId id) {
  std::optional<std::vector<BlockId>> fresh = pool_.Allocate(1);
  if (!fresh.has_value()) return std::nullopt;
  pins_[id].push_back(fresh->front());  // Allocate's reference is the pin's
  return fresh->front();
}

std::vector<NewCachedBlock> KvCacheManager::TakeNewCached() {
  std::vector<NewCachedBlock> out;
  out.swap(new_cached_);
  return out;
}

bool KvCacheManager::CacheRestored(BlockId block, const BlockHash& hash, const BlockHash& parent) {
  if (!pool_.CacheBlock(block, hash, parent)) return false;
  if (config_.track_new_cached) new_cached_.push_back({block, hash, parent});
  return true;
}

std::vector<NewCachedBlock> KvCacheManager::CachedFreeBlocks() const {
  std::vector<NewCachedBlock> found;
  std::unordered_map<BlockHash, size_t, BlockHashHasher> index;  // hash -> position in found
  for (BlockId b : pool_.FreeQueue()) {
    if (!pool_.block_hash(b).has_value()) continue;
    index.emplace(*pool_.block_hash(b), found.size());
    found.push_back({b, *pool_.block_hash(b), pool_.block_parent(b)});
  }
  // Depth-first through the parents: each block after the ones it continues.
  std::vector<NewCachedBlock> out;
  out.reserve(found.size());
  std::vector<bool> placed(found.size(), false);
  std::vector<size_t> chain;
  for (size_t i = 0; i < found.size(); ++i) {
    for (size_t at = i; !placed[at];) {
      chain.push_back(at);
      placed[at] = true;
      auto parent = index.find(found[at].parent);
      if (parent == index.end()) break;
      at = parent->second;
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) out.push_back(found[*it]);
    chain.clear();
  }
  return out;
}

bool KvCacheManager::AllocateSlots(RequestId id, int num_computed_tokens, int num_new_tokens,
                                   const PrefixHit& hit, bool record_prefix_query) {
  CHECK_GE(num_computed_tokens, 0);
  CHECK_GE(num_new_tokens, 0);
  auto it = requests_.find(id);
  const int num_held = it == requests_.end() ? 0 : static_cast<int>(it->second.table.size());
  CHECK(hit.blocks.empty() || (num_held == 0 && num_computed_tokens == 0))
      << id << ": a prefix hit can only be adopted by a request without blocks";
  CHECK_EQ(hit.num_tokens, static_cast<int>(hit.blocks.size()) * config_.block_size);

  const int total_tokens = num_computed_tokens + hit.num_tokens + num_new_tokens;
  const int num_required = CeilDiv(total_tokens, config_.block_size);
  const int num_to_allocate =
      std::max(0, num_required - num_held - static_cast<int>(hit.blocks.size()));
  // Hit blocks sitting in the free queue stop being allocatable once touched.
  int num_hit_free = 0;
  for (BlockId b : hit.blocks) num_hit_free += pool_.ref_count(b) == 0;
  if (num_to_allocate > pool_.num_free_blocks() - num_hit_free) return false;

  RequestBlocks& req = requests_[id];
  if (num_held == 0) req.last_hash = config_.root_hash;
  if (!hit.blocks.empty()) {
    pool_.Touch(hit.blocks);
    req.table = hit.blocks;
    req.num_hashed_blocks = static_cast<int>(hit.blocks.size());
    const std::optional<BlockHash>& last = pool_.block_hash(hit.blocks.back());
    CHECK(last.has_value()) << "prefix-hit block " << hit.blocks.back() << " has no hash";
    req.last_hash = *last;
  }
  if (num_to_allocate > 0) {
    std::optional<std::vector<BlockId>> fresh = pool_.Allocate(num_to_allocate);
    CHECK(fresh.has_value()) << "free-block accounting is wrong";
    req.table.insert(req.table.end(), fresh->begin(), fresh->end());
  }
  ReleasePins(id);  // after the hit's own references: pinned hit blocks never touch 0
  if (record_prefix_query) {
    ++prefix_queries_;
    prefix_hits_ += hit.num_tokens > 0;
    prefix_query_tokens_ += num_computed_tokens + hit.num_tokens + num_new_tokens;
    prefix_hit_tokens_ += hit.num_tokens;
  }
  return true;
}

void KvCacheManager::CommitComputed(RequestId id, std::span<const TokenId> tokens,
                                    int num_computed_tokens, std::string_view extra_keys) {
  if (!config_.enable_prefix_cache) return;
  auto it = requests_.find(id);
  CHECK(it != requests_.end()) << id << " has no blocks";
  RequestBlocks& req = it->second;
  const int bs = config_.block_size;
  CHECK_LE(num_computed_tokens, static_cast<int>(tokens.size()));
  CHECK_LE(num_computed_tokens, static_cast<int>(req.table.size()) * bs)
      << id << ": computed tokens beyond the block table";
  const int num_full = num_computed_tokens / bs;
  for (int i = req.num_hashed_blocks; i < num_full; ++i) {
    BlockHash h =
        HashBlock(req.last_hash, tokens.subspan(static_cast<size_t>(i) * bs, bs), extra_keys);
    // false: another block already holds this content; ours stays a plain block. The chain
    // continues from the content hash either way.
    if (pool_.CacheBlock(req.table[i], h, req.last_hash) && config_.track_new_cached) {
      new_cached_.push_back({req.table[i], h, req.last_hash});
    }
    req.last_hash = h;
    req.num_hashed_blocks = i + 1;
  }
}

void KvCacheManager::Free(RequestId id) {
  ReleasePins(id);
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  std::vector<BlockId> reversed(it->second.table.rbegin(), it->second.table.rend());
  pool_.Free(reversed);
  requests_.erase(it);
}

std::span<const BlockId> KvCacheManager::block_table(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end()) return {};
  return it->second.table;
}

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats s;
  s.num_blocks = pool_.num_blocks();
  s.num_used_blocks = pool_.num_used_blocks();
  s.num_free_blocks = pool_.num_free_blocks();
  s.num_cached_blocks = pool_.num_cached_blocks();
  s.num_cached_free_blocks = pool_.num_cached_free_blocks();
  s.prefix_queries = prefix_queries_;
  s.prefix_hits = prefix_hits_;
  s.prefix_query_tokens = prefix_query_tokens_;
  s.prefix_hit_tokens = prefix_hit_tokens_;
  s.evictions = pool_.num_evictions();
  return s;
}

void KvCacheManager::CheckIntegrity() const {
  pool_.CheckIntegrity();
  std::vector<int> refs(pool_.num_blocks(), 0);
  for (const auto& [id, req] : requests_) {
    CHECK_LE(req.num_hashed_blocks, static_cast<int>(req.table.size())) << id;
    for (BlockId b : req.table) {
      CHECK(b >= 0 && b < pool_.num_blocks()) << id << " holds invalid block " << b;
      ++refs[b];
    }
  }
  for (const auto& [id, blocks] : pins_) {
    for (BlockId b : blocks) {
      CHECK(b >= 0 && b < pool_.num_blocks()) << id << " pins invalid block " << b;
      ++refs[b];
    }
  }
  for (BlockId b = 0; b < pool_.num_blocks(); ++b) {
    CHECK_EQ(refs[b], pool_.ref_count(b))
        << "block " << b << ": table and pin references vs ref_count";
  }
}

}  // namespace loom
