#include "kv/kv_disk_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace loom {
namespace {

namespace fs = std::filesystem;

BlockHash H(uint64_t v) { return BlockHash{v, ~v}; }

KvDiskFormat TestFormat() {
  KvDiskFormat f;
  f.model_fingerprint = "model-abc";
  f.kv_dtype = "bf16";
  f.tokenizer_hash = "tok-1";
  f.block_size = 16;
  f.num_layers = 2;
  f.num_kv_heads = 2;
  f.head_dim = 4;
  f.block_bytes = 2 * 2 * 16 * 2 * 4 * 2;  // layers * (K, V) * tokens * heads * dim * bf16
  return f;
}

// The payload of block v: distinct bytes per block.
std::vector<uint8_t> Payload(uint64_t v, int64_t n = TestFormat().block_bytes) {
  std::vector<uint8_t> p(static_cast<size_t>(n));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(v * 31 + i * 7 + (i >> 8));
  return p;
}

int64_t FileBytes() { return kKvDiskHeaderBytes + TestFormat().block_bytes; }

size_t CountFiles(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

class KvDiskStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("loom_kv_disk_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<KvDiskStore> OpenStore(KvDiskFormat format = TestFormat(),
                                         int64_t max_bytes = int64_t{1} << 30) {
    auto store = KvDiskStore::Open(dir_.string(), std::move(format), max_bytes);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return std::move(store).value();
  }

  // Puts block v written by a process with `format` into dir_ (via a staging directory, since
  // opening a store there would quarantine the files of other formats).
  void WriteWithFormat(const KvDiskFormat& format, uint64_t v) {
    const fs::path stage = dir_.string() + "_stage";
    auto other = KvDiskStore::Open(stage.string(), format, int64_t{1} << 30);
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE((*other)->Write(H(v), H(0), Payload(v, format.block_bytes)).ok());
    const fs::path from = (*other)->PathOf(H(v));
    const fs::path to = dir_ / fs::relative(from, stage);
    fs::create_directories(to.parent_path());
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
    fs::remove_all(stage);
  }

  fs::path dir_;
};

TEST_F(KvDiskStoreTest, WriteThenReadIsByteExact) {
  auto store = OpenStore();
  auto payload = Payload(1);
  ASSERT_TRUE(store->Write(H(1), H(0), payload).ok());
  EXPECT_TRUE(store->Contains(H(1)));
  EXPECT_FALSE(store->Contains(H(2)));
  std::vector<uint8_t> out(payload.size());
  ASSERT_TRUE(store->Read(H(1), out).ok());
  EXPECT_EQ(out, payload);
  EXPECT_EQ(store->Read(H(2), out).code(), StatusCode::kNotFound);
  KvDiskStats s = store->stats();
  EXPECT_EQ(s.entries, 1);
  EXPECT_EQ(s.bytes, FileBytes());
  EXPECT_EQ(s.writes, 1);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_TRUE(fs::exists(store->PathOf(H(1))));
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(store->PathOf(H(1)))), FileBytes());
  EXPECT_EQ(CountFiles(dir_ / "tmp"), 0u);
}

TEST_F(KvDiskStoreTest, FileNameIsShardedHex) {
  auto store = OpenStore();
  BlockHash h{0x0123456789abcdefull, 0xfedcba9876543210ull};
  EXPECT_EQ(store->PathOf(h), dir_.string() + "/fe/fedcba98765432100123456789abcdef.kvb");
}

TEST_F(KvDiskStoreTest, WritingAStoredBlockAgainIsANoOp) {
  auto store = OpenStore();
  ASSERT_TRUE(store->Write(H(1), H(0), Payload(1)).ok());
  ASSERT_TRUE(store->Write(H(1), H(0), Payload(1)).ok());
  EXPECT_EQ(store->stats().writes, 1);
  EXPECT_EQ(store->stats().bytes, FileBytes());
}

