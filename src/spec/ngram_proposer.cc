#include "spec/ngram_proposer.h"

#include <algorithm>

namespace loom {

std::vector<TokenId> ProposeNgram(std::span<const TokenId> tokens, const NgramConfig& config,
                                  int max_draft) {
  const int len = static_cast<int>(tokens.size());
  if (max_draft <= 0) return {};
  const int lowest = config.window > 0 ? std::max(0, len - config.window) : 0;
  for (int n = std::min(config.ngram_max, len - 1); n >= std::max(config.ngram_min, 1); --n) {
    const std::span<const TokenId> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Matches latest first (one may overlap the suffix: a repeated token matches one position
    // back, never the suffix itself); the first that is followed by max_draft tokens wins, else
    // the one followed by the most.
    int best_from = -1, best_count = 0;
    for (int start = len - n - 1; start >= lowest; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int from = start + n;  // the tokens that followed the match
      const int count = std::min(max_draft, len - from);
      if (count > best_count) {
        best_from = from;
        best_count = count;
      }
      if (count == max_draft) break;
    }
    if (best_count > 0) {
      return std::vector<TokenId>(tokens.begin() + best_from,
                                  tokens.begin() + best_from + best_count);
    }
  }
  return {};
}

}  // namespace loom
