#include "kv/block_pool.h"

#include "base/check.h"

namespace loom {

BlockPool::BlockPool(int num_blocks) {
  CHECK_GT(num_blocks, 0) << "a BlockPool needs at least one block";
  blocks_.resize(num_blocks);
  for (BlockId b = 0; b < num_blocks; ++b) PushBack(b);
}

void BlockPool::CheckValid(BlockId block) const {
  CHECK(block >= 0 && block < num_blocks())
      << "block id " << block << " out of [0, " << num_blocks() << ")";
}

void BlockPool::PushBack(BlockId block) {
  Block& b = blocks_[block];
  CHECK(!b.in_free_queue) << "block " << block << " already free";
  b.prev = tail_;
  b.next = kNone;
  if (tail_ != kNone) {
    blocks_[tail_].next = block;
  } else {
    head_ = block;
  }
  tail_ = block;
  b.in_free_queue = true;
  ++num_free_;
}

void BlockPool::Unlink(BlockId block) {
  Block& b = blocks_[block];
  CHECK(b.in_free_queue) << "block " << block << " is not in the free queue";
  if (b.prev != kNone) {
    blocks_[b.prev].next = b.next;
  } else {
    head_ = b.next;
  }
  if (b.next != kNone) {
    blocks_[b.next].prev = b.prev;
  } else {
    tail_ = b.prev;
  }
  b.prev = b.next = kNone;
  b.in_free_queue = false;
  --num_free_;
}

int BlockPool::num_cached_free_blocks() const {
  int n = 0;
  for (const auto& [hash, block] : cached_) n += blocks_[block].ref_count == 0;
  return n;
}

std::optional<std::vector<BlockId>> BlockPool::Allocate(int num) {
  CHECK_GE(num, 0);
  if (num > num_free_) return std::nullopt;
  std::vector<BlockId> out;
  out.reserve(num);
  for (int i = 0; i < num; ++i) {
    BlockId id = head_;
    Unlink(id);
    Block& b = blocks_[id];
    if (b.hash.has_value()) {
      auto it = cached_.find(*b.hash);
      CHECK(it != cached_.end() && it->second == id) << "hashed block " << id << " not in map";
      cached_.erase(it);
      b.hash.reset();
      ++num_evictions_;
    }
    b.ref_count = 1;
    out.push_back(id);
  }
  return out;
}

void BlockPool::Touch(std::span<const BlockId> blocks) {
  for (BlockId id : blocks) {
    CheckValid(id);
    Block& b = blocks_[id];
    if (b.ref_count == 0) Unlink(id);
    ++b.ref_count;
  }
}

void BlockPool::Free(std::span<const BlockId> blocks) {
  for (BlockId id : blocks) {
    CheckValid(id);
    Block& b = blocks_[id];
    CHECK_GT(b.ref_count, 0) << "double free of block " << id;
    if (--b.ref_count == 0) PushBack(id);
  }
}

std::optional<BlockId> BlockPool::LookupCached(const BlockHash& hash) const {
  auto it = cached_.find(hash);
  if (it == cached_.end()) return std::nullopt;
  return it->second;
}

bool BlockPool::CacheBlock(BlockId block, const BlockHash& hash, const BlockHash& parent) {
  CheckValid(block);
  Block& b = blocks_[block];
  CHECK_GT(b.ref_count, 0) << "caching free block " << block;
  CHECK(!b.hash.has_value()) << "block " << block << " is already hashed";
  auto [it, inserted] = cached_.emplace(hash, block);
  if (!inserted) return false;
  b.hash = hash;
  b.parent = parent;
  return true;
}

const BlockHash& BlockPool::block_parent(BlockId block) const {
  CheckValid(block);
  return blocks_[block].parent;
}

const std::optional<BlockHash>& BlockPool::block_hash(BlockId block) const {
  CheckValid(block);
  return blocks_[block].hash;
}

int BlockPool::ref_count(BlockId block) const {
  CheckValid(block);
  return blocks_[block].ref_count;
}

std::vector<BlockId> BlockPool::FreeQueue() const {
  std::vector<BlockId> out;
  for (BlockId id = head_; id != kNone; id = blocks_[id].next) out.push_back(id);
  return out;
}

void BlockPool::CheckIntegrity() const {
  // Walk the free queue: every entry free, linked both ways, seen once.
  std::vector<char> seen(blocks_.size(), 0);
  int walked = 0;
  BlockId prev = kNone;
  for (BlockId id = head_; id != kNone; id = blocks_[id].next) {
    CheckValid(id);
    CHECK(!seen[id]) << "free queue has a cycle at block " << id;
    seen[id] = 1;
    const Block& b = blocks_[id];
    CHECK(b.in_free_queue) << "block " << id << " linked but not flagged free";
    CHECK_EQ(b.ref_count, 0) << "block " << id << " in the free queue is referenced";
    CHECK_EQ(b.prev, prev) << "broken back link at block " << id;
    prev = id;
    ++walked;
  }
  CHECK_EQ(prev, tail_) << "free queue tail mismatch";
  CHECK_EQ(walked, num_free_) << "free-queue length vs counter";
  int used = 0;
  int hashed = 0;
  for (BlockId id = 0; id < num_blocks(); ++id) {
    const Block& b = blocks_[id];
    CHECK_GE(b.ref_count, 0);
    if (b.ref_count > 0) {
      ++used;
      CHECK(!b.in_free_queue) << "used block " << id << " in the free queue";
    } else {
      CHECK(seen[id]) << "free block " << id << " missing from the free queue";
    }
    if (b.hash.has_value()) {
      ++hashed;
      auto it = cached_.find(*b.hash);
      CHECK(it != cached_.end() && it->second == id) << "hashed block " << id << " not mapped";
    }
  }
  CHECK_EQ(used + num_free_, num_blocks()) << "free + used != total";
  CHECK_EQ(hashed, static_cast<int>(cached_.size())) << "map entries without a hashed block";
}

}  // namespace loom
