#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace loom {
namespace {

using Ids = std::vector<BlockId>;
using Tokens = std::vector<TokenId>;

constexpr RequestId kA{1};
constexpr RequestId kB{2};
constexpr RequestId kC{3};

Tokens Range(int begin, int end) {
  Tokens t(end - begin);
  std::iota(t.begin(), t.end(), begin);
  return t;
}

Ids Table(const KvCacheManager& kv, RequestId id) {
  auto t = kv.block_table(id);
  return Ids(t.begin(), t.end());
}

KvCacheManager MakeManager(int num_blocks, bool prefix_cache = true) {
  KvCacheConfig cfg;
  cfg.num_blocks = num_blocks;
  cfg.block_size = 4;
  cfg.enable_prefix_cache = prefix_cache;
  cfg.root_hash = RootBlockHash("test-model", "f32", "test-tok");
  return KvCacheManager(cfg);
}

// Admits `tokens` the way the scheduler does: look up the prefix, allocate the rest, then mark
// everything computed.
PrefixHit AdmitAndCompute(KvCacheManager& kv, RequestId id, const Tokens& tokens) {
  PrefixHit hit = kv.ComputedPrefix(tokens, "");
  const int n_new = static_cast<int>(tokens.size()) - hit.num_tokens;
  EXPECT_TRUE(kv.AllocateSlots(id, 0, n_new, hit, /*record_prefix_query=*/true));
  kv.CommitComputed(id, tokens, static_cast<int>(tokens.size()), "");
  kv.CheckIntegrity();
  return hit;
}

TEST(KvCacheManagerTest, PrefixHitSharesFullBlocksAndEvictsTailFirst) {
  KvCacheManager kv = MakeManager(10);
  const Tokens a = Range(0, 10);  // blocks [0..4)[4..8)[8,9]
  PrefixHit hit_a = AdmitAndCompute(kv, kA, a);
  EXPECT_EQ(hit_a.num_tokens, 0);
  EXPECT_EQ(Table(kv, kA), (Ids{0, 1, 2}));
  EXPECT_EQ(kv.stats().num_cached_blocks, 2);  // the partial block 2 is not hashed

  // B shares A's first two blocks, then diverges.
  Tokens b = Range(0, 8);
  b.push_back(100);
  b.push_back(101);
  b.push_back(102);
  PrefixHit hit_b = AdmitAndCompute(kv, kB, b);
  EXPECT_EQ(hit_b.blocks, (Ids{0, 1}));
  EXPECT_EQ(hit_b.num_tokens, 8);
  EXPECT_EQ(Table(kv, kB), (Ids{0, 1, 3}));
  EXPECT_EQ(kv.pool().ref_count(0), 2);
  EXPECT_EQ(kv.pool().ref_count(1), 2);

  // Freeing releases tail blocks first: A's 2, then B's 3, 1, 0.
  kv.Free(kA);
  EXPECT_EQ(kv.pool().FreeQueue(), (Ids{4, 5, 6, 7, 8, 9, 2}));
  kv.Free(kB);
  EXPECT_EQ(kv.pool().FreeQueue(), (Ids{4, 5, 6, 7, 8, 9, 2, 3, 1, 0}));
  kv.CheckIntegrity();
  EXPECT_EQ(kv.stats().num_cached_free_blocks, 2);

  // C repeats A: both cached blocks come back out of the free queue; one fresh block (4).
  PrefixHit hit_c = AdmitAndCompute(kv, kC, a);
  EXPECT_EQ(hit_c.blocks, (Ids{0, 1}));
  EXPECT_EQ(Table(kv, kC), (Ids{0, 1, 4}));
  EXPECT_EQ(kv.pool().FreeQueue(), (Ids{5, 6, 7, 8, 9, 2, 3}));
  kv.Free(kC);
  EXPECT_EQ(kv.pool().FreeQueue(), (Ids{5, 6, 7, 8, 9, 2, 3, 4, 1, 0}));

  // Filling the pool with unrelated tokens evicts block 1 (the tail of the prefix) before 0.
  const RequestId d{4};
  ASSERT_TRUE(kv.AllocateSlots(d, 0, 4 * 9));  // 9 blocks: 5..9, 2, 3, 4, 1
  EXPECT_EQ(Table(kv, d), (Ids{5, 6, 7, 8, 9, 2, 3, 4, 1}));
  EXPECT_EQ(kv.stats().evictions, 1u);
  EXPECT_EQ(kv.ComputedPrefix(a, "").blocks, (Ids{0}));
  kv.Free(d);
  kv.CheckIntegrity();

  const KvCacheStats s = kv.stats();
  EXPECT_EQ(s.prefix_queries, 3u);
  EXPECT_EQ(s.prefix_hits, 2u);
  EXPECT_EQ(s.prefix_hit_tokens, 16u);
  EXPECT_EQ(s.prefix_query_tokens, 31u);
}

TEST(KvCacheManagerTest, NeverCoversTheWholePrompt) {
  KvCacheManager kv = MakeManager(8);
  const Tokens a = Range(0, 8);  // exactly two full blocks
  AdmitAndCompute(kv, kA, a);
  EXPECT_EQ(kv.stats().num_cached_blocks, 2);
  // Same 8 tokens again: only the first block is reused, the last token is recomputed.
  PrefixHit hit = kv.ComputedPrefix(a, "");
  EXPECT_EQ(hit.blocks, (Ids{0}));
  EXPECT_EQ(hit.num_tokens, 4);
  // One more token: both blocks.
  Tokens longer = a;
  longer.push_back(8);
  EXPECT_EQ(kv.ComputedPrefix(longer, "").blocks, (Ids{0, 1}));
  EXPECT_TRUE(kv.ComputedPrefix(Tokens{0}, "").blocks.empty());
  EXPECT_TRUE(kv.ComputedPrefix(Tokens{}, "").blocks.empty());
}

TEST(KvCacheManagerTest, ExtraKeysSeparateCaches) {
  KvCacheManager kv = MakeManager(8);
  const Tokens a = Range(0, 9);
  AdmitAndCompute(kv, kA, a);
  EXPECT_EQ(kv.ComputedPrefix(a, "").blocks.size(), 2u);
  EXPECT_TRUE(kv.ComputedPrefix(a, "adapter:math").blocks.empty());
  // A different first block breaks the chain even if the second block's tokens match.
  Tokens b = a;
  b[0] = 99;
  EXPECT_TRUE(kv.ComputedPrefix(b, "").blocks.empty());
}

TEST(KvCacheManagerTest, DisabledPrefixCacheHashesNothing) {
  KvCacheManager kv = MakeManager(8, /*prefix_cache=*/false);
  const Tokens a = Range(0, 9);
  AdmitAndCompute(kv, kA, a);
  EXPECT_EQ(kv.stats().num_cached_blocks, 0);
  EXPECT_TRUE(kv.ComputedPrefix(a, "").blocks.empty());
}

TEST(KvCacheManagerTest, GrowsOneBlockAtABoundaryAndFailsWithoutSideEffects) {
  KvCacheManager kv = MakeManager(3);
  ASSERT_TRUE(kv.AllocateSlots(kA, 0, 4));  // exactly one block
  EXPECT_EQ(Table(kv, kA), (Ids{0}));
  ASSERT_TRUE(kv.AllocateSlots(kA, 4, 0));  // nothing new needed
  EXPECT_EQ(Table(kv, kA), (Ids{0}));
  ASSERT_TRUE(kv.AllocateSlots(kA, 4, 1));  // token 5 opens block 2
  EXPECT_EQ(Table(kv, kA), (Ids{0, 1}));
  ASSERT_TRUE(kv.AllocateSlots(kB, 0, 3));
  EXPECT_EQ(Table(kv, kB), (Ids{2}));
  // A needs a third block: none left.
  EXPECT_FALSE(kv.AllocateSlots(kA, 8, 1));
  EXPECT_EQ(Table(kv, kA), (Ids{0, 1}));
  EXPECT_EQ(kv.num_free_blocks(), 0);
  kv.CheckIntegrity();
}

TEST(KvCacheManagerTest, FreeHitBlocksCountAgainstCapacity) {
  KvCacheManager kv = MakeManager(3);
  const Tokens a = Range(0, 9);
  AdmitAndCompute(kv, kA, a);  // blocks 0, 1 (hashed), 2
  kv.Free(kA);                 // all free; 0 and 1 cached
  // A repeat needs its 2 hit blocks + 1 new: fits exactly.
  Tokens longer = Range(0, 9);
  PrefixHit hit = kv.ComputedPrefix(longer, "");
  ASSERT_EQ(hit.blocks, (Ids{0, 1}));
  // Asking for 5 new tokens after the hit needs 2 fresh blocks, but only one block is free and
  // not part of the hit: refused, nothing changed.
  EXPECT_FALSE(kv.AllocateSlots(kB, 0, 5, hit));
  EXPECT_FALSE(kv.HasRequest(kB));
  EXPECT_EQ(kv.pool().num_free_blocks(), 3);
  EXPECT_EQ(kv.stats().num_cached_blocks, 2);
  EXPECT_TRUE(kv.AllocateSlots(kB, 0, 1, hit));
  EXPECT_EQ(Table(kv, kB), (Ids{0, 1, 2}));
  kv.CheckIntegrity();
}

TEST(KvCacheManagerTest, ConcurrentIdenticalPrefillsKeepOneCachedCopy) {
  KvCacheManager kv = MakeManager(6);
  const Tokens a = Range(0, 9);
  // Both admitted before either is computed: no hits, separate blocks.
  ASSERT_TRUE(kv.AllocateSlots(kA, 0, 9));
  ASSERT_TRUE(kv.AllocateSlots(kB, 0, 9));
  EXPECT_EQ(Table(kv, kA), (Ids{0, 1, 2}));
  EXPECT_EQ(Table(kv, kB), (Ids{3, 4, 5}));
  kv.CommitComputed(kA, a, 9, "");
  kv.CommitComputed(kB, a, 9, "");
  EXPECT_EQ(kv.stats().num_cached_blocks, 2);
  EXPECT_FALSE(kv.pool().block_hash(3).has_value());
  kv.CheckIntegrity();
  kv.Free(kB);
  kv.Free(kA);
  EXPECT_EQ(kv.ComputedPrefix(a, "").blocks, (Ids{0, 1}));
  kv.CheckIntegrity();
}

TEST(KvCacheManagerTest, IncrementalCommitHashesBlocksAsTheyFill) {
  KvCacheManager kv = MakeManager(4);
  Tokens t = Range(0, 6);
  ASSERT_TRUE(kv.AllocateSlots(kA, 0, 6));
  kv.CommitComputed(kA, t, 3, "");
  EXPECT_EQ(kv.stats().num_cached_blocks, 0);
  kv.CommitComputed(kA, t, 6, "");
  EXPECT_EQ(kv.stats().num_cached_blocks, 1);
  // Decode: tokens 6 and 7 fill block 1.
  t.push_back(6);
  ASSERT_TRUE(kv.AllocateSlots(kA, 6, 1));
  kv.CommitComputed(kA, t, 7, "");
  t.push_back(7);
  ASSERT_TRUE(kv.AllocateSlots(kA, 7, 1));
  kv.CommitComputed(kA, t, 8, "");
  EXPECT_EQ(kv.stats().num_cached_blocks, 2);
  t.push_back(8);
  // The chained hash of block 1 is the one a fresh lookup computes.
  EXPECT_EQ(kv.ComputedPrefix(t, "").blocks, (Ids{0, 1}));
  kv.CheckIntegrity();
}

}  // namespace

