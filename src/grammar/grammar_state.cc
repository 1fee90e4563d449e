#include "grammar/grammar_state.h"

#include <cstring>

namespace loom {

GrammarState::GrammarState(std::shared_ptr<const CompiledGrammar> grammar,
                           const TokenVocabulary* vocab)
    : matcher_(std::move(grammar)), vocab_(vocab) {
  CHECK(vocab_ != nullptr);
}

bool GrammarState::AcceptToken(TokenId id) {
  if (terminated_ || id < 0 || id >= vocab_->size()) return false;
  const size_t cp = matcher_.Checkpoint();
  if (vocab_->IsEos(id)) {
    if (!matcher_.IsAccepting()) return false;
    terminated_ = true;
  } else if (vocab_->IsNeverAllowed(id) || !matcher_.AcceptBytes(vocab_->token_bytes(id))) {
    return false;
  }
  checkpoints_.push_back(cp);
  return true;
}

void GrammarState::FillMask(uint32_t* bitmask) const {
  if (terminated_) {
    std::memset(bitmask, 0, vocab_->mask_words() * sizeof(uint32_t));
    return;
  }
  vocab_->FillMask(matcher_, bitmask);
}

void GrammarState::RollbackTokens(size_t num_tokens) {
  CHECK_LE(num_tokens, checkpoints_.size());
  if (num_tokens == 0) return;
  const size_t cp = checkpoints_[checkpoints_.size() - num_tokens];
  checkpoints_.resize(checkpoints_.size() - num_tokens);
  matcher_.Rollback(cp);
  terminated_ = false;
}

}  // namespace loom
