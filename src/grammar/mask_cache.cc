#include "grammar/mask_cache.h"

#include <utility>

namespace loom {

MaskCache::MaskCache(size_t capacity) : capacity_(capacity) {}

uint64_t MaskCache::Hash(const CompiledGrammar* grammar, const std::vector<int32_t>& signature) {
  uint64_t h = 0xcbf29ce484222325ull ^ reinterpret_cast<uintptr_t>(grammar);  // FNV-1a
  for (int32_t v : signature) h = (h ^ static_cast<uint32_t>(v)) * 0x100000001b3ull;
  return h;
}

MaskCache::Lru::iterator MaskCache::Lookup(const CompiledGrammar* grammar,
                                           const std::vector<int32_t>& signature, uint64_t hash) {
  auto [it, end] = index_.equal_range(hash);
  for (; it != end; ++it) {
    const Entry& e = *it->second;
    if (e.grammar.get() == grammar && e.signature == signature) return it->second;
  }
  return lru_.end();
}

MaskCache::Mask MaskCache::Find(const std::shared_ptr<const CompiledGrammar>& grammar,
                                const std::vector<int32_t>& signature) {
  const uint64_t hash = Hash(grammar.get(), signature);
  std::lock_guard<std::mutex> lock(mu_);
  const Lru::iterator it = Lookup(grammar.get(), signature, hash);
  if (it == lru_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it);
  return it->mask;
}

MaskCache::Mask MaskCache::Insert(const std::shared_ptr<const CompiledGrammar>& grammar,
                                  const std::vector<int32_t>& signature, Mask mask) {
  if (capacity_ == 0) return mask;
  const uint64_t hash = Hash(grammar.get(), signature);
  std::lock_guard<std::mutex> lock(mu_);
  if (const Lru::iterator it = Lookup(grammar.get(), signature, hash); it != lru_.end()) {
    lru_.splice(lru_.begin(), lru_, it);
    return it->mask;
  }
  lru_.push_front(Entry{grammar, signature, hash, std::move(mask)});
  index_.emplace(hash, lru_.begin());
  if (lru_.size() > capacity_) {
    const Entry& old = lru_.back();
    auto [it, end] = index_.equal_range(old.hash);
    for (; it != end; ++it) {
      if (it->second == std::prev(lru_.end())) {
        index_.erase(it);
        break;
      }
    }
    lru_.pop_back();
  }
  return lru_.front().mask;
}

size_t MaskCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

uint64_t MaskCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

uint64_t MaskCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace loom
