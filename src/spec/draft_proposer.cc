#include "spec/draft_proposer.h"

#include <algorithm>

namespace loom {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t ReplayProposer::Hash(std::span<const TokenId> tokens) {
  uint64_t h = Mix(tokens.size());
  for (TokenId t : tokens) h = Mix(h ^ static_cast<uint32_t>(t));
  return h;
}

void ReplayProposer::Record(std::span<const TokenId> prompt, std::vector<TokenId> continuation) {
  recorded_[Hash(prompt)] = std::move(continuation);
}

std::vector<TokenId> ReplayProposer::Propose(std::span<const TokenId> tokens, int num_prompt,
                                             int max_draft) {
  if (max_draft <= 0 || num_prompt <= 0 || static_cast<size_t>(num_prompt) > tokens.size()) {
    return {};
  }
  const uint64_t key = Hash(tokens.first(static_cast<size_t>(num_prompt)));
  const auto it = recorded_.find(key);
  if (it == recorded_.end()) return {};
  const std::vector<TokenId>& rec = it->second;
  const std::span<const TokenId> out = tokens.subspan(static_cast<size_t>(num_prompt));
  if (out.size() >= rec.size() || !std::equal(out.begin(), out.end(), rec.begin())) return {};
  const size_t from = out.size();
  const size_t n = std::min(rec.size() - from, static_cast<size_t>(max_draft));
  std::vector<TokenId> draft(rec.begin() + static_cast<ptrdiff_t>(from),
                             rec.begin() + static_cast<ptrdiff_t>(from + n));
  for (size_t j = 0; j < n; ++j) {
    const uint64_t r = Mix(key ^ Mix(seed_ ^ (from + j)));
    const double u = static_cast<double>(r >> 11) * 0x1.0p-53;  // uniform in [0, 1)
    if (u >= accept_ && vocab_size_ > 1) {
      draft[j] = static_cast<TokenId>(
          (draft[j] + 1 + static_cast<int>(r % static_cast<uint64_t>(vocab_size_ - 1))) %
          vocab_size_);  // any id but the recorded one
    }
  }
  return draft;
}

}  // namespace loom
