#include "kv/kv_ssd_tier.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace loom {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Block v of the test chain; block 0 stands for the root (the parent of block 1).
BlockHash H(uint64_t v) {
  return v == 0 ? RootBlockHash("model-abc", "f32", "") : BlockHash{v, ~v};
}

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
  c.staging_chunk_bytes = 256 * 8;
  return c;
}

std::vector<uint8_t> Payload(uint64_t v) {
  std::vector<uint8_t> p(256);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(v * 13 + i);
  return p;
}

// Spills blocks first..last (block v's parent is v - 1, block 1's the root) in one call.
void SpillRange(KvSsdTier& tier, uint64_t first, uint64_t last) {
  std::vector<KvSsdTier::SpillBlock> blocks;
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  for (uint64_t v = first; v <= last; ++v) {
    const std::vector<uint8_t> p = Payload(v);
    bytes->insert(bytes->end(), p.begin(), p.end());
  }
  for (uint64_t v = first; v <= last; ++v) {  // aliases into the one buffer
    blocks.push_back(
        {H(v), H(v - 1), std::shared_ptr<const uint8_t>(bytes, bytes->data() + (v - first) * 256)});
  }
  tier.Spill(blocks);
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

  // A chain with a missing link: the job reads what it can; the chunk stops at the gap.
  std::shared_ptr<KvRestoreJob> job = (*tier)->StartRestore({H(1), H(2), H(99), H(4)});
  std::optional<KvRestoreJob::Chunk> chunk = job->Next(/*wait=*/true);
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(chunk->first, 0);
  ASSERT_EQ(chunk->count, 2);
  EXPECT_EQ(std::vector<uint8_t>(chunk->bytes.begin(), chunk->bytes.begin() + 256), Payload(1));
  EXPECT_EQ(std::vector<uint8_t>(chunk->bytes.begin() + 256, chunk->bytes.end()), Payload(2));
  EXPECT_FALSE(job->Next(true).has_value());
  EXPECT_TRUE(job->ended());
  job->Wait();
  (*tier)->RecordRestore(2);
  EXPECT_EQ((*tier)->stats().restores, 1);
  EXPECT_EQ((*tier)->stats().restored_blocks, 2);
  job = (*tier)->StartRestore({});
  EXPECT_TRUE(job->ended());
  EXPECT_FALSE(job->Next(true).has_value());
}

TEST_F(KvSsdTierTest, ALongChainIsRestoredChunkByChunkThroughFewSlots) {
  KvSsdTierConfig c = TestConfig(dir_);
  c.staging_chunk_bytes = 256 * 3;  // three blocks a chunk
  c.staging_slots = 2;
  auto tier = KvSsdTier::Open(c);
  ASSERT_TRUE(tier.ok());
  SpillRange(**tier, 1, 20);
  ASSERT_TRUE((*tier)->Flush(10s));
  std::vector<BlockHash> chain;
  for (uint64_t v = 1; v <= 20; ++v) chain.push_back(H(v));
  for (bool wait : {true, false}) {
    std::shared_ptr<KvRestoreJob> job = (*tier)->StartRestore(chain);
    EXPECT_EQ(job->chunk_blocks(), 3);
    int next = 0;
    while (!job->ended()) {
      std::optional<KvRestoreJob::Chunk> chunk = job->Next(wait);
      if (!chunk.has_value()) {
        ASSERT_FALSE(wait);  // not read yet
        std::this_thread::sleep_for(1ms);
        continue;
      }
      ASSERT_EQ(chunk->first, next);
      ASSERT_EQ(chunk->count, std::min(3, 20 - next));
      for (int i = 0; i < chunk->count; ++i) {
        EXPECT_EQ(std::vector<uint8_t>(chunk->bytes.begin() + i * 256,
                                       chunk->bytes.begin() + (i + 1) * 256),
                  Payload(static_cast<uint64_t>(next + i + 1)))
            << "block " << next + i;
      }
      next += chunk->count;
    }
    EXPECT_EQ(next, 20);
    job->Wait();
  }
  // A corrupt block in the fourth chunk: the chain ends just before it, later chunks unused.
  {
    const std::string path = (*tier)->store().PathOf(H(11));
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  std::shared_ptr<KvRestoreJob> job = (*tier)->StartRestore(chain);
  int got = 0;
  while (std::optional<KvRestoreJob::Chunk> chunk = job->Next(true)) got += chunk->count;
  EXPECT_EQ(got, 10);
  job->Cancel();
  job->Wait();
  EXPECT_EQ((*tier)->stats().store.quarantined, 1);
}

TEST_F(KvSsdTierTest, ABlockWhoseParentIsNeitherStoredNorQueuedIsRefused) {
  auto tier = KvSsdTier::Open(TestConfig(dir_));
  ASSERT_TRUE(tier.ok());
  SpillRange(**tier, 5, 6);  // 4 was never spilled: 5 and 6 could never be restored
  SpillRange(**tier, 1, 2);
  SpillRange(**tier, 3, 3);  // 2 is queued or stored: taken
  ASSERT_TRUE((*tier)->Flush(10s));
  for (uint64_t v = 1; v <= 3; ++v) EXPECT_TRUE((*tier)->Contains(H(v))) << v;
  EXPECT_FALSE((*tier)->Contains(H(5)));
  EXPECT_FALSE((*tier)->Contains(H(6)));
  EXPECT_EQ((*tier)->stats().dropped_spills, 2);
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
    SpillRange(**tier, 1, 7);
    ASSERT_TRUE((*tier)->Flush(10s));
  }
  {
    auto tier = KvSsdTier::Open(TestConfig(dir_));
    ASSERT_TRUE(tier.ok());
    EXPECT_TRUE((*tier)->Contains(H(7)));
    auto job = (*tier)->StartRestore({H(7)});
    std::optional<KvRestoreJob::Chunk> chunk = job->Next(/*wait=*/true);
    ASSERT_TRUE(chunk.has_value());
    EXPECT_EQ(chunk->count, 1);
    EXPECT_EQ(std::vector<uint8_t>(chunk->bytes.begin(), chunk->bytes.end()), Payload(7));
    job->Wait();
  }
  KvSsdTierConfig other = TestConfig(dir_);
  other.format.kv_dtype = "bf16";  // another process's KV dtype: the file is not ours
  auto tier = KvSsdTier::Open(other);
  ASSERT_TRUE(tier.ok());
  EXPECT_FALSE((*tier)->Contains(H(7)));
  EXPECT_EQ((*tier)->stats().store.quarantined, 7);
}

TEST_F(KvSsdTierTest, BadConfigurationsAreRefused) {
  KvSsdTierConfig c = TestConfig(dir_);
  c.dir = "";
  EXPECT_FALSE(KvSsdTier::Open(c).ok());
  c = TestConfig(dir_);
  c.num_readers = 0;
  EXPECT_FALSE(KvSsdTier::Open(c).ok());
  c = TestConfig(dir_);
  c.staging_slots = 0;
  EXPECT_FALSE(KvSsdTier::Open(c).ok());
  c = TestConfig(dir_);
  c.format.model_fingerprint = "";
  EXPECT_FALSE(KvSsdTier::Open(c).ok());
}

}  // namespace
}  // namespace loom