TEST_F(KvDiskStoreTest, ReopenFindsTheBlocks) {
  {
    auto store = OpenStore();
    for (uint64_t v = 1; v <= 5; ++v) ASSERT_TRUE(store->Write(H(v), H(v - 1), Payload(v)).ok());
  }
  auto store = OpenStore();
  EXPECT_EQ(store->stats().entries, 5);
  EXPECT_EQ(store->stats().bytes, 5 * FileBytes());
  EXPECT_EQ(store->stats().quarantined, 0);
  std::vector<uint8_t> out(static_cast<size_t>(TestFormat().block_bytes));
  for (uint64_t v = 1; v <= 5; ++v) {
    ASSERT_TRUE(store->Read(H(v), out).ok());
    EXPECT_EQ(out, Payload(v));
  }
}

// Two processes on one directory: what one writes after the other opened is found by Discover
// (Contains only knows the index built at Open), then read like any block; a file of another
// size under a block's name is not taken.
TEST_F(KvDiskStoreTest, DiscoverFindsBlocksAnotherStoreWroteSinceOpen) {
  auto a = OpenStore();
  auto b = OpenStore();
  ASSERT_TRUE(a->Write(H(1), H(0), Payload(1)).ok());
  EXPECT_FALSE(b->Contains(H(1)));
  EXPECT_TRUE(b->Discover(H(1)));
  EXPECT_TRUE(b->Contains(H(1)));
  EXPECT_EQ(b->stats().discovered, 1);
  EXPECT_EQ(b->stats().bytes, FileBytes());
  std::vector<uint8_t> out(static_cast<size_t>(TestFormat().block_bytes));
  ASSERT_TRUE(b->Read(H(1), out).ok());
  EXPECT_EQ(out, Payload(1));
  EXPECT_TRUE(b->Discover(H(1)));  // indexed now: no stat, not counted again
  EXPECT_EQ(b->stats().discovered, 1);
  EXPECT_FALSE(b->Discover(H(2)));

  const std::string odd = b->PathOf(H(3));
  fs::create_directories(fs::path(odd).parent_path());
  std::ofstream(odd) << "not a block";
  EXPECT_FALSE(b->Discover(H(3)));
  EXPECT_EQ(b->stats().entries, 1);
}

TEST_F(KvDiskStoreTest, FlippedPayloadByteIsQuarantinedAndAbsent) {
  auto store = OpenStore();
  ASSERT_TRUE(store->Write(H(1), H(0), Payload(1)).ok());
  const std::string path = store->PathOf(H(1));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kKvDiskHeaderBytes + 100);
    char c = static_cast<char>(Payload(1)[100] ^ 0x10);
    f.write(&c, 1);
  }
  std::vector<uint8_t> out(static_cast<size_t>(TestFormat().block_bytes), 0xAA);
  EXPECT_EQ(store->Read(H(1), out).code(), StatusCode::kNotFound);
  EXPECT_EQ(out, std::vector<uint8_t>(out.size(), 0));  // never the corrupted bytes
  EXPECT_FALSE(store->Contains(H(1)));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::exists(dir_ / "quarantine" / fs::path(path).filename()));
  KvDiskStats s = store->stats();
  EXPECT_EQ(s.quarantined, 1);
  EXPECT_EQ(s.entries, 0);
  EXPECT_EQ(s.bytes, 0);
  EXPECT_EQ(s.misses, 1);
}

TEST_F(KvDiskStoreTest, TruncatedFileIsQuarantinedAtOpen) {
  std::string path;
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Write(H(1), H(0), Payload(1)).ok());
    ASSERT_TRUE(store->Write(H(2), H(1), Payload(2)).ok());
    path = store->PathOf(H(1));
  }
  fs::resize_file(path, static_cast<uintmax_t>(FileBytes() - 1));
  auto store = OpenStore();
  EXPECT_FALSE(store->Contains(H(1)));
  EXPECT_TRUE(store->Contains(H(2)));
  EXPECT_EQ(store->stats().quarantined, 1);
  EXPECT_TRUE(fs::exists(dir_ / "quarantine" / fs::path(path).filename()));
}

