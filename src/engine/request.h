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

// How an embedding request pools its input's final hidden states (after the model's final norm,
// before lm_head): the last token's (Qwen3-Embedding and most decoder embedders), the mean over
// every token, or the first token's (sentence-transformers' "cls").
enum class Pooling { kLast, kMean, kCls };

inline const char* PoolingName(Pooling p) {
  switch (p) {
    case Pooling::kLast:
      return "last";
    case Pooling::kMean:
      return "mean";
    case Pooling::kCls:
      return "cls";
  }
  return "unknown";
}

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
  // Set: an embedding request. The prompt is computed once (chunked like any prompt, outside the
  // prefix cache), nothing is sampled (params, grammar and reasoning_budget are unused), its KV
  // blocks are freed when it ends, and its stream finishes with kStop and
  // StreamChunk::embedding: the pooled final hidden state.
  std::optional<Pooling> pooling;
};

}  // namespace loom