TEST(KvCacheManagerTest, PinsKeepAWaitingRequestsPrefixUntilItsAdmission) {
  KvCacheManager kv = MakeManager(6);
  const Tokens a = Range(0, 9);  // 2 full blocks cached
  AdmitAndCompute(kv, kA, a);
  kv.Free(kA);
  const PrefixHit hit = kv.ComputedPrefix(a, "");
  ASSERT_EQ(hit.blocks.size(), 2u);
  kv.Pin(kB, hit.blocks);
  EXPECT_EQ(kv.num_pinned_blocks(), 2);
  EXPECT_EQ(kv.num_free_blocks(), 4);
  kv.CheckIntegrity();
  // Another request takes every free block: the pinned ones are not among them.
  ASSERT_TRUE(kv.AllocateSlots(kC, 0, 16));
  EXPECT_EQ(kv.ComputedPrefix(a, "").num_tokens, 8);
  EXPECT_FALSE(kv.AllocateSlots(kA, 0, 1));
  kv.Free(kC);
  // B's admission adopts the hit and drops the pins: one reference each, from B's table.
  const PrefixHit again = kv.ComputedPrefix(a, "");
  ASSERT_TRUE(kv.AllocateSlots(kB, 0, 1, again, true));
  EXPECT_EQ(kv.num_pinned_blocks(), 0);
  for (BlockId b : hit.blocks) EXPECT_EQ(kv.pool().ref_count(b), 1);
  kv.CheckIntegrity();
  kv.Free(kB);
  EXPECT_EQ(kv.num_free_blocks(), 6);
}