TEST_F(KvDiskStoreTest, TruncatedInsideTheHeaderIsQuarantinedAtOpen) {
  std::string path;
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Write(H(1), H(0), Payload(1)).ok());
    path = store->PathOf(H(1));
  }
  fs::resize_file(path, 50);
  auto store = OpenStore();
  EXPECT_FALSE(store->Contains(H(1)));
  EXPECT_EQ(store->stats().quarantined, 1);
}

TEST_F(KvDiskStoreTest, BlocksOfAnotherFormatAreQuarantinedAtOpen) {
  KvDiskFormat other_model = TestFormat();
  other_model.model_fingerprint = "model-xyz";
  KvDiskFormat other_dtype = TestFormat();
  other_dtype.kv_dtype = "f32";
  other_dtype.block_bytes *= 2;
  KvDiskFormat other_block_size = TestFormat();
  other_block_size.block_size = 32;
  KvDiskFormat other_adapter = TestFormat();
  other_adapter.adapter_id = "lora-7";
  WriteWithFormat(other_model, 1);
  WriteWithFormat(other_dtype, 2);
  WriteWithFormat(other_block_size, 3);
  WriteWithFormat(other_adapter, 4);
  WriteWithFormat(TestFormat(), 5);

  auto store = OpenStore();
  EXPECT_EQ(store->stats().entries, 1);
  EXPECT_EQ(store->stats().quarantined, 4);
  for (uint64_t v = 1; v <= 4; ++v) EXPECT_FALSE(store->Contains(H(v))) << v;
  EXPECT_TRUE(store->Contains(H(5)));
  EXPECT_EQ(CountFiles(dir_ / "quarantine"), 4u);
}

TEST_F(KvDiskStoreTest, FutureVersionIsQuarantinedAtOpen) {
  std::string path;
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Write(H(1), H(0), Payload(1)).ok());
    path = store->PathOf(H(1));
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    const char version2[4] = {2, 0, 0, 0};
    f.write(version2, 4);
  }
  auto store = OpenStore();
  EXPECT_FALSE(store->Contains(H(1)));
  EXPECT_EQ(store->stats().quarantined, 1);
}

TEST_F(KvDiskStoreTest, LeftoverTempFilesAreDeletedAtOpen) {
  { auto store = OpenStore(); }
  // A dead writer's file (no pid is ever this large) and a file not named by the scheme.
  std::ofstream(dir_ / "tmp" / (H(1).ToHex() + ".999999999.0")) << "partial";
  std::ofstream(dir_ / "tmp" / "garbage") << "x";
  // This process's own in-flight writes (another store instance) are kept.
  const fs::path mine = dir_ / "tmp" / (H(2).ToHex() + "." + std::to_string(::getpid()) + ".7");
  std::ofstream(mine) << "in flight";
  auto store = OpenStore();
  EXPECT_EQ(CountFiles(dir_ / "tmp"), 1u);
  EXPECT_TRUE(fs::exists(mine));
  EXPECT_EQ(store->stats().entries, 0);
}

TEST_F(KvDiskStoreTest, LruEvictionKeepsTheMostRecentlyRead) {
  auto store = OpenStore(TestFormat(), 3 * FileBytes());
  std::vector<uint8_t> out(static_cast<size_t>(TestFormat().block_bytes));
  for (uint64_t v = 1; v <= 3; ++v) ASSERT_TRUE(store->Write(H(v), H(0), Payload(v)).ok());
  ASSERT_TRUE(store->Read(H(1), out).ok());  // 2 is now the least recently used
  ASSERT_TRUE(store->Write(H(4), H(0), Payload(4)).ok());
  EXPECT_TRUE(store->Contains(H(1)));
  EXPECT_FALSE(store->Contains(H(2)));
  EXPECT_FALSE(fs::exists(store->PathOf(H(2))));
  EXPECT_TRUE(store->Contains(H(3)));
  EXPECT_TRUE(store->Contains(H(4)));
  ASSERT_TRUE(store->Write(H(5), H(0), Payload(5)).ok());  // evicts 3
  EXPECT_FALSE(store->Contains(H(3)));
  KvDiskStats s = store->stats();
  EXPECT_EQ(s.evictions, 2);
  EXPECT_EQ(s.entries, 3);
  EXPECT_LE(s.bytes, 3 * FileBytes());
}

