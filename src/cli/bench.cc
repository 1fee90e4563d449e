// `loom bench [MODEL]`: offline speed of the engine on synthetic prompts — prefill tok/s (one
// request of --prompt-tokens), decode tok/s (--concurrency requests generating --gen-tokens each,
// EOS ignored; greedy, or sampled with --temperature / --top-p / --top-k and a fixed seed per
// request), the KV geometry and peak RSS; optionally the time to first token of a request whose
// long prefix is in the prefix cache vs one whose is not (--shared-prefix), and the per-step cost
// of everything but the forward pass (--overhead), and with --json-schema the decode run again with
// --constrained of its requests under that schema (grammar masks every step; the model needs a
// tokenizer, e.g. --tokenizer DIR with --dummy-weights), and with --replay-drafts the decode run
// again with speculative drafts replaying its own output at a chosen acceptance rate (random
// weights accept nothing a real proposer drafts). A benchmark, not a test: figures go to
// docs/benchmarks.md with the command that produced them and a peer measured in the same run.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "base/mapped_file.h"
#include "cli/bench_runs.h"
#include "cli/commands.h"
#include "cli/session.h"
#include "grammar/grammar_cache.h"
#include "grammar/grammar_state.h"
#include "grammar/mask_cache.h"
#include "grammar/token_mask.h"
#include "spec/draft_proposer.h"

