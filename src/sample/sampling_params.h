// SamplingParams: how one request turns logits into tokens, and when it stops. Field semantics
// follow the OpenAI API and vLLM (names in comments are the API fields).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "base/ids.h"
#include "base/status.h"

namespace loom {

struct SamplingParams {
  float temperature = 1.0f;         // temperature; 0 = greedy (argmax)
  int top_k = 0;                    // top_k; 0 or -1 = off
  float top_p = 1.0f;               // top_p in (0, 1]; 1 = off
  float min_p = 0.0f;               // min_p in [0, 1]; keeps p >= min_p * p_max
  float xtc_probability = 0.0f;     // xtc_probability in [0, 1]; 0 = off
  float xtc_threshold = 0.1f;       // xtc_threshold in [0, 1]
  float repetition_penalty = 1.0f;  // repetition_penalty > 0; 1 = off (prompt + output tokens)
  float presence_penalty = 0.0f;    // presence_penalty in [-2, 2] (output tokens)
  float frequency_penalty = 0.0f;   // frequency_penalty in [-2, 2] (output tokens)
  std::vector<std::pair<TokenId, float>> logit_bias;  // logit_bias: id -> [-100, 100]
  std::optional<uint64_t> seed;         // seed; unset = the engine draws one per request
  int num_logprobs = -1;                // -1: none; 0: the chosen token's; k <= 20: plus the top k
  int max_tokens = 16;                  // max_tokens >= 1: finish "length" after this many
  int min_tokens = 0;                   // min_tokens <= max_tokens: EOS/stop ids masked before
  bool ignore_eos = false;              // ignore_eos: EOS ids do not stop the request
  std::vector<TokenId> stop_token_ids;  // stop_token_ids: stop like EOS (not emitted)

  bool greedy() const { return temperature == 0.0f || top_k == 1; }

  // Checks every field against its range and token ids against [0, vocab_size). The message
  // names the API field, e.g. "top_p must be in (0, 1], got 1.5".
  Status Validate(int vocab_size) const;
};

}  // namespace loom