TEST_F(KvDiskStoreTest, OpenEvictsOldestFilesOverTheLimit) {
  {
    auto store = OpenStore();
    for (uint64_t v = 1; v <= 4; ++v) {
      ASSERT_TRUE(store->Write(H(v), H(0), Payload(v)).ok());
      fs::last_write_time(store->PathOf(H(v)),
                          fs::file_time_type::clock::now() - std::chrono::hours(10 - v));
    }
  }
  auto store = OpenStore(TestFormat(), 2 * FileBytes());
  EXPECT_EQ(store->stats().evictions, 2);
  EXPECT_FALSE(store->Contains(H(1)));
  EXPECT_FALSE(store->Contains(H(2)));
  EXPECT_TRUE(store->Contains(H(3)));
  EXPECT_TRUE(store->Contains(H(4)));
}

TEST_F(KvDiskStoreTest, FileDeletedBehindTheStoreIsAMiss) {
  auto store = OpenStore();
  ASSERT_TRUE(store->Write(H(1), H(0), Payload(1)).ok());
  fs::remove(store->PathOf(H(1)));
  std::vector<uint8_t> out(static_cast<size_t>(TestFormat().block_bytes));
  EXPECT_EQ(store->Read(H(1), out).code(), StatusCode::kNotFound);
  EXPECT_FALSE(store->Contains(H(1)));
  EXPECT_EQ(store->stats().quarantined, 0);
  EXPECT_EQ(store->stats().misses, 1);
  EXPECT_EQ(store->stats().bytes, 0);
  // It can be written again.
  ASSERT_TRUE(store->Write(H(1), H(0), Payload(1)).ok());
  EXPECT_TRUE(store->Read(H(1), out).ok());
}

TEST_F(KvDiskStoreTest, FileReplacedByAnotherBlockIsQuarantined) {
  auto store = OpenStore();
  ASSERT_TRUE(store->Write(H(1), H(0), Payload(1)).ok());
  ASSERT_TRUE(store->Write(H(2), H(0), Payload(2)).ok());
  fs::copy_file(store->PathOf(H(2)), store->PathOf(H(1)), fs::copy_options::overwrite_existing);
  std::vector<uint8_t> out(static_cast<size_t>(TestFormat().block_bytes));
  EXPECT_EQ(store->Read(H(1), out).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->stats().quarantined, 1);
  EXPECT_TRUE(store->Read(H(2), out).ok());
  EXPECT_EQ(out, Payload(2));
}

TEST_F(KvDiskStoreTest, WrongSizesAreInvalidArguments) {
  auto store = OpenStore();
  std::vector<uint8_t> small(10);
  EXPECT_EQ(store->Write(H(1), H(0), small).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Read(H(1), small).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->stats().writes, 0);
  EXPECT_EQ(store->stats().entries, 0);
}

