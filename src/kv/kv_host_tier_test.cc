#include "kv/kv_host_tier.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace loom {
namespace {

BlockHash H(uint64_t v) { return BlockHash{v, ~v}; }

std::unique_ptr<KvHostTier> Make(int64_t blocks, int64_t block_bytes = 64) {
  KvHostTierConfig c;
  c.block_bytes = block_bytes;
  c.capacity_bytes = blocks * block_bytes + block_bytes / 2;  // rounded down to whole blocks
  StatusOr<std::unique_ptr<KvHostTier>> t = KvHostTier::Create(c);
  CHECK(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

// Reserves a slot, fills it with v's bytes and publishes it under H(v).
int Put(KvHostTier& t, uint64_t v) {
  std::optional<int> slot = t.Reserve();
  CHECK(slot.has_value());
  std::memset(t.data(*slot), static_cast<int>(v), static_cast<size_t>(t.block_bytes()));
  CHECK(t.Publish(*slot, H(v)));
  return *slot;
}

TEST(KvHostTierTest, ConfigIsValidated) {
  KvHostTierConfig c;
  c.block_bytes = 64;
  c.capacity_bytes = 63;
  EXPECT_FALSE(KvHostTier::Create(c).ok());  // less than a block
  c.block_bytes = 0;
  c.capacity_bytes = 1024;
  EXPECT_FALSE(KvHostTier::Create(c).ok());
  EXPECT_EQ(Make(3)->capacity_blocks(), 3);
}

TEST(KvHostTierTest, PublishedBlocksAreFoundWithTheirBytes) {
  auto t = Make(4);
  for (uint64_t v = 1; v <= 3; ++v) Put(*t, v);
  for (uint64_t v = 1; v <= 3; ++v) {
    std::optional<int> slot = t->Find(H(v));
    ASSERT_TRUE(slot.has_value()) << v;
    EXPECT_EQ(t->data(*slot)[0], v);
    EXPECT_EQ(t->data(*slot)[63], v);
  }
  EXPECT_FALSE(t->Find(H(9)).has_value());
  EXPECT_FALSE(t->Contains(H(9)));
  const KvHostTierStats s = t->stats();
  EXPECT_EQ(s.entries, 3);
  EXPECT_EQ(s.bytes, 3 * 64);
  EXPECT_EQ(s.inserts, 3);
  EXPECT_EQ(s.hits, 3);
}

TEST(KvHostTierTest, TheLeastRecentlyUsedIsEvictedFirst) {
  auto t = Make(3);
  for (uint64_t v = 1; v <= 3; ++v) Put(*t, v);
  ASSERT_TRUE(t->Find(H(1)).has_value());  // 2 is now the oldest
  Put(*t, 4);
  EXPECT_FALSE(t->Contains(H(2)));
  EXPECT_TRUE(t->Contains(H(1)));
  EXPECT_TRUE(t->Contains(H(3)));
  EXPECT_TRUE(t->Contains(H(4)));
  EXPECT_EQ(t->stats().evictions, 1);
}

TEST(KvHostTierTest, HeldSlotsAreNeverEvictedAndAFullyHeldTierRefuses) {
  auto t = Make(2);
  const int a = Put(*t, 1);
  const int b = Put(*t, 2);
  std::shared_ptr<const uint8_t> hold_a = t->Hold(a);
  EXPECT_EQ(hold_a.get(), t->data(a));
  Put(*t, 3);  // evicts 2, the only one not held
  EXPECT_TRUE(t->Contains(H(1)));
  EXPECT_FALSE(t->Contains(H(2)));
  std::shared_ptr<const uint8_t> hold_b = t->Hold(*t->Find(H(3)));
  EXPECT_EQ(t->stats().held, 2);
  EXPECT_FALSE(t->Reserve().has_value());  // both held: refused
  EXPECT_EQ(t->stats().refused, 1);
  // A hold dropped on another thread (the SSD writer's) frees its slot for eviction.
  std::thread([h = std::move(hold_a)]() mutable { h.reset(); }).join();
  EXPECT_EQ(t->stats().held, 1);
  std::optional<int> slot = t->Reserve();
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(*slot, a);
  EXPECT_FALSE(t->Contains(H(1)));
  t->Unreserve(*slot);
  (void)b;
}

TEST(KvHostTierTest, ReservedSlotsAreNotFoundAndGoBackFree) {
  auto t = Make(1);
  std::optional<int> slot = t->Reserve();
  ASSERT_TRUE(slot.has_value());
  EXPECT_FALSE(t->Reserve().has_value());  // the only slot is reserved, not evictable
  t->Unreserve(*slot);
  Put(*t, 5);
  EXPECT_TRUE(t->Contains(H(5)));
}

TEST(KvHostTierTest, PublishingAHashAlreadyHereFreesTheSlot) {
  auto t = Make(2);
  Put(*t, 1);
  std::optional<int> slot = t->Reserve();
  ASSERT_TRUE(slot.has_value());
  EXPECT_FALSE(t->Publish(*slot, H(1)));
  EXPECT_EQ(t->stats().entries, 1);
  Put(*t, 2);  // the slot went back free: no eviction needed
  EXPECT_EQ(t->stats().evictions, 0);
  EXPECT_TRUE(t->Contains(H(1)));
}

TEST(KvHostTierTest, RestoresAreCounted) {
  auto t = Make(1);
  t->RecordRestore(0);
  t->RecordRestore(7);
  EXPECT_EQ(t->stats().restores, 1);
  EXPECT_EQ(t->stats().restored_blocks, 7);
}

}  // namespace
}  // namespace loom
