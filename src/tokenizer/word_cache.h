// WordCache: a bounded, thread-safe word -> ids memo for the BPE-style models (natural text
// repeats a small set of words, so most words skip the merge loop). Sharded mutexes keep
// concurrent Encode calls from serializing on one lock; a full shard is simply cleared.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

#include "tokenizer/model.h"

namespace loom {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 64;  // longer words are not cached

  // Appends the cached ids of `word` to *ids and returns true, or returns false on a miss.
  bool Lookup(std::string_view word, std::vector<int32_t>* ids) const {
    Shard& s = ShardFor(word);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(word);
    if (it == s.map.end()) return false;
    ids->insert(ids->end(), it->second.begin(), it->second.end());
    return true;
  }
  // Remembers ids for `word` (no-op for long words).
  void Insert(std::string_view word, const int32_t* ids, size_t n) const {
    if (word.size() > kMaxWordBytes) return;
    Shard& s = ShardFor(word);
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.map.size() >= kMaxEntriesPerShard) s.map.clear();
    s.map.emplace(std::string(word), std::vector<int32_t>(ids, ids + n));
  }

 private:
  static constexpr size_t kNumShards = 16;
  static constexpr size_t kMaxEntriesPerShard = 4096;
  struct Shard {
    std::mutex mu;
    StringMap<std::vector<int32_t>> map;
  };
  Shard& ShardFor(std::string_view word) const { return shards_[StringHash{}(word) % kNumShards]; }
  mutable std::array<Shard, kNumShards> shards_;
};

}  // namespace loom