TEST_F(KvDiskStoreTest, OpenRejectsAnInvalidFormat) {
  KvDiskFormat f = TestFormat();
  f.block_bytes = 0;
  EXPECT_EQ(KvDiskStore::Open(dir_.string(), f, 1 << 20).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(KvDiskStore::Open(dir_.string(), TestFormat(), -1).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(KvDiskStoreTest, WriteErrorIsCountedAndLeavesNoTempFile) {
  auto store = OpenStore();
  // A regular file where the shard directory should be: creating the temp file works, the rename
  // into the shard fails.
  std::ofstream(dir_ / H(1).ToHex().substr(0, 2)) << "in the way";
  Status s = store->Write(H(1), H(0), Payload(1));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(store->stats().write_errors, 1);
  EXPECT_FALSE(store->Contains(H(1)));
  EXPECT_EQ(CountFiles(dir_ / "tmp"), 0u);
}

TEST_F(KvDiskStoreTest, ConcurrentWritesAndReadsAreExactOrAbsent) {
  // Small enough that evictions race with reads too.
  auto store = OpenStore(TestFormat(), 12 * FileBytes());
  std::atomic<int> wrong{0};
  std::atomic<int> hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> out(static_cast<size_t>(TestFormat().block_bytes));
      for (int i = 0; i < 60; ++i) {
        // Half the hashes are shared by all threads, half are this thread's own.
        uint64_t v = i % 2 == 0 ? static_cast<uint64_t>(i % 10) : 1000 + t * 100 + i;
        if (!store->Write(H(v), H(0), Payload(v)).ok()) ++wrong;
        uint64_t r = i % 3 == 0 ? static_cast<uint64_t>((i + t) % 10) : v;
        Status s = store->Read(H(r), out);
        if (s.ok()) {
          ++hits;
          if (out != Payload(r)) ++wrong;
        } else if (s.code() != StatusCode::kNotFound) {
          ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(hits.load(), 0);
  KvDiskStats s = store->stats();
  EXPECT_LE(s.bytes, 12 * FileBytes());
  EXPECT_EQ(s.quarantined, 0);
  EXPECT_EQ(s.write_errors, 0);
  EXPECT_EQ(CountFiles(dir_ / "tmp"), 0u);
  // Every indexed block is readable and exact.
  std::vector<uint8_t> out(static_cast<size_t>(TestFormat().block_bytes));
  int checked = 0;
  for (uint64_t v = 0; v < 2000; ++v) {
    if (!store->Contains(H(v))) continue;
    ++checked;
    ASSERT_TRUE(store->Read(H(v), out).ok()) << v;
    EXPECT_EQ(out, Payload(v));
  }
  EXPECT_EQ(checked, s.entries);
}

TEST(KvDiskHeaderTest, EncodeParseRoundTrip) {
  KvDiskHeader h;
  h.hash = H(7);
  h.parent = H(6);
  h.format = TestFormat();
  h.format.adapter_id = "lora";
  h.payload_bytes = h.format.block_bytes;
  h.payload_xxh3 = BlockHash{1, 2};
  std::string bytes = EncodeKvDiskHeader(h);
  ASSERT_EQ(static_cast<int64_t>(bytes.size()), kKvDiskHeaderBytes);
  auto parsed = ParseKvDiskHeader(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->hash, h.hash);
  EXPECT_EQ(parsed->parent, h.parent);
  EXPECT_EQ(parsed->payload_xxh3, h.payload_xxh3);
  EXPECT_EQ(parsed->payload_bytes, h.payload_bytes);
  EXPECT_EQ(parsed->header_bytes, kKvDiskHeaderBytes);
  EXPECT_EQ(parsed->format, h.format);
}

TEST(KvDiskHeaderTest, RejectsDamagedHeaders) {
  KvDiskHeader h;
  h.format = TestFormat();
  h.payload_bytes = h.format.block_bytes;
  const std::string good = EncodeKvDiskHeader(h);
  auto parse = [](const std::string& s) {
    return ParseKvDiskHeader(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  };
  EXPECT_EQ(parse("").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(parse("LOOMKVB2" + good.substr(8)).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(parse(good.substr(0, 100)).status().code(), StatusCode::kDataLoss);
  std::string future = good;
  future[8] = 2;
  EXPECT_EQ(parse(future).status().code(), StatusCode::kUnimplemented);
  for (size_t i : {12u, 20u, 50u, 75u, 90u, 100u}) {  // any bit of the fields: checksum mismatch
    std::string flipped = good;
    flipped[i] = static_cast<char>(flipped[i] ^ 1);
    EXPECT_EQ(parse(flipped).status().code(), StatusCode::kDataLoss) << i;
  }
  std::string long_string = good;
  long_string[96 + 3] = 0x7f;  // the first string's length: 2 GiB
  EXPECT_EQ(parse(long_string).status().code(), StatusCode::kDataLoss);
}

TEST(KvDiskHeaderTest, FormatMismatchNamesTheField) {
  KvDiskFormat other = TestFormat();
  other.kv_dtype = "f32";
  Status s = CheckKvDiskFormat(TestFormat(), other);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("kv_dtype"), std::string::npos) << s.message();
  EXPECT_TRUE(CheckKvDiskFormat(TestFormat(), TestFormat()).ok());
}

}  // namespace
}  // namespace loom
