// GrammarState: one request's constrained-decoding state: a GrammarMatcher plus the vocabulary
// that maps token ids to bytes. The engine calls FillMask before sampling and AcceptToken after.
// Not thread-safe; the vocabulary must outlive it.
#pragma once

#include <memory>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/token_mask.h"

namespace loom {

class GrammarState {
 public:
  GrammarState(std::shared_ptr<const CompiledGrammar> grammar, const TokenVocabulary* vocab);

  // Applies token `id` and returns true, or returns false and changes nothing when the grammar
  // does not allow it (a never-allowed token, bytes the grammar rejects, EOS before the document
  // is complete). An accepted EOS terminates the state.
  bool AcceptToken(TokenId id);
  // The mask of the tokens AcceptToken would accept (all zero once terminated).
  void FillMask(uint32_t* bitmask) const;
  // EOS was accepted.
  bool IsTerminated() const { return terminated_; }
  // Undoes the last `num_tokens` accepted tokens (speculative decoding, or a rejected draft).
  // Precondition: num_tokens <= num_accepted_tokens().
  void RollbackTokens(size_t num_tokens);
  size_t num_accepted_tokens() const { return checkpoints_.size(); }
  const GrammarMatcher& matcher() const { return matcher_; }

 private:
  GrammarMatcher matcher_;
  const TokenVocabulary* vocab_;
  std::vector<size_t> checkpoints_;  // matcher checkpoint before each accepted token
  bool terminated_ = false;
};

}  // namespace loom
