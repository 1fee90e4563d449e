// MaskCache: token masks of grammar states, shared by the requests of one vocabulary.
//
// Requests under one compiled grammar (a client's tool set, its response_format) pass through
// the same states, and under tool_choice auto's lazy grammar every row of a batch sits in the
// same free-text state step after step. A mask depends only on (grammar, exact state): the
// GrammarMatcher's state signature determines what it accepts. So the first request to meet a
// state computes its mask and every other finds it here, and the rows that share a state share
// one mask's storage, which lets a device batch upload that mask once (CudaBackend::MaskLogits
// dedupes by address).
//
// An entry holds its grammar, so the grammar's address (half of the key) cannot be reused while
// the entry lives. LRU-bounded by entries (vocab_size / 8 bytes each). Thread-safe: one mutex
// around the map; masks are computed outside it (two threads missing on one state both compute
// it, and the first insert wins; both masks are equal).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "grammar/compiled_grammar.h"

namespace loom {

class MaskCache {
 public:
  // An immutable mask: bit i of word i/32 set when token i may be sampled.
  using Mask = std::shared_ptr<const std::vector<uint32_t>>;

  // Keeps at most `capacity` masks; 0 keeps none (Find misses, Insert returns its argument).
  explicit MaskCache(size_t capacity);

  // The mask of `grammar` in the state with `signature` (GrammarMatcher::AppendStateSignature,
  // of the state the mask was computed for), or null. Marks it most recently used.
  Mask Find(const std::shared_ptr<const CompiledGrammar>& grammar,
            const std::vector<int32_t>& signature);
  // Stores `mask` for (grammar, signature) and returns the cached mask: `mask`, or the one a
  // concurrent caller stored first. Evicts the least recently used entry past the capacity.
  Mask Insert(const std::shared_ptr<const CompiledGrammar>& grammar,
              const std::vector<int32_t>& signature, Mask mask);

  size_t size() const;
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct Entry {
    std::shared_ptr<const CompiledGrammar> grammar;
    std::vector<int32_t> signature;
    uint64_t hash = 0;
    Mask mask;
  };
  using Lru = std::list<Entry>;
  static uint64_t Hash(const CompiledGrammar* grammar, const std::vector<int32_t>& signature);
  // The entry of (grammar, signature) with `hash`, or lru_.end(). Requires mu_.
  Lru::iterator Lookup(const CompiledGrammar* grammar, const std::vector<int32_t>& signature,
                       uint64_t hash);

  const size_t capacity_;
  mutable std::mutex mu_;
  Lru lru_;  // front = most recently used
  std::unordered_multimap<uint64_t, Lru::iterator> index_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace loom
