// The n-gram proposer of speculative decoding (prompt lookup): the request's own tokens (prompt and
// output) are searched for an earlier occurrence of their last n tokens, longest n first
// (ngram_max down to ngram_min), the most recent occurrence followed by a full draft first; the
// tokens that followed it are the draft. No weights, no device work: agents editing code repeat
// long stretches of their context, which this finds. Pure function of the tokens, deterministic.
#pragma once

#include <span>
#include <vector>

#include "base/ids.h"

namespace loom {

struct NgramConfig {
  int ngram_min = 1;  // --ngram-min
  int ngram_max = 3;  // --ngram-max
  // Search at most this many tokens back from the end (0: all). Keeps a step's proposals
  // O(rows x window) on long contexts.
  int window = 0;
};

// Up to max_draft tokens following an earlier match of the longest matching suffix n-gram
// (ngram_max >= n >= ngram_min) of `tokens`: the most recent match followed by max_draft tokens,
// else the one followed by the most. Empty when none matches or max_draft <= 0.
std::vector<TokenId> ProposeNgram(std::span<const TokenId> tokens, const NgramConfig& config,
                                  int max_draft);

}  // namespace loom
