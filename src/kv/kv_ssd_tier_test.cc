#include "kv/kv_ssd_tier.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace loom {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

BlockHash H(uint64_t v) { return BlockHash{v, ~v}; }

KvSsdTierConfig TestConfig(const fs::path& dir) {
  KvSsdTierConfig c;
  c.dir = dir.string();
  c.format.model_fingerprint = "model-abc";
  c.format.kv_dtype = "f32";
  c.format.block_size = 4;
  c.format.num_layers = 1;
  c.format.num_kv_heads = 1;
  c.format.head_dim = 8;
  c.format.block_bytes = 256;
  c.num_readers = 3;
  return c;
}

std::vector<uint8_t> Payload(uint64_t v) {
  std::vector<uint8_t> p(256);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(v * 13 + i);
  return p;
}

// Spills blocks first..last (block v's parent is v - 1) in one call.
void SpillRange(KvSsdTier& tier, uint64_t first, uint64_t last) {
  std::vector<KvSsdTier::SpillBlock> blocks;
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  for (uint64_t v = first; v <= last; ++v) {
    blocks.push_back({H(v), H(v - 1)});
    const std::vector<uint8_t> p = Payload(v);
    bytes->insert(bytes->end(), p.begin(), p.end());
  }
  tier.Spill(blocks, std::move(bytes));
}

class KvSsdTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("loom_kv_ssd_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(KvSsdTierTest, SpilledBlocksAreWrittenBehindAndRestoredInOrder) {
  auto tier = KvSsdTier::Open(TestConfig(dir_));
  ASSERT_TRUE(tier.ok()) << tier.status().ToString();
  SpillRange(**tier, 1, 3);
  SpillRange(**tier, 4, 5);
  for (uint64_t v = 1; v <= 5; ++v) EXPECT_TRUE((*tier)->Has(H(v)));  // queued or stored
  ASSERT_TRUE((*tier)->Flush(10s));
  EXPECT_EQ((*tier)->stats().store.writes, 5);
  EXPECT_EQ((*tier)->stats().pending_spills, 0);
  SpillRange(**tier, 3, 3);  // already stored: not written again
  ASSERT_TRUE((*tier)->Flush(10s));
  EXPECT_EQ((*tier)->stats().store.writes, 5);

  // A chain with a missing link: the job reads what it can; num_read stops at the gap.
  std::shared_ptr<KvRestoreJob> job = (*tier)->StartRestore({H(1), H(2), H(99), H(4)});
  job->Wait();
  EXPECT_EQ(job->num_read(), 2);
  EXPECT_EQ(std::vector<uint8_t>(job->block(0).begin(), job->block(0).end()), Payload(1));
  EXPECT_EQ(std::vector<uint8_t>(job->block(1).begin(), job->block(1).end()), Payload(2));
  (*tier)->RecordRestore(job->num_read());
  EXPECT_EQ((*tier)->stats().restores, 1);
  EXPECT_EQ((*tier)->stats().restored_blocks, 2);
  EXPECT_TRUE((*tier)->StartRestore({})->done());
}

TEST_F(KvSsdTierTest, AFullQueueRefusesTheNewestSpillsAndKeepsTheChainsHead) {
  KvSsdTierConfig c = TestConfig(dir_);
  c.max_pending_bytes = 256 * 4;  // four blocks
  auto tier = KvSsdTier::Open(c);
  ASSERT_TRUE(tier.ok());
  SpillRange(**tier, 1, 40);  // one call: the writer cannot have taken more than the queue held
  ASSERT_TRUE((*tier)->Flush(30s));
  const KvSsdTierStats s = (*tier)->stats();
  EXPECT_EQ(s.store.writes, 4);
  EXPECT_EQ(s.dropped_spills, 36);
  for (uint64_t v = 1; v <= 4; ++v) EXPECT_TRUE((*tier)->Contains(H(v))) << v;
  EXPECT_FALSE((*tier)->Contains(H(5)));
}

TEST_F(KvSsdTierTest, BlocksSurviveReopeningAndForeignFormatsAreQuarantined) {
  {
    auto tier = KvSsdTier::Open(TestConfig(dir_));
    ASSERT_TRUE(tier.ok());
    SpillRange(**tier, 7, 7);
    ASSERT_TRUE((*tier)->Flush(10s));
  }
  {
    auto tier = KvSsdTier::Open(TestConfig(dir_));
    ASSERT_TRUE(tier.ok());
    EXPECT_TRUE((*tier)->Contains(H(7)));
    auto job = (*tier)->StartRestore({H(7)});
    job->Wait();
    EXPECT_EQ(job->num_read(), 1);
  }
  KvSsdTierConfig other = TestConfig(dir_);
  other.format.kv_dtype = "bf16";  // another process's KV dtype: the file is not ours
  auto tier = KvSsdTier::Open(other);
  ASSERT_TRUE(tier.ok());
  EXPECT_FALSE((*tier)->Contains(H(7)));
  EXPECT_EQ((*tier)->stats().store.quarantined, 1);
}

TEST_F(KvSsdTierTest, BadConfigurationsAreRefused) {
  KvSsdTierConfig c = TestConfig(dir_);
  c.dir = "";
  EXPECT_FALSE(KvSsdTier::Open(c).ok());
  c = TestConfig(dir_);
  c.num_readers = 0;
  EXPECT_FALSE(KvSsdTier::Open(c).ok());
  c = TestConfig(dir_);
  c.format.model_fingerprint = "";
  EXPECT_FALSE(KvSsdTier::Open(c).ok());
}

}  // namespace
}  // namespace loom
