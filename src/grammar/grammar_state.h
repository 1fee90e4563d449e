// GrammarState: one request's constrained-decoding state: a GrammarMatcher plus the vocabulary
// that maps token ids to bytes. The engine calls FillMask before sampling and AcceptToken after.
// FillMask answers from, in order: the masks of recently seen exact states (per request), a
// partial mask of the truncated state (PartialMaskCache, shareable between requests on one
// grammar), a full trie walk. Not thread-safe; the vocabulary must outlive it.
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/token_mask.h"

namespace loom {

// Partial masks (TokenVocabulary::PartialMask) by truncated state signature, for one grammar and
// one vocabulary: the inside of a JSON string has one truncated signature wherever the string
// is, so after the second sighting its mask costs only a walk of the tokens that contain a `"`
// (or another way out of the string). A partial mask is built on a signature's second sighting
// (a one-off state is cheaper walked directly). LRU of `capacity` entries, each ~mask_words() * 4
// + trie nodes bytes (~350 KB for a 150k vocabulary). Thread-safe: can be shared by the states of
// every request on the same grammar and vocabulary.
class PartialMaskCache {
 public:
  explicit PartialMaskCache(size_t capacity) : capacity_(capacity) {}
  // The partial mask for `signature`, or null (first sighting, or capacity 0); `build` makes it.
  template <typename Build>
  std::shared_ptr<const TokenVocabulary::PartialMask> Get(const std::vector<int32_t>& signature,
                                                          Build build);

 private:
  struct Entry {
    std::vector<int32_t> signature;
    std::shared_ptr<const TokenVocabulary::PartialMask> partial;  // null: seen once
  };
  const size_t capacity_;
  std::mutex mu_;
  std::vector<Entry> entries_;  // most recently used last
};

class GrammarState {
 public:
  // `mask_cache_entries`: how many masks to remember by exact state signature (vocab_size / 8
  // bytes each; 0 = none). Inside a free string the exact state repeats every token, and a hit
  // is a copy (~6 us for 150k tokens against ~20-200 us through a partial mask).
  GrammarState(std::shared_ptr<const CompiledGrammar> grammar, const TokenVocabulary* vocab,
               size_t mask_cache_entries = 4,
               std::shared_ptr<PartialMaskCache> partial_masks = nullptr);

  // Applies token `id` and returns true, or returns false and changes nothing when the grammar
  // does not allow it (a never-allowed token, bytes the grammar rejects, EOS before the document
  // is complete). An accepted EOS terminates the state.
  bool AcceptToken(TokenId id);
  // The mask of the tokens AcceptToken would accept (all zero once terminated). Mutates only the
  // mask cache.
  void FillMask(uint32_t* bitmask) const;
  // Words of the bitmask FillMask writes (the vocabulary's mask_words()).
  size_t mask_words() const { return vocab_->mask_words(); }
  // EOS was accepted.
  bool IsTerminated() const { return terminated_; }
  // Undoes the last `num_tokens` accepted tokens (speculative decoding, or a rejected draft).
  // Precondition: num_tokens <= num_accepted_tokens().
  void RollbackTokens(size_t num_tokens);
  size_t num_accepted_tokens() const { return checkpoints_.size(); }
  const GrammarMatcher& matcher() const { return matcher_; }
  // FillMask calls answered from the mask cache (diagnostics, tests).
  uint64_t mask_cache_hits() const { return mask_cache_hits_; }

 private:
  // FillMask without the exact-state cache: through a partial mask when one applies.
  void FillMaskUncached(uint32_t* bitmask) const;

  GrammarMatcher matcher_;
  const TokenVocabulary* vocab_;
  std::vector<size_t> checkpoints_;  // matcher checkpoint before each accepted token
  bool terminated_ = false;
  struct CachedMask {
    std::vector<int32_t> signature;  // GrammarMatcher::AppendStateSignature
    std::vector<uint32_t> mask;      // [vocab_->mask_words()]
  };
  size_t mask_cache_entries_;
  mutable std::vector<CachedMask> mask_cache_;        // most recently used last
  mutable std::vector<int32_t> signature_;            // scratch: the exact state signature
  mutable std::vector<int32_t> truncated_signature_;  // scratch
  mutable uint64_t mask_cache_hits_ = 0;
  std::shared_ptr<PartialMaskCache> partial_masks_;
};

template <typename Build>
std::shared_ptr<const TokenVocabulary::PartialMask> PartialMaskCache::Get(
    const std::vector<int32_t>& signature, Build build) {
  if (capacity_ == 0) return nullptr;
  std::unique_lock<std::mutex> lock(mu_);
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].signature != signature) continue;
    std::rotate(entries_.begin() + i, entries_.begin() + i + 1, entries_.end());
    if (entries_.back().partial == nullptr) {
      lock.unlock();  // build outside the lock: it is a whole trie walk
      auto partial = std::make_shared<const TokenVocabulary::PartialMask>(build());
      lock.lock();
      for (Entry& e : entries_) {
        if (e.signature == signature) e.partial = partial;
      }
      return partial;
    }
    return entries_.back().partial;
  }
  if (entries_.size() == capacity_) entries_.erase(entries_.begin());
  entries_.push_back({signature, nullptr});
  return nullptr;
}

}  // namespace loom
