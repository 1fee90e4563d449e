#include "grammar/grammar_state.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace loom {

GrammarState::GrammarState(std::shared_ptr<const CompiledGrammar> grammar,
                           const TokenVocabulary* vocab, size_t mask_cache_entries,
                           size_t max_dfa_states, MaskCache* shared)
    : matcher_(grammar),
      vocab_(vocab),
      shared_(shared),
      mask_cache_entries_(mask_cache_entries),
      dfa_(std::move(grammar), max_dfa_states) {
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

std::span<const uint32_t> GrammarState::Mask() const {
  const size_t words = vocab_->mask_words();
  if (terminated_) {
    if (zeros_ == nullptr) zeros_ = std::make_shared<const std::vector<uint32_t>>(words, 0u);
    last_ = zeros_;
    return *last_;
  }
  // Under long counts (maxLength 10000) the state the mask sees is the canonical one, which
  // repeats character after character: the mask cache hits and the DFA stays small.
  const GrammarMatcher* m = &matcher_;
  std::optional<GrammarMatcher> canonical;
  if (matcher_.grammar()->has_count_chains()) {
    canonical.emplace(matcher_.ForkCanonical(vocab_->max_token_bytes()));
    m = &*canonical;
  }
  signature_.clear();
  m->AppendStateSignature(&signature_);
  for (size_t i = 0; i < mask_cache_.size(); ++i) {
    if (mask_cache_[i].signature != signature_) continue;
    std::rotate(mask_cache_.begin() + i, mask_cache_.begin() + i + 1, mask_cache_.end());
    ++mask_cache_hits_;
    last_ = mask_cache_.back().mask;
    return *last_;
  }
  MaskCache::Mask mask;
  if (shared_ != nullptr) mask = shared_->Find(matcher_.grammar(), signature_);
  if (mask != nullptr) {
    ++shared_mask_hits_;
  } else {
    auto fresh = std::make_shared<std::vector<uint32_t>>(words);
    vocab_->FillMask(*m, signature_, &dfa_, fresh->data());
    mask = std::move(fresh);
    if (shared_ != nullptr) mask = shared_->Insert(matcher_.grammar(), signature_, std::move(mask));
  }
  if (mask_cache_entries_ > 0) {
    if (mask_cache_.size() == mask_cache_entries_) mask_cache_.erase(mask_cache_.begin());
    mask_cache_.push_back(CachedMask{signature_, mask});
  }
  last_ = std::move(mask);
  return *last_;
}

void GrammarState::FillMask(uint32_t* bitmask) const {
  const std::span<const uint32_t> mask = Mask();
  std::copy(mask.begin(), mask.end(), bitmask);
}

std::vector<TokenId> GrammarState::JumpForward(size_t max_tokens) {
  if (terminated_ || max_tokens == 0) return {};
  // The forced bytes: while exactly one byte may follow and the document cannot end here. Capped:
  // a forced run longer than this is rare (a long const) and goes on in the next step.
  constexpr size_t kMaxForcedBytes = 256;
  std::string forced;
  GrammarMatcher m = matcher_.Fork();
  while (forced.size() < kMaxForcedBytes && !m.IsAccepting()) {
    const ByteSet& next = m.NextBytes();
    int count = 0, only = -1;
    for (int w = 0; w < 4 && count < 2; ++w) {
      const uint64_t bits = next.word(w);
      count += std::popcount(bits);
      if (bits != 0) only = 64 * w + std::countr_zero(bits);
    }
    if (count != 1) break;
    forced.push_back(static_cast<char>(only));
    CHECK(m.AcceptByte(static_cast<uint8_t>(only)));
  }
  std::vector<TokenId> tokens;
  for (size_t at = 0; at < forced.size();) {
    const auto [id, len] = vocab_->LongestTokenPrefix(std::string_view(forced).substr(at));
    if (id < 0) break;  // no token spells these bytes: the model samples from here
    tokens.push_back(id);
    at += len;
  }
  if (tokens.size() < 2) return {};
  tokens.pop_back();  // left to the model
  if (tokens.size() > max_tokens) tokens.resize(max_tokens);
  for (TokenId t : tokens) {
    CHECK(AcceptToken(t)) << "jump-forward token " << t << " is outside the forced text";
  }
  return tokens;
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
