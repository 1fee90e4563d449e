// GrammarState: one request's constrained-decoding state: a GrammarMatcher plus the vocabulary
// that maps token ids to bytes. The engine calls FillMask before sampling and AcceptToken after.
// Mask answers from the masks of recently seen exact states, then from the MaskCache shared with
// other requests (mask_cache.h: rows in one state get one mask's storage), else through the
// request's MaskDfa (mask_dfa.h; it persists across masks, so a state met before costs no grammar
// steps). Not thread-safe; the vocabulary and the shared cache must outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "grammar/mask_cache.h"
#include "grammar/mask_dfa.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"

namespace loom {

class GrammarState {
 public:
  // `mask_cache_entries`: how many masks to remember by exact state signature (vocab_size / 8
  // bytes each; 0 = none). Inside a free string the exact state repeats every token, and a hit
  // is a copy (~6 us for 150k tokens). `max_dfa_states` bounds the MaskDfa (~0.5 KB a state).
  // `shared` (null: none) is consulted on a miss and given every mask computed here.
  static constexpr size_t kDefaultMaskCacheEntries = 4, kDefaultMaxDfaStates = 4096;
  GrammarState(std::shared_ptr<const CompiledGrammar> grammar, const TokenVocabulary* vocab,
               size_t mask_cache_entries = kDefaultMaskCacheEntries,
               size_t max_dfa_states = kDefaultMaxDfaStates, MaskCache* shared = nullptr);

  // Applies token `id` and returns true, or returns false and changes nothing when the grammar
  // does not allow it (a never-allowed token, bytes the grammar rejects, EOS before the document
  // is complete). An accepted EOS terminates the state.
  bool AcceptToken(TokenId id);
  // The mask of the tokens AcceptToken would accept (all zero once terminated), mask_words()
  // words in this state's or the shared cache's storage: valid until the next Mask / FillMask call
  // (a cached mask is not copied; rows in one state of one grammar get the same address).
  // Mutates only the caches.
  std::span<const uint32_t> Mask() const;
  // Mask() copied into bitmask[0, mask_words()).
  void FillMask(uint32_t* bitmask) const;
  // Words of the bitmask FillMask writes (the vocabulary's mask_words()).
  size_t mask_words() const { return vocab_->mask_words(); }
  // Jump-forward: accepts the tokens of the text the grammar forces next (the bytes every document
  // it still allows continues with) and returns them, at most `max_tokens`. The forced text is
  // tokenized longest token first, and its last token is left to the model, so that a sampled
  // token may cross the end of the forced text the way the model spells it (`":"` then `"J`),
  // which a fixed boundary would forbid. Returns nothing when less than two tokens are forced,
  // when the document may end here (EOS is a choice), or once terminated.
  std::vector<TokenId> JumpForward(size_t max_tokens);
  // EOS was accepted.
  bool IsTerminated() const { return terminated_; }
  // Undoes the last `num_tokens` accepted tokens (speculative decoding, or a rejected draft).
  // Precondition: num_tokens <= num_accepted_tokens().
  void RollbackTokens(size_t num_tokens);
  size_t num_accepted_tokens() const { return checkpoints_.size(); }
  const GrammarMatcher& matcher() const { return matcher_; }
  // Mask calls answered from this state's own mask cache, and from the shared one (diagnostics,
  // tests).
  uint64_t mask_cache_hits() const { return mask_cache_hits_; }
  uint64_t shared_mask_hits() const { return shared_mask_hits_; }

 private:
  GrammarMatcher matcher_;
  const TokenVocabulary* vocab_;
  std::vector<size_t> checkpoints_;  // matcher checkpoint before each accepted token
  bool terminated_ = false;
  struct CachedMask {
    std::vector<int32_t> signature;  // GrammarMatcher::AppendStateSignature
    MaskCache::Mask mask;            // [vocab_->mask_words()]
  };
  MaskCache* shared_;
  size_t mask_cache_entries_;
  mutable std::vector<CachedMask> mask_cache_;  // most recently used last
  mutable std::vector<int32_t> signature_;      // scratch: the exact state signature
  mutable MaskCache::Mask last_;                // what Mask() returned last (keeps it alive)
  mutable MaskCache::Mask zeros_;               // the mask once terminated
  mutable uint64_t mask_cache_hits_ = 0, shared_mask_hits_ = 0;
  mutable MaskDfa dfa_;
};

}  // namespace loom
