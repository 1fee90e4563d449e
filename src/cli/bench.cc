// `loom bench [MODEL]`: offline speed of the engine on synthetic prompts — prefill tok/s (one
// request of --prompt-tokens), decode tok/s (--concurrency requests generating --gen-tokens each,
// EOS ignored; greedy, or sampled with --temperature / --top-p / --top-k and a fixed seed per
// request) and peak RSS. A benchmark, not a test: figures go to docs/benchmarks.md with the
// command that produced them and a peer measured in the same run.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "cli/commands.h"
#include "cli/session.h"

namespace loom {
namespace {

struct BenchFlags {
  ModelFlags model;
  int prompt_tokens = 128;
  int decode_prompt_tokens = 8;  // prompt of each decode-run request (sets the decode context)
  int gen_tokens = 64;
  int concurrency = 1;
  int repeat = 1;
  bool json = false;
  // Decode-run sampling; temperature 0 = greedy (argmax on the device where the runner can).
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
};

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::vector<TokenId> RandomPrompt(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(3, std::max(3, vocab - 1));
  std::vector<TokenId> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = dist(rng);
  return ids;
}

// Runs requests to completion on the calling thread; returns (seconds to every request's first
// token, seconds until all finished).
std::pair<double, double> RunBatch(Engine& engine, std::vector<Request> reqs) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<RequestHandle> handles;
  for (auto& r : reqs) {
    auto h = engine.Submit(std::move(r));
    if (!h.ok()) Fail(h.status().message());
    handles.push_back(*h);
  }
  size_t done = 0, first = 0;
  std::vector<bool> got_first(handles.size(), false), finished(handles.size(), false);
  double t_first = 0;
  while (done < handles.size()) {
    engine.Step();
    for (size_t i = 0; i < handles.size(); ++i) {
      while (auto c = handles[i].stream->TryPop()) {
        if (!c->tokens.empty() && !got_first[i]) {
          got_first[i] = true;
          if (++first == handles.size()) t_first = Seconds(t0, std::chrono::steady_clock::now());
        }
        if (c->finish_reason) {
          if (*c->finish_reason == FinishReason::kError) Fail(c->error.message());
          finished[i] = true;
          ++done;
        }
      }
    }
  }
  return {t_first, Seconds(t0, std::chrono::steady_clock::now())};
}

void RunBench(const BenchFlags& f) {
  ModelFlags mf = f.model;
  mf.batch = std::max(mf.batch, f.concurrency);
  mf.max_batched_tokens = std::max(mf.max_batched_tokens, f.prompt_tokens);
  auto session_or = OpenSession(mf);
  if (!session_or.ok()) Fail(session_or.status().message());
  Session& s = **session_or;
  Engine& engine = *s.engine;
  const int vocab = engine.vocab_size();

  double best_prefill = 0, best_decode = 0;
  for (int rep = 0; rep < f.repeat; ++rep) {
    // Prefill: one request, one generated token; distinct prompts so the prefix cache never hits.
    Request pre;
    pre.prompt = RandomPrompt(f.prompt_tokens, vocab, 1000u + static_cast<uint32_t>(rep));
    pre.params.max_tokens = 1;
    pre.params.temperature = 0;
    pre.params.ignore_eos = true;
    std::vector<Request> one;
    one.push_back(std::move(pre));
    auto [ttft, total] = RunBatch(engine, std::move(one));
    best_prefill = std::max(best_prefill, f.prompt_tokens / ttft);

    // Decode: `concurrency` requests with short distinct prompts.
    std::vector<Request> reqs;
    for (int i = 0; i < f.concurrency; ++i) {
      Request r;
      r.prompt = RandomPrompt(f.decode_prompt_tokens, vocab,
                              7000u + static_cast<uint32_t>(rep * 1000 + i));
      r.params.max_tokens = f.gen_tokens;
      r.params.temperature = f.temperature;
      r.params.top_p = f.top_p;
      r.params.top_k = f.top_k;
      r.params.seed = static_cast<uint64_t>(rep * 1000 + i);  // same draws run to run
      r.params.ignore_eos = true;
      reqs.push_back(std::move(r));
    }
    auto [first, all] = RunBatch(engine, std::move(reqs));
    double decode = static_cast<double>(f.concurrency) * (f.gen_tokens - 1) / std::max(all - first, 1e-9);
    best_decode = std::max(best_decode, decode);
  }
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  const double rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  const double weights_mb = static_cast<double>(s.model->weights().total_bytes) / 1e6;
  if (f.json) {
    std::printf(
        "{\"model\":\"%s\",\"dtype\":\"%s\",\"backend\":\"%s\",\"prompt_tokens\":%d,"
        "\"gen_tokens\":%d,\"concurrency\":%d,\"temperature\":%g,\"top_p\":%g,\"top_k\":%d,"
        "\"prefill_tok_s\":%.2f,\"decode_tok_s\":%.2f,\"peak_rss_mb\":%.1f,\"weights_mb\":%.1f}\n",
        s.model_path.c_str(), std::string(DTypeName(s.model->weights().dtype)).c_str(),
        s.backend->name().c_str(), f.prompt_tokens, f.gen_tokens, f.concurrency, f.temperature,
        f.top_p, f.top_k, best_prefill, best_decode, rss_mb, weights_mb);
  } else {
    std::printf("model      %s (%s, %.1f MB of weights)\nbackend    %s\n", s.model_path.c_str(),
                std::string(DTypeName(s.model->weights().dtype)).c_str(), weights_mb,
                s.backend->name().c_str());
    std::printf("prefill    %.2f tok/s  (%d-token prompt)\n", best_prefill, f.prompt_tokens);
    std::string sampling = "greedy";
    if (f.temperature > 0) {
      char buf[96];
      std::snprintf(buf, sizeof(buf), "temperature %g, top_p %g, top_k %d", f.temperature, f.top_p,
                    f.top_k);
      sampling = buf;
    }
    std::printf("decode     %.2f tok/s  (%d concurrent, %d tokens each, %s)\n", best_decode,
                f.concurrency, f.gen_tokens, sampling.c_str());
    std::printf("peak RSS   %.1f MB (KV pool %d blocks x %d tokens, %.1f MB)\n", rss_mb,
                s.num_kv_blocks, f.model.block_size,
                static_cast<double>(s.num_kv_blocks) * f.model.block_size * s.kv_bytes_per_token / 1e6);
  }
}

}  // namespace

void AddBenchCommand(CLI::App& root) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = root.add_subcommand("bench", "measure prefill and decode speed and peak memory");
  f->model.Add(cmd);
  cmd->add_option("--prompt-tokens", f->prompt_tokens, "prompt length for the prefill run")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--decode-prompt-tokens", f->decode_prompt_tokens,
                  "prompt length of each decode-run request (the decode context starts there)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--gen-tokens", f->gen_tokens, "tokens generated per request in the decode run")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--concurrency", f->concurrency, "concurrent requests in the decode run")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--repeat", f->repeat, "repeat and report the best")->check(CLI::Range(1, 100));
  cmd->add_option("--temperature", f->temperature,
                  "decode-run sampling temperature (0 = greedy; requests are seeded)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-p", f->top_p, "decode-run nucleus sampling mass (1 = off)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--top-k", f->top_k, "decode-run top-k (0 = off)")->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--json", f->json, "print one JSON line");
  cmd->callback([f] { RunBench(*f); });
}

}  // namespace loom
