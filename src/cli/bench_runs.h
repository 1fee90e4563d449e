// The measurements behind `loom bench`, split from the command so cli_test can run them on the
// default model. Each drives an Engine with Step() on the calling thread (its loop thread must not
// be running) and times wall clock around the steps, including the client's stream pops.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "cli/session.h"
#include "engine/engine.h"

namespace loom {

struct BatchTiming {
  double first_token_s = 0;  // submit -> every request has its first token
  double total_s = 0;        // submit -> every request finished
  // Step() calls after the one that gave the last request its first token: the decode steps when
  // every request prefills in the first steps and has the same max_tokens.
  int steps_after_first = 0;
  std::vector<int> cached_tokens;  // per request: prompt tokens the prefix cache served
  // Per request: the generated tokens (with their logprobs when the request asked for them).
  std::vector<std::vector<TokenOutput>> outputs;
  std::vector<FinishReason> finish_reasons;  // per request

  // Mean seconds of the steps after the last first token; 0 when there were none.
  double mean_step_s() const {
    return steps_after_first > 0 ? (total_s - first_token_s) / steps_after_first : 0;
  }
};

// Submits `requests` (in order), steps the engine until all finish and pops their streams after
// every step. Errors: a submission the engine refused, or a request that finished with kError.
StatusOr<BatchTiming> RunBatch(Engine& engine, std::vector<Request> requests);

// The ids of `tokens`.
std::vector<TokenId> Ids(const std::vector<TokenOutput>& tokens);

// `n` ids drawn uniformly from [3, vocab) by a generator seeded with `seed` (so repeats with new
// seeds never share a prefix).
std::vector<TokenId> RandomTokens(int n, int vocab, uint32_t seed);

// The decode workload: `concurrency` greedy, ignore-EOS requests generating `gen_tokens` each;
// request i has `prompt_tokens` random ids from seed `seed + i`.
std::vector<Request> DecodeRequests(int concurrency, int prompt_tokens, int gen_tokens, int vocab,
                                    uint32_t seed);

struct SharedPrefixTiming {
  double cold_ttft_s = 0;      // first request: nothing of its prompt is cached
  double warm_ttft_s = 0;      // second request: same prefix, another suffix, after the first
  int cold_cached_tokens = 0;  // as the engine reported them
  int warm_cached_tokens = 0;  // expected: prefix_tokens rounded down to whole blocks
};

// Two one-token greedy requests, run one after the other: a random `prefix_tokens` prefix (from
// `seed`) + a random `suffix_tokens` suffix, then the same prefix + a suffix differing from the
// first at its first token. The engine's prefix cache must be on for the second to hit. Errors:
// RunBatch's (e.g. the prompt does not fit the context).
StatusOr<SharedPrefixTiming> RunSharedPrefix(Engine& engine, int prefix_tokens, int suffix_tokens,
                                             uint32_t seed);

// A second engine with the session engine's config whose runner is a NoOpRunner (see
// runtime/noop_runner.h) over the session's backend, with its runner's vocabulary, context and
// pool geometry. Used to time the same workload without the forward pass.
StatusOr<std::unique_ptr<Engine>> MakeNoOpEngine(const Session& session);

}  // namespace loom
