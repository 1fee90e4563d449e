// Request: what the server hands the engine — token ids, sampling parameters and cache keys.
#pragma once

#include <string>
#include <vector>

#include "base/ids.h"
#include "sample/sampling_params.h"

namespace loom {

struct Request {
  std::vector<TokenId> prompt;  // token ids after templating and tokenization; non-empty
  SamplingParams params;        // incl. max_tokens, min_tokens, stop ids, seed, logprobs
  // Prefix-cache extra keys: whatever else changes the KV of these tokens (adapter id, media
  // content hashes) or a cache salt that isolates tenants. Empty for plain text.
  std::string cache_extra_keys;
};

}  // namespace loom
