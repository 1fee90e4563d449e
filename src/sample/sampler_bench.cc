// sampler_bench: host sampling cost of one engine step. Part 1: one row of --vocab logits by
// sampling setting (median of --iters). Part 2: a step of --rows rows, each its own request and
// seed, sampled the way Engine::SampleHostRows does it (a ThreadPool, one Sampler per worker),
// on each thread count of --threads; checks that every thread count gives the same tokens.
// x = the 1-thread minimum over this minimum.
// Logits: N(0, 2) with 32 tokens raised by 6..12 (a peaked head over a long tail), fixed seed.
//   sampler_bench [--rows 64] [--vocab 128256] [--threads 1,2,4] [--iters 15]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "sample/sampler.h"

namespace {

using Clock = std::chrono::steady_clock;
using loom::SampleContext;
using loom::Sampler;
using loom::SamplingParams;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Median and minimum: on a shared machine the minimum is the figure least disturbed by others.
struct Stats {
  double median_ms, min_ms;
};
Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front()};
}

std::vector<float> MakeLogits(int rows, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> token(0, vocab - 1);
  std::uniform_real_distribution<float> boost(6.0f, 12.0f);
  std::vector<float> logits(static_cast<size_t>(rows) * vocab);
  for (float& l : logits) l = normal(rng);
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < 32; ++k) logits[static_cast<size_t>(r) * vocab + token(rng)] += boost(rng);
  }
  return logits;
}

struct Setting {
  const char* name;
  SamplingParams params;
};

std::vector<Setting> Settings() {
  std::vector<Setting> s;
  SamplingParams p;
  p.temperature = 0.8f;
  s.push_back({"temperature 0.8", p});
  p.top_p = 0.9f;
  s.push_back({"temperature 0.8, top_p 0.9", p});
  p.top_p = 1.0f;
  p.top_k = 40;
  s.push_back({"temperature 0.8, top_k 40", p});
  p = SamplingParams();
  p.temperature = 0.8f;
  p.num_logprobs = 5;
  s.push_back({"temperature 0.8, top_logprobs 5", p});
  p = SamplingParams();
  p.temperature = 0.0f;
  p.num_logprobs = 5;
  s.push_back({"greedy, top_logprobs 5", p});
  return s;
}

// Samples every row of `logits` [rows, vocab] with `params` (seed = row) on `num_workers`
// threads; returns the tokens. `logits` is restored from `pristine` first (outside the timing).
// As in the engine: each worker's Sampler on its own cache lines (no false sharing).
struct alignas(128) SamplerSlot {
  explicit SamplerSlot(int vocab) : sampler(vocab) {}
  Sampler sampler;
};

std::vector<loom::TokenId> SampleStep(const SamplingParams& params, int vocab,
                                      const std::vector<float>& pristine,
                                      std::vector<float>& logits, loom::ThreadPool* pool,
                                      std::vector<SamplerSlot>& samplers, size_t num_workers,
                                      double* ms) {
  std::memcpy(logits.data(), pristine.data(), logits.size() * sizeof(float));
  const size_t rows = logits.size() / static_cast<size_t>(vocab);
  std::vector<loom::TokenId> tokens(rows, -1);
  auto sample = [&](size_t i, size_t worker) {
    SampleContext ctx;
    ctx.params = &params;
    ctx.seed = 1000 + i;
    std::span<float> row(logits.data() + i * vocab, static_cast<size_t>(vocab));
    auto r = samplers[worker].sampler.SampleRow(row, ctx);
    tokens[i] = r.ok() ? r->token : -1;
  };
  const auto t0 = Clock::now();
  if (num_workers <= 1) {
    for (size_t i = 0; i < rows; ++i) sample(i, 0);
  } else {
    pool->ParallelFor(rows, num_workers, sample);
  }
  *ms = Ms(t0, Clock::now());
  return tokens;
}

}  // namespace

int main(int argc, char** argv) {
  int rows = 64, vocab = 128256, iters = 15;
  std::vector<int> thread_counts = {1, 2, 4};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rows") {
      rows = std::atoi(argv[i + 1]);
    } else if (flag == "--vocab") {
      vocab = std::atoi(argv[i + 1]);
    } else if (flag == "--iters") {
      iters = std::atoi(argv[i + 1]);
    } else if (flag == "--threads") {
      thread_counts.clear();
      for (const char* p = argv[i + 1]; *p != '\0';) {
        thread_counts.push_back(std::atoi(p));
        while (*p != '\0' && *p != ',') ++p;
        if (*p == ',') ++p;
      }
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (rows < 1 || vocab < 1 || iters < 1 || thread_counts.empty()) {
    std::fprintf(stderr,
                 "usage: sampler_bench [--rows R] [--vocab V] [--threads 1,2,4] "
                 "[--iters N]\n");
    return 2;
  }
  const int max_threads = *std::max_element(thread_counts.begin(), thread_counts.end());

  const std::vector<float> pristine = MakeLogits(rows, vocab, 42);
  std::vector<float> logits = pristine;
  std::printf("one row, vocab %d (%d runs):\n", vocab, iters);
  {
    Sampler sampler(vocab);
    std::vector<float> row(static_cast<size_t>(vocab));
    for (const Setting& s : Settings()) {
      std::vector<double> times;
      for (int it = 0; it < iters; ++it) {
        const size_t r = static_cast<size_t>(it % rows);
        std::memcpy(row.data(), pristine.data() + r * vocab, row.size() * sizeof(float));
        SampleContext ctx;
        ctx.params = &s.params;
        ctx.seed = static_cast<uint64_t>(it);
        const auto t0 = Clock::now();
        auto res = sampler.SampleRow(row, ctx);
        times.push_back(Ms(t0, Clock::now()));
        if (!res.ok()) std::printf("  error: %s\n", res.status().ToString().c_str());
      }
      const Stats st = Summarize(times);
      std::printf("  %-34s %8.3f ms median %8.3f ms min\n", s.name, st.median_ms, st.min_ms);
    }
  }

  std::printf("one step, %d rows x vocab %d (%d runs):\n", rows, vocab, iters);
  std::unique_ptr<loom::ThreadPool> pool;
  if (max_threads > 1) pool = std::make_unique<loom::ThreadPool>(max_threads - 1);
  std::vector<SamplerSlot> samplers;
  for (int i = 0; i < max_threads; ++i) samplers.emplace_back(vocab);
  for (const Setting& s : Settings()) {
    if (s.params.num_logprobs >= 0) continue;
    std::vector<loom::TokenId> want;
    double base_ms = 0;
    for (int threads : thread_counts) {
      std::vector<double> times;
      std::vector<loom::TokenId> got;
      for (int it = 0; it < iters; ++it) {
        double ms = 0;
        got = SampleStep(s.params, vocab, pristine, logits, pool.get(), samplers,
                         static_cast<size_t>(threads), &ms);
        times.push_back(ms);
      }
      if (want.empty()) want = got;
      const Stats st = Summarize(times);
      if (base_ms == 0) base_ms = st.min_ms;
      std::printf("  %-34s %2d threads %8.2f ms median %8.2f ms min (x%.2f)%s\n", s.name, threads,
                  st.median_ms, st.min_ms, base_ms / st.min_ms,
                  got == want ? "" : "  TOKENS DIFFER");
    }
  }
  return 0;
}