TEST(KvCacheManagerTest, RestoredBlocksJoinTheChainOnlyOnceCached) {
  KvCacheManager kv = MakeManager(8);
  const Tokens a = Range(0, 13);  // 3 full blocks may be hit
  const std::vector<BlockHash> hashes = kv.PrefixHashes(a, "");
  ASSERT_EQ(hashes.size(), 3u);
  std::vector<BlockId> restored;
  for (int i = 0; i < 2; ++i) {
    std::optional<BlockId> b = kv.AllocateForRestore(kA);
    ASSERT_TRUE(b.has_value());
    restored.push_back(*b);
  }
  EXPECT_EQ(kv.ComputedPrefix(a, "").num_tokens, 0);  // not cached before it is filled
  EXPECT_TRUE(kv.CacheRestored(restored[0], hashes[0], kv.root_hash()));
  EXPECT_TRUE(kv.CacheRestored(restored[1], hashes[1], hashes[0]));
  EXPECT_EQ(kv.ComputedPrefix(a, "").blocks, restored);
  kv.CheckIntegrity();
  // Unadmitted: the pins go, the blocks stay cached and free (reusable, evictable).
  kv.ReleaseAllPins();
  EXPECT_EQ(kv.num_pinned_blocks(), 0);
  EXPECT_EQ(kv.stats().num_cached_free_blocks, 2);
  EXPECT_EQ(kv.ComputedPrefix(a, "").num_tokens, 8);
  kv.CheckIntegrity();
  // Free(id) drops pins of a request that never ran.
  ASSERT_TRUE(kv.AllocateForRestore(kB).has_value());
  kv.Free(kB);
  EXPECT_EQ(kv.num_pinned_blocks(), 0);
  EXPECT_EQ(kv.num_free_blocks(), 8);
  kv.CheckIntegrity();
}