namespace loom {
namespace {

struct BenchFlags {
  ModelFlags model;
  int prompt_tokens = 128;
  int decode_prompt_tokens = 8;  // prompt of each decode-run request (sets the decode context)
  int gen_tokens = 64;
  int concurrency = 1;  // 8 with --overhead unless given
  int repeat = 1;
  int shared_prefix = 0;  // 0 = off
  int shared_suffix = 16;
  bool overhead = false;
  bool json = false;
  // Decode-run sampling; temperature 0 = greedy (argmax on the device where the runner can).
  float temperature = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;
  float frequency_penalty = 0.0f;   // decode-run penalties (0 / 1 = off): rows a device runner
  float repetition_penalty = 1.0f;  // edits before sampling them (Backend::EditLogits)
  std::string json_schema;          // a second decode run with rows under this schema
  double replay_drafts = -1;  // a decode run with replayed drafts at this acceptance (< 0: off)
  int constrained = -1;       // how many of its requests (-1: half)
};

// The --json-schema run's grammar and vocabulary.
struct BenchGrammar {
  std::shared_ptr<const CompiledGrammar> grammar;
  std::unique_ptr<TokenVocabulary> vocab;
};

BenchGrammar LoadBenchGrammar(const BenchFlags& f, const Session& s) {
  BenchGrammar g;
  if (f.json_schema.empty()) return g;
  if (s.tokenizer == nullptr) {
    Fail("--json-schema needs the model's tokenizer (with --dummy-weights: --tokenizer DIR)");
  }
  auto text = ReadFileToString(f.json_schema);
  if (!text.ok()) Fail(std::string(text.status().message()));
  auto compiled = CompileGrammarSpec({GrammarKind::kJsonSchema, *text});
  if (!compiled.ok()) Fail("--json-schema " + f.json_schema + ": " + compiled.status().message());
  g.grammar = *std::move(compiled);
  const std::vector<TokenId> eos(s.engine->config().eos_token_ids.begin(),
                                 s.engine->config().eos_token_ids.end());
  auto vocab = TokenVocabulary::FromTokenizer(*s.tokenizer, eos);
  if (!vocab.ok()) Fail("--json-schema: " + std::string(vocab.status().message()));
  g.vocab = std::make_unique<TokenVocabulary>(*std::move(vocab));
  return g;
}

template <typename T>
T OrFail(StatusOr<T> v, const std::string& what) {
  if (!v.ok()) Fail(what + ": " + v.status().message());
  return std::move(v).value();
}

void RunBench(const BenchFlags& f) {
  ModelFlags mf = f.model;
  mf.batch = std::max(mf.batch, f.concurrency);
  mf.max_batched_tokens = std::max(mf.max_batched_tokens, f.prompt_tokens);
  // The cold shared-prefix prompt is prefilled in one step, like the --prompt-tokens one.
  if (f.shared_prefix > 0) {
    mf.max_batched_tokens = std::max(mf.max_batched_tokens, f.shared_prefix + f.shared_suffix);
  }
  const bool replay = f.replay_drafts >= 0;
  if (replay) {  // drafts of --num-draft-tokens (4 unless given) from the replay proposer below
    mf.draft_kind = "ngram";
    if (mf.num_draft_tokens < 0) mf.num_draft_tokens = 4;
  }
  auto session_or = OpenSession(mf);
  if (!session_or.ok()) Fail(session_or.status().message());
  Session& s = **session_or;
  Engine& engine = *s.engine;
  const int vocab = engine.vocab_size();
  if (f.shared_prefix > 0) {
    if (!engine.config().enable_prefix_cache) {
      Fail("--shared-prefix measures the prefix cache: drop --prompt-cache 0");
    }
    if (f.shared_prefix + f.shared_suffix + 1 > engine.max_model_len()) {
      Fail("--shared-prefix " + std::to_string(f.shared_prefix) + " + --shared-suffix " +
           std::to_string(f.shared_suffix) + " + 1 generated token exceed the context length " +
           std::to_string(engine.max_model_len()) + "; use a shorter --shared-prefix");
    }
  }
  std::unique_ptr<Engine> noop;
  if (f.overhead) noop = OrFail(MakeNoOpEngine(s), "--overhead");
  if (replay) {  // the other runs draft nothing
    engine.SetDraftProposer(nullptr);
    if (noop != nullptr) noop->SetDraftProposer(nullptr);
  }
  double best_spec = 0;
  uint64_t spec_drafted = 0, spec_accepted = 0;
  double spec_same_tokens = 0;  // last repeat's share of tokens before a first difference
  const BenchGrammar grammar = LoadBenchGrammar(f, s);
  MaskCache mask_cache(/*capacity=*/256);  // as serve_command.cc's
  const int num_constrained =
      grammar.grammar == nullptr ? 0 : (f.constrained < 0 ? f.concurrency / 2 : f.constrained);
  if (num_constrained > f.concurrency) Fail("--constrained exceeds --concurrency");
  double best_constrained = 0;

  constexpr double kInf = std::numeric_limits<double>::infinity();
  double best_prefill = 0, best_decode = 0, best_output = 0, best_step_s = kInf,
         best_noop_step_s = kInf;
  SharedPrefixTiming best_prefix{kInf, kInf, 0, 0};
  for (int rep = 0; rep < f.repeat; ++rep) {
    // Prefill: one request, one generated token; distinct prompts so the prefix cache never hits.
    Request pre;
    pre.prompt = RandomTokens(f.prompt_tokens, vocab, 1000u + static_cast<uint32_t>(rep));
    pre.params.max_tokens = 1;
    pre.params.temperature = 0;
    pre.params.ignore_eos = true;
    std::vector<Request> one;
    one.push_back(std::move(pre));
    BatchTiming p = OrFail(RunBatch(engine, std::move(one)), "prefill run");
    best_prefill = std::max(best_prefill, f.prompt_tokens / p.first_token_s);

    // Decode: `concurrency` requests with short distinct prompts.
    const uint32_t decode_seed = 7000u + static_cast<uint32_t>(rep * 1000);
    auto decode_requests = [&] {
      std::vector<Request> reqs =
          DecodeRequests(f.concurrency, f.decode_prompt_tokens, f.gen_tokens, vocab, decode_seed);
      for (size_t i = 0; i < reqs.size(); ++i) {
        reqs[i].params.temperature = f.temperature;
        reqs[i].params.top_p = f.top_p;
        reqs[i].params.top_k = f.top_k;
        reqs[i].params.frequency_penalty = f.frequency_penalty;
        reqs[i].params.repetition_penalty = f.repetition_penalty;
        reqs[i].params.seed = static_cast<uint64_t>(rep * 1000) + i;  // same draws run to run
      }
      return reqs;
    };
    BatchTiming d = OrFail(RunBatch(engine, decode_requests()), "decode run");
    double decode = static_cast<double>(f.concurrency) * (f.gen_tokens - 1) /
                    std::max(d.total_s - d.first_token_s, 1e-9);
    best_decode = std::max(best_decode, decode);
    // End to end, as a client sees it: every generated token over the whole run, the decode
    // requests' prefill included (what `tests/node/bench_serve.mjs` reports for a server).
    best_output = std::max(
        best_output, static_cast<double>(f.concurrency) * f.gen_tokens / std::max(d.total_s, 1e-9));
    if (d.steps_after_first > 0) best_step_s = std::min(best_step_s, d.mean_step_s());

    if (replay) {
      // The same requests, each row drafting what the run above produced, every draft token
      // corrupted with probability 1 - accept: draft j of a round is accepted with probability
      // accept^j. Lossless, so the output must be the same.
      std::vector<Request> reqs = decode_requests();
      auto proposer =
          std::make_unique<ReplayProposer>(f.replay_drafts, vocab, static_cast<uint64_t>(rep));
      for (size_t i = 0; i < reqs.size(); ++i) proposer->Record(reqs[i].prompt, Ids(d.outputs[i]));
      engine.SetDraftProposer(std::move(proposer));
      const EngineStats before = engine.stats();
      BatchTiming sp = OrFail(RunBatch(engine, std::move(reqs)), "--replay-drafts decode run");
      const EngineStats after = engine.stats();
      engine.SetDraftProposer(nullptr);
      // The CPU backend is batch-invariant: a verify row's logits are those of the plain
      // decode step, so any difference is a bug. A GPU computes a step of 1 + k rows a request
      // with other kernels and summation orders than a one-row step, so a near-tie (common with
      // random weights) may go the other way: there the tokens up to each request's first
      // difference are counted instead (spec_same_tokens).
      int64_t same = 0, total = 0;
      for (size_t i = 0; i < sp.outputs.size(); ++i) {
        const std::vector<int32_t> a = Ids(sp.outputs[i]), b = Ids(d.outputs[i]);
        if (a != b && s.backend->device() == Device::kCpu) {
          Fail("--replay-drafts decode run: request " + std::to_string(i) +
               " generated other tokens than without drafts (speculation must be lossless)");
        }
        const size_t common = static_cast<size_t>(
            std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
        same += static_cast<int64_t>(common);
        total += static_cast<int64_t>(b.size());
      }
      spec_same_tokens =
          static_cast<double>(same) / static_cast<double>(std::max<int64_t>(total, 1));
      best_spec = std::max(best_spec, static_cast<double>(f.concurrency) * (f.gen_tokens - 1) /
                                          std::max(sp.total_s - sp.first_token_s, 1e-9));
      spec_drafted = after.draft_tokens - before.draft_tokens;
      spec_accepted = after.accepted_draft_tokens - before.accepted_draft_tokens;
    }

    if (grammar.grammar != nullptr) {
      // The same requests, the first num_constrained under the schema (a fresh state each,
      // sharing masks through one cache as `loom serve`'s requests do).
      std::vector<Request> reqs = decode_requests();
      for (int i = 0; i < num_constrained; ++i) {
        reqs[static_cast<size_t>(i)].grammar = std::make_shared<GrammarState>(
            grammar.grammar, grammar.vocab.get(), GrammarState::kDefaultMaskCacheEntries,
            GrammarState::kDefaultMaxDfaStates, &mask_cache);
      }
      BatchTiming c = OrFail(RunBatch(engine, std::move(reqs)), "--json-schema decode run");
      int64_t generated = 0;
      for (const auto& out : c.outputs) generated += static_cast<int64_t>(out.size()) - 1;
      for (size_t i = 0; i < c.outputs.size(); ++i) {
        if (static_cast<int>(c.outputs[i].size()) != f.gen_tokens) {
          Fail("--json-schema decode run: request " + std::to_string(i) + " stopped after " +
               std::to_string(c.outputs[i].size()) + " of " + std::to_string(f.gen_tokens) +
               " tokens (its document ended: use a schema that cannot end that soon, e.g. an "
               "array with minItems)");
        }
      }
      best_constrained =
          std::max(best_constrained,
                   static_cast<double>(generated) / std::max(c.total_s - c.first_token_s, 1e-9));
    }

    if (noop != nullptr) {
      // The same requests without the forward pass (see runtime/noop_runner.h for what that
      // leaves: scheduling, KV bookkeeping, input building and upload, the logits copy, sampling
      // over the full vocabulary, stop checks, output streams and this loop's pops).
      BatchTiming n = OrFail(RunBatch(*noop, decode_requests()), "no-op decode run");
      for (const auto& out : n.outputs) {
        if (static_cast<int>(out.size()) != f.gen_tokens) {
          Fail("no-op decode run: a request stopped after " + std::to_string(out.size()) + " of " +
               std::to_string(f.gen_tokens) + " tokens");
        }
      }
      if (n.steps_after_first != d.steps_after_first) {
        Fail("no-op decode run took " + std::to_string(n.steps_after_first) +
             " decode steps, the model run " + std::to_string(d.steps_after_first));
      }
      if (n.steps_after_first > 0) best_noop_step_s = std::min(best_noop_step_s, n.mean_step_s());
    }

    if (f.shared_prefix > 0) {
      // New prefix ids every repeat: nothing carries over from an earlier repeat.
      SharedPrefixTiming t = OrFail(RunSharedPrefix(engine, f.shared_prefix, f.shared_suffix,
                                                    0x51A7E000u + static_cast<uint32_t>(rep)),
                                    "--shared-prefix run");
      best_prefix.cold_ttft_s = std::min(best_prefix.cold_ttft_s, t.cold_ttft_s);
      best_prefix.warm_ttft_s = std::min(best_prefix.warm_ttft_s, t.warm_ttft_s);
      // Exact and the same every repeat (deterministic); keep the last repeat's.
      best_prefix.cold_cached_tokens = t.cold_cached_tokens;
      best_prefix.warm_cached_tokens = t.warm_cached_tokens;
    }
  }
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  const double rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  const double weights_mb = static_cast<double>(s.model->weights().total_bytes) / 1e6;
  const int block_size = f.model.block_size;
  const long long pool_tokens = static_cast<long long>(s.num_kv_blocks) * block_size;
  const double pool_mb = static_cast<double>(pool_tokens) * s.kv_bytes_per_token / 1e6;
  const double step_ms = best_step_s < kInf ? best_step_s * 1e3 : 0;
  const double noop_step_ms = best_noop_step_s < kInf ? best_noop_step_s * 1e3 : 0;
  const double overhead_pct = step_ms > 0 ? 100.0 * noop_step_ms / step_ms : 0;
  const double cold_ms = best_prefix.cold_ttft_s * 1e3, warm_ms = best_prefix.warm_ttft_s * 1e3;
  const double speedup = warm_ms > 0 ? cold_ms / warm_ms : 0;
  const int full_block_prefix = f.shared_prefix / block_size * block_size;
  const std::string& kv_dtype = engine.config().kv_dtype;
  if (f.shared_prefix > 0 && (best_prefix.warm_cached_tokens != full_block_prefix ||
                              best_prefix.cold_cached_tokens != 0)) {
    std::fprintf(stderr,
                 "warning: the warm request reused %d cached tokens and the cold one %d; expected "
                 "%d and 0 (was the prefix evicted? try a larger --kv-cache-gb)\n",
                 best_prefix.warm_cached_tokens, best_prefix.cold_cached_tokens, full_block_prefix);
  }
  if (f.json) {
    std::printf(
        "{\"model\":\"%s\",\"dtype\":\"%s\",\"backend\":\"%s\",\"prompt_tokens\":%d,"
        "\"gen_tokens\":%d,\"concurrency\":%d,\"prefill_tok_s\":%.2f,\"decode_tok_s\":%.2f,"
        "\"output_tok_s\":%.2f,"
        "\"peak_rss_mb\":%.1f,\"weights_mb\":%.1f,\"decode_step_ms\":%.4f,"
        "\"temperature\":%g,\"top_p\":%g,\"top_k\":%d,\"frequency_penalty\":%g,"
        "\"repetition_penalty\":%g,"
        "\"kv_dtype\":\"%s\",\"kv_bytes_per_token\":%zu,\"kv_pool_blocks\":%d,\"block_size\":%d,"
        "\"kv_pool_tokens\":%lld,\"kv_pool_mb\":%.1f",
        s.model_path.c_str(), std::string(DTypeName(s.model->weights().dtype)).c_str(),
        s.backend->name().c_str(), f.prompt_tokens, f.gen_tokens, f.concurrency, best_prefill,
        best_decode, best_output, rss_mb, weights_mb, step_ms, f.temperature, f.top_p, f.top_k,
        f.frequency_penalty, f.repetition_penalty, kv_dtype.c_str(), s.kv_bytes_per_token,
        s.num_kv_blocks, block_size, pool_tokens, pool_mb);
    if (f.overhead) {
      std::printf(",\"step_ms_model\":%.4f,\"step_ms_noop\":%.4f,\"overhead_pct\":%.2f", step_ms,
                  noop_step_ms, overhead_pct);
    }
    if (num_constrained > 0) {
      std::printf(
          ",\"constrained_rows\":%d,\"constrained_decode_tok_s\":%.2f,"
          "\"constrained_ratio\":%.4f",
          num_constrained, best_constrained, best_constrained / best_decode);
    }
    if (replay) {
      std::printf(
          ",\"replay_accept\":%g,\"num_draft_tokens\":%d,\"spec_decode_tok_s\":%.2f,"
          "\"spec_speedup\":%.4f,\"spec_drafted\":%llu,\"spec_accepted\":%llu,"
          "\"spec_same_tokens\":%.4f",
          f.replay_drafts, engine.config().num_draft_tokens, best_spec, best_spec / best_decode,
          static_cast<unsigned long long>(spec_drafted),
          static_cast<unsigned long long>(spec_accepted), spec_same_tokens);
    }
    if (f.shared_prefix > 0) {
      std::printf(
          ",\"shared_prefix_tokens\":%d,\"shared_suffix_tokens\":%d,\"cold_ttft_ms\":%.3f,"
          "\"warm_ttft_ms\":%.3f,\"warm_speedup\":%.2f,\"cold_cached_tokens\":%d,"
          "\"warm_cached_tokens\":%d,\"full_block_prefix_tokens\":%d",
          f.shared_prefix, f.shared_suffix, cold_ms, warm_ms, speedup,
          best_prefix.cold_cached_tokens, best_prefix.warm_cached_tokens, full_block_prefix);
    }
    std::printf("}\n");
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
    if (f.frequency_penalty != 0.0f || f.repetition_penalty != 1.0f) {
      char buf[96];
      std::snprintf(buf, sizeof(buf), ", frequency_penalty %g, repetition_penalty %g",
                    f.frequency_penalty, f.repetition_penalty);
      sampling += buf;
    }
    std::printf("decode     %.2f tok/s  (%d concurrent, %d tokens each, %s)\n", best_decode,
                f.concurrency, f.gen_tokens, sampling.c_str());
    std::printf("output     %.2f tok/s  (end to end: the same run with its %d-token prefills)\n",
                best_output, f.decode_prompt_tokens);
    std::printf("peak RSS   %.1f MB (KV pool %d blocks x %d tokens, %.1f MB)\n", rss_mb,
                s.num_kv_blocks, block_size, pool_mb);
    std::printf("kv cache   %zu bytes/token (%s), pool %lld tokens\n", s.kv_bytes_per_token,
                kv_dtype.c_str(), pool_tokens);
    if (f.overhead) {
      std::printf(
          "overhead   %.3f ms/step without the forward vs %.3f ms/step with it: %.2f%% "
          "(decode, %d concurrent)\n",
          noop_step_ms, step_ms, overhead_pct, f.concurrency);
    }
    if (num_constrained > 0) {
      std::printf("grammar    %.2f tok/s with %d of %d rows under %s: %.1f%% of the free run\n",
                  best_constrained, num_constrained, f.concurrency, f.json_schema.c_str(),
                  100.0 * best_constrained / best_decode);
    }
    if (replay) {
      std::printf(
          "speculate  %.2f tok/s with replayed drafts (accept %g, up to %d a row): %.2fx the "
          "decode; %llu of %llu drafts accepted, %.1f%% of the tokens before a request's first "
          "difference from the decode run (last repeat)\n",
          best_spec, f.replay_drafts, engine.config().num_draft_tokens, best_spec / best_decode,
          static_cast<unsigned long long>(spec_accepted),
          static_cast<unsigned long long>(spec_drafted), 100.0 * spec_same_tokens);
    }
    if (f.shared_prefix > 0) {
      std::printf(
          "prefix     TTFT cold %.2f ms, warm %.2f ms (%.2fx faster; %d-token prefix + %d-token "
          "suffix)\n           cached tokens: warm %d (whole blocks of the prefix: %d), cold %d\n",
          cold_ms, warm_ms, speedup, f.shared_prefix, f.shared_suffix,
          best_prefix.warm_cached_tokens, full_block_prefix, best_prefix.cold_cached_tokens);
    }
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
  cmd->add_option("--concurrency", f->concurrency,
                  "concurrent requests in the decode run (default 1; 8 with --overhead)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--repeat", f->repeat, "repeat and report the best")->check(CLI::Range(1, 100));
  cmd->add_option("--shared-prefix", f->shared_prefix,
                  "also time the first token of a request whose N-token prefix is in the prefix "
                  "cache (warm) vs not (cold); 0 = off")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--shared-suffix", f->shared_suffix,
                  "distinct suffix after the --shared-prefix prefix, in tokens")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--overhead", f->overhead,
                "also run the decode workload with a no-op model (no forward pass) and report "
                "the per-step time outside the model");
  cmd->add_option("--temperature", f->temperature,
                  "decode-run sampling temperature (0 = greedy; requests are seeded)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-p", f->top_p, "decode-run nucleus sampling mass (1 = off)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--top-k", f->top_k, "decode-run top-k (0 = off)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--frequency-penalty", f->frequency_penalty,
                  "decode-run frequency penalty (0 = off)")
      ->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--repetition-penalty", f->repetition_penalty,
                  "decode-run repetition penalty over prompt + output (1 = off)")
      ->check(CLI::Range(0.01, 100.0));
  cmd->add_option("--json-schema", f->json_schema,
                  "also run the decode with --constrained rows under this JSON Schema file")
      ->check(CLI::ExistingFile);
  cmd->add_option("--constrained", f->constrained,
                  "rows of the --json-schema run under the schema (default: half)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--replay-drafts", f->replay_drafts,
                  "also run the decode with speculative drafts that replay its own output, each "
                  "draft token corrupted with probability 1 - ACCEPT (measures speculation at a "
                  "chosen acceptance rate on any weights; up to --num-draft-tokens a row, default "
                  "4; --draft-token-cost applies)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--json", f->json, "print one JSON line");
  cmd->callback([f, cmd] {
    if (f->overhead && cmd->count("--concurrency") == 0) f->concurrency = 8;
    RunBench(*f);
  });
}

}  // namespace loom
