// Request: what the server hands the engine — token ids, sampling parameters and cache keys.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/ids.h"
#include "engine/reasoning_budget.h"
#include "grammar/grammar_state.h"
#include "sample/sampling_params.h"

namespace loom {

struct Request {
  std::vector<TokenId> prompt;  // token ids after templating and tokenization; non-empty
  SamplingParams params;        // incl. max_tokens, min_tokens, stop ids, seed, logprobs
  // Prefix-cache extra keys: whatever else changes the KV of these tokens (adapter id, media
  // content hashes) or a cache salt that isolates tenants. Empty for plain text.
  std::string cache_extra_keys;
  // Grammar-constrained decoding (null = free): the state of this request's grammar, fresh
  // (nothing accepted). The engine masks every sampled row with it and advances it with each
  // token; a request whose output leaves its grammar fails. Its vocabulary must cover the ids
  // the model can sample (ids beyond it are never allowed) and outlive the request. A copy of a
  // Request shares the state: every submitted request needs its own.
  std::shared_ptr<GrammarState> grammar;
  // A cap on the reply's reasoning section (reasoning_budget.h); none = unlimited. When it is
  // spent the engine emits budget->forced instead of sampling (through the grammar, if any: it
  // must accept those tokens).
  std::optional<ReasoningBudget> reasoning_budget;
};

}  // namespace loom