TEST(KvCacheManagerTest, NewCachedBlocksAreReportedOnceWithTheirParents) {
  KvCacheConfig cfg;
  cfg.num_blocks = 8;
  cfg.block_size = 4;
  cfg.root_hash = RootBlockHash("test-model", "f32", "test-tok");
  cfg.track_new_cached = true;
  KvCacheManager kv(cfg);
  const Tokens a = Range(0, 10);
  AdmitAndCompute(kv, kA, a);
  std::vector<NewCachedBlock> fresh = kv.TakeNewCached();
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh[0].parent, cfg.root_hash);
  EXPECT_EQ(fresh[1].parent, fresh[0].hash);
  EXPECT_EQ(fresh[0].block, Table(kv, kA)[0]);
  EXPECT_EQ(kv.LookupCached(fresh[1].hash), Table(kv, kA)[1]);
  EXPECT_TRUE(kv.TakeNewCached().empty());
  // The same prompt again: its blocks are hits, not new.
  AdmitAndCompute(kv, kB, a);
  EXPECT_TRUE(kv.TakeNewCached().empty());
  // A block restored from a tier below is reported too (another tier may lack it).
  const std::vector<BlockHash> other = kv.PrefixHashes(Range(50, 55), "");
  std::optional<BlockId> restored = kv.AllocateForRestore(kC);
  ASSERT_TRUE(restored.has_value());
  ASSERT_TRUE(kv.CacheRestored(*restored, other[0], cfg.root_hash));
  fresh = kv.TakeNewCached();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].block, *restored);
  EXPECT_EQ(fresh[0].hash, other[0]);
  EXPECT_EQ(fresh[0].parent, cfg.root_hash);
  kv.Free(kC);
}

// Free() queues a request's blocks last first; the free chain still comes parents first, and
// blocks a request holds are not listed.
TEST(KvCacheManagerTest, CachedFreeBlocksComeParentsFirstWithTheirParents) {
  KvCacheManager kv = MakeManager(16);
  const Tokens a = Range(0, 13);  // 3 full blocks
  AdmitAndCompute(kv, kA, a);
  AdmitAndCompute(kv, kB, Range(100, 109));  // 2 full blocks, held
  const Ids a_table = Table(kv, kA);
  kv.Free(kA);
  const std::vector<BlockHash> hashes = kv.PrefixHashes(a, "");
  const std::vector<NewCachedBlock> free = kv.CachedFreeBlocks();
  ASSERT_EQ(free.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(free[i].block, a_table[i]);
    EXPECT_EQ(free[i].hash, hashes[i]);
    EXPECT_EQ(free[i].parent, i == 0 ? kv.root_hash() : hashes[i - 1]);
  }
  kv.Free(kB);
  EXPECT_EQ(kv.CachedFreeBlocks().size(), 5u);
}

}  // namespace loom
