#include "cli/bench_runs.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "runtime/decoder_runner.h"
#include "runtime/noop_runner.h"

namespace loom {
namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

StatusOr<BatchTiming> RunBatch(Engine& engine, std::vector<Request> requests) {
  const size_t n = requests.size();
  BatchTiming t;
  t.cached_tokens.assign(n, 0);
  t.outputs.assign(n, {});
  t.finish_reasons.assign(n, FinishReason::kAbort);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<RequestHandle> handles;
  for (Request& r : requests) {
    ASSIGN_OR_RETURN(RequestHandle h, engine.Submit(std::move(r)));
    handles.push_back(std::move(h));
  }
  size_t done = 0, first = 0;
  std::vector<bool> got_first(n, false);
  while (done < n) {
    engine.Step();
    if (first == n) ++t.steps_after_first;
    for (size_t i = 0; i < n; ++i) {
      while (auto c = handles[i].stream->TryPop()) {
        t.cached_tokens[i] = c->num_cached_tokens;
        t.outputs[i].insert(t.outputs[i].end(), c->tokens.begin(), c->tokens.end());
        if (!c->tokens.empty() && !got_first[i]) {
          got_first[i] = true;
          if (++first == n) t.first_token_s = Seconds(t0, std::chrono::steady_clock::now());
        }
        if (c->finish_reason) {
          if (*c->finish_reason == FinishReason::kError) return c->error;
          t.finish_reasons[i] = *c->finish_reason;
          ++done;
        }
      }
    }
  }
  t.total_s = Seconds(t0, std::chrono::steady_clock::now());
  // Idle now: this step runs the engine's idle integrity check (a walk of the whole block pool,
  // milliseconds on a GPU-sized pool), after the timed window as a server runs it after the
  // finishing step.
  engine.Step();
  return t;
}

std::vector<TokenId> Ids(const std::vector<TokenOutput>& tokens) {
  std::vector<TokenId> ids;
  ids.reserve(tokens.size());
  for (const TokenOutput& t : tokens) ids.push_back(t.token);
  return ids;
}

std::vector<TokenId> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(3, std::max(3, vocab - 1));
  std::vector<TokenId> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = dist(rng);
  return ids;
}

std::vector<Request> DecodeRequests(int concurrency, int prompt_tokens, int gen_tokens, int vocab,
                                    uint32_t seed) {
  std::vector<Request> reqs;
  for (int i = 0; i < concurrency; ++i) {
    Request r;
    r.prompt = RandomTokens(prompt_tokens, vocab, seed + static_cast<uint32_t>(i));
    r.params.max_tokens = gen_tokens;
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

StatusOr<SharedPrefixTiming> RunSharedPrefix(Engine& engine, int prefix_tokens, int suffix_tokens,
                                             uint32_t seed) {
  const int vocab = engine.vocab_size();
  const std::vector<TokenId> prefix = RandomTokens(prefix_tokens, vocab, seed);
  std::vector<TokenId> suffix_a = RandomTokens(suffix_tokens, vocab, seed ^ 0x5A5A5A5Au);
  std::vector<TokenId> suffix_b = RandomTokens(suffix_tokens, vocab, seed ^ 0xA5A5A5A5u);
  // Distinct from the first token on, so the block straddling prefix and suffix never hits.
  if (!suffix_a.empty() && suffix_b[0] == suffix_a[0]) {
    suffix_b[0] = suffix_a[0] + 1 < vocab ? suffix_a[0] + 1 : 3;
  }
  auto one = [&](const std::vector<TokenId>& suffix) -> StatusOr<BatchTiming> {
    Request r;
    r.prompt = prefix;
    r.prompt.insert(r.prompt.end(), suffix.begin(), suffix.end());
    r.params.max_tokens = 1;
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    std::vector<Request> batch;
    batch.push_back(std::move(r));
    return RunBatch(engine, std::move(batch));
  };
  SharedPrefixTiming out;
  ASSIGN_OR_RETURN(BatchTiming cold, one(suffix_a));
  ASSIGN_OR_RETURN(BatchTiming warm, one(suffix_b));
  out.cold_ttft_s = cold.first_token_s;
  out.warm_ttft_s = warm.first_token_s;
  out.cold_cached_tokens = cold.cached_tokens[0];
  out.warm_cached_tokens = warm.cached_tokens[0];
  return out;
}

StatusOr<std::unique_ptr<Engine>> MakeNoOpEngine(const Session& session) {
  if (session.engine == nullptr || session.runner == nullptr || session.backend == nullptr) {
    return FailedPreconditionError("MakeNoOpEngine needs an open session");
  }
  const DecoderRunner& real = *session.runner;
  return Engine::Create(
      session.engine->config(),
      std::make_unique<NoOpRunner>(session.backend.get(), real.vocab_size(), real.max_model_len(),
                                   real.num_blocks(), real.block_size()));
}

}  // namespace loom
