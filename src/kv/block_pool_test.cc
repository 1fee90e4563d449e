#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace loom {
namespace {

using Ids = std::vector<BlockId>;

BlockHash H(uint64_t v) { return BlockHash{v, ~v}; }

TEST(BlockPoolTest, AllocatesFromTheFrontAndFreesToTheBack) {
  BlockPool pool(6);
  EXPECT_EQ(pool.FreeQueue(), (Ids{0, 1, 2, 3, 4, 5}));
  auto a = pool.Allocate(3);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, (Ids{0, 1, 2}));
  EXPECT_EQ(pool.num_free_blocks(), 3);
  EXPECT_EQ(pool.ref_count(1), 1);
  pool.Free(Ids{2, 0});
  EXPECT_EQ(pool.FreeQueue(), (Ids{3, 4, 5, 2, 0}));
  EXPECT_EQ(pool.num_used_blocks(), 1);
  pool.CheckIntegrity();
}

TEST(BlockPoolTest, AllocateBeyondFreeChangesNothing) {
  BlockPool pool(4);
  ASSERT_TRUE(pool.Allocate(3).has_value());
  EXPECT_FALSE(pool.Allocate(2).has_value());
  EXPECT_EQ(pool.FreeQueue(), (Ids{3}));
  EXPECT_EQ(*pool.Allocate(1), (Ids{3}));
  EXPECT_FALSE(pool.Allocate(1).has_value());
  EXPECT_TRUE(pool.Allocate(0).has_value());
  pool.CheckIntegrity();
}

TEST(BlockPoolTest, FreedCachedBlockKeepsItsHashUntilReused) {
  BlockPool pool(3);
  Ids blocks = *pool.Allocate(2);  // 0, 1
  EXPECT_TRUE(pool.CacheBlock(0, H(10)));
  EXPECT_TRUE(pool.CacheBlock(1, H(11)));
  pool.Free(Ids{1, 0});
  EXPECT_EQ(pool.FreeQueue(), (Ids{2, 1, 0}));
  EXPECT_EQ(pool.num_cached_blocks(), 2);
  EXPECT_EQ(pool.num_cached_free_blocks(), 2);
  EXPECT_EQ(pool.LookupCached(H(10)), 0);

  // Reuse pops 2 (unhashed), then 1: its hash is evicted, 0 stays cached.
  EXPECT_EQ(*pool.Allocate(2), (Ids{2, 1}));
  EXPECT_EQ(pool.num_evictions(), 1u);
  EXPECT_FALSE(pool.LookupCached(H(11)).has_value());
  EXPECT_FALSE(pool.block_hash(1).has_value());
  EXPECT_EQ(pool.LookupCached(H(10)), 0);
  pool.CheckIntegrity();
}

TEST(BlockPoolTest, TouchRevivesAFreeCachedBlock) {
  BlockPool pool(3);
  (void)pool.Allocate(1);
  ASSERT_TRUE(pool.CacheBlock(0, H(5)));
  pool.Free(Ids{0});
  EXPECT_EQ(pool.FreeQueue(), (Ids{1, 2, 0}));
  pool.Touch(Ids{0});
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.FreeQueue(), (Ids{1, 2}));
  pool.Touch(Ids{0});  // a second request shares it
  EXPECT_EQ(pool.ref_count(0), 2);
  pool.Free(Ids{0});
  EXPECT_EQ(pool.FreeQueue(), (Ids{1, 2}));
  pool.Free(Ids{0});
  EXPECT_EQ(pool.FreeQueue(), (Ids{1, 2, 0}));
  EXPECT_EQ(pool.LookupCached(H(5)), 0);
  pool.CheckIntegrity();
}

TEST(BlockPoolTest, DuplicateHashIsNotRegisteredTwice) {
  BlockPool pool(2);
  (void)pool.Allocate(2);
  EXPECT_TRUE(pool.CacheBlock(0, H(1)));
  EXPECT_FALSE(pool.CacheBlock(1, H(1)));
  EXPECT_FALSE(pool.block_hash(1).has_value());
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  pool.CheckIntegrity();
}

TEST(BlockPoolDeathTest, DoubleFreeIsAnInvariantViolation) {
  BlockPool pool(2);
  (void)pool.Allocate(1);
  pool.Free(Ids{0});
  EXPECT_DEATH(pool.Free(Ids{0}), "double free of block 0");
}

}  // namespace
}  // namespace loom
