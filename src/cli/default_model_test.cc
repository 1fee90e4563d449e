// The embedded default model (models/default, trained by tools/train_default_model) against its
// transformers golden (models/default/golden.json, written by train.py): tokenizer ids, the
// last-position logits and per-position argmax of two sequences, and a 32-token greedy
// trajectory — the latter through the real engine (scheduler, KV manager, sampler).
//
// Each test names its device. On the CPU, transformers ran in f32 on bf16-rounded weights, as we
// do; only the summation order differs, so 1e-4 of the logits' scale is ample. The CUDA case
// (skipped without a GPU) rounds activations and KV to bf16: its logprobs get the bf16 bound of
// cuda_golden_test (3e-2 of the scale; a wrong position or page moves them by O(1) of it), its
// greedy trajectory through the engine (graphs, device argmax, lookahead) must still be exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli/bench_runs.h"
#include "cli/session.h"
#ifdef LOOM_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "io/json_file.h"
#include "tokenizer/tokenizer.h"

namespace loom {
namespace {

// Greedy-generates `n` tokens after `prompt` through the engine.
std::vector<TokenId> GreedyThroughEngine(Engine& engine, const std::vector<TokenId>& prompt,
                                         int n) {
  Request r;
  r.prompt = prompt;
  r.params.temperature = 0;
  r.params.max_tokens = n;
  r.params.ignore_eos = true;
  auto h = engine.Submit(std::move(r));
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  std::vector<TokenId> out;
  if (!h.ok()) return out;
  while (!h->stream->done()) {
    engine.Step();
    while (auto c = h->stream->TryPop()) {
      for (const auto& t : c->tokens) out.push_back(t.token);
    }
  }
  return out;
}

class DefaultModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (cuda()) {
#ifdef LOOM_HAVE_CUDA
      if (Status s = CudaBackend::CheckGpu(0); !s.ok()) GTEST_SKIP() << s.message();
#else
      GTEST_SKIP() << "built without CUDA";
#endif
    }
    ModelFlags flags;
    flags.threads = 2;
    flags.device = GetParam();
    auto s = OpenSession(flags);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = std::move(s).value();
    ASSERT_TRUE(session_->is_default_model);
    ASSERT_NE(session_->tokenizer, nullptr);
    auto g = LoadJsonFile(session_->model_path + "/golden.json");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    golden_ = *g;
  }

  bool cuda() const { return GetParam() == "cuda"; }
  double tolerance() const { return cuda() ? 3e-2 : 1e-4; }

  std::vector<TokenId> Greedy(const std::vector<TokenId>& prompt, int n) {
    return GreedyThroughEngine(*session_->engine, prompt, n);
  }

  std::unique_ptr<Session> session_;
  nlohmann::json golden_;
};

TEST_P(DefaultModelTest, TokenizerMatchesTransformers) {
  if (cuda()) GTEST_SKIP() << "the tokenizer does not depend on the device";
  for (const auto& c : golden_["tokenization"]) {
    std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(session_->tokenizer->Encode(c["text"].get<std::string>(), true), want)
        << c["text"].get<std::string>();
    EXPECT_EQ(session_->tokenizer->Decode(want, false), c["text"].get<std::string>());
  }
}

TEST_P(DefaultModelTest, GreedyTrajectoryThroughTheEngine) {
  std::vector<TokenId> prompt = golden_["greedy"]["prompt_ids"].get<std::vector<TokenId>>();
  std::vector<TokenId> want = golden_["greedy"]["generated_ids"].get<std::vector<TokenId>>();
  EXPECT_EQ(Greedy(prompt, static_cast<int>(want.size())), want);
}

TEST_P(DefaultModelTest, ArgmaxAtEveryPosition) {
  // The golden holds no per-position logits to tell a bf16 near tie from an error;
  // cuda_golden_test checks every position of its models on CUDA.
  if (cuda()) GTEST_SKIP() << "exact argmax at every position is the f32 backend's claim";
  // Each prefix of the sequence, greedy-decoded for one token, must give transformers' argmax.
  for (const auto& seq : golden_["sequences"]) {
    std::vector<TokenId> ids = seq["ids"].get<std::vector<TokenId>>();
    std::vector<TokenId> argmax = seq["argmax"].get<std::vector<TokenId>>();
    for (size_t n = 1; n <= ids.size(); ++n) {
      std::vector<TokenId> prefix(ids.begin(), ids.begin() + static_cast<long>(n));
      std::vector<TokenId> got = Greedy(prefix, 1);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0], argmax[n - 1]) << "position " << n - 1;
    }
  }
}

TEST_P(DefaultModelTest, LastLogitsMatch) {
  for (const auto& seq : golden_["sequences"]) {
    std::vector<TokenId> ids = seq["ids"].get<std::vector<TokenId>>();
    std::vector<float> want = seq["last_logits"].get<std::vector<float>>();
    Request r;
    r.prompt = ids;
    r.params.temperature = 0;
    r.params.max_tokens = 1;
    r.params.ignore_eos = true;
    r.params.num_logprobs = 20;
    auto h = session_->engine->Submit(std::move(r));
    ASSERT_TRUE(h.ok());
    std::vector<TokenOutput> outs;
    while (!h->stream->done()) {
      session_->engine->Step();
      while (auto c = h->stream->TryPop())
        outs.insert(outs.end(), c->tokens.begin(), c->tokens.end());
    }
    ASSERT_EQ(outs.size(), 1u);
    // The engine reports log-softmax of the logits: compare against the golden's log-softmax.
    double mx = *std::max_element(want.begin(), want.end()), sum = 0;
    for (float v : want) sum += std::exp(v - mx);
    const double lse = mx + std::log(sum);
    ASSERT_EQ(outs[0].top_logprobs.size(), 20u);
    for (const auto& tl : outs[0].top_logprobs) {
      EXPECT_NEAR(tl.logprob, want[static_cast<size_t>(tl.token)] - lse,
                  tolerance() * std::max(1.0, std::fabs(mx)))
          << "token " << tl.token;
    }
  }
}

// RunBatch, which must succeed and leave every KV block back in the pool.
BatchTiming RunTogether(Engine& engine, const std::vector<Request>& requests) {
  auto t = RunBatch(engine, requests);
  CHECK_OK(t.status());
  EXPECT_EQ(engine.stats().kv_blocks_used, 0) << "blocks still held after every request ended";
  return std::move(t).value();
}

// How far `got`'s top logprobs are from `ref`'s at one position, over the tokens both list:
// the largest difference of (logprob - the logprob of ref's best token), so a shift of the
// log-normalizer alone does not count. Infinity when ref's best token is not in got's list.
double LogprobError(const TokenOutput& got, const TokenOutput& ref) {
  auto find = [](const TokenOutput& o, TokenId t) -> std::optional<double> {
    for (const TokenLogprob& l : o.top_logprobs) {
      if (l.token == t) return l.logprob;
    }
    return std::nullopt;
  };
  const TokenId best = ref.top_logprobs.at(0).token;
  const std::optional<double> got_best = find(got, best);
  if (!got_best) return INFINITY;
  const double ref_best = ref.top_logprobs[0].logprob;
  double err = 0;
  for (const TokenLogprob& l : ref.top_logprobs) {
    if (auto g = find(got, l.token)) {
      err = std::max(err, std::fabs((*g - *got_best) - (l.logprob - ref_best)));
    }
  }
  return err;
}

// The engine's promises on this device with a real model: four greedy requests sharing a
// 40-token prefix, run alone (prefix cache off), all in one batch, again with their prompts from
// the prefix cache, and in a pool too small for them all at once (preempted and recomputed),
// every KV block back in the pool after each run. Each run is compared with the f32 CPU backend
// running them alone (the oracle: equal to transformers within 1e-4, the tests above):
//   - on the CPU, ids and logprobs identical;
//   - on CUDA (bf16 activations and KV; alone = batch-1 graphs with the streamed GEMVs, batched
//     = cuBLASLt GEMMs), the same ids up to a first divergence, which is allowed only on a near
//     tie: the oracle's lead of its token over ours there no more than twice the largest logprob
//     error this run shows at that position; and at every position up to it, that error within
//     kCudaLogprobError. A wrong block, position or cached prefix moves logprobs by O(1).
// On the H200 (2026-12-01) every run's error stayed <= 0.080 nats; two requests diverged, on
// leads of 0.001 and 0.002 nats where the error was ~0.02 (alone, and one of them batched too).
TEST_P(DefaultModelTest, TokensAloneEqualBatchedCachedAndPreempted) {
  constexpr int kGen = 40;
  constexpr double kCudaLogprobError = 0.25;  // nats: 3x the H200's worst, see above
  const std::string prefix =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends. Every morning she ran to the swings.";
  const char* suffixes[] = {" One day, she saw a big dog.", " Her mom said it was time to eat.",
                            " They found a shiny red ball.", " The sun was hot, so"};
  std::vector<Request> requests;
  for (const char* s : suffixes) {
    Request r;
    r.prompt = session_->tokenizer->Encode(prefix + s, true);
    r.params.temperature = 0;
    r.params.max_tokens = kGen;
    r.params.ignore_eos = true;
    r.params.num_logprobs = 20;
    requests.push_back(std::move(r));
  }
  const int shared = static_cast<int>(session_->tokenizer->Encode(prefix, true).size());
  ASSERT_GE(shared, 32) << "the prefix should fill two blocks";

  auto open = [&](const std::string& device, double kv_cache_gb, bool prefix_cache) {
    ModelFlags flags;
    flags.threads = 2;
    flags.device = device;
    flags.kv_cache_gb = kv_cache_gb;
    flags.prompt_cache_gb = prefix_cache ? -1 : 0;
    auto s = OpenSession(flags);
    CHECK_OK(s.status());
    return std::move(s).value();
  };
  const double block_gb = 16.0 * static_cast<double>(session_->kv_bytes_per_token) / 1e9;
  session_.reset();  // one engine's pool on the device at a time

  std::vector<std::vector<TokenOutput>> oracle;
  {
    auto s = open("cpu", 0.05, false);
    for (const Request& r : requests) oracle.push_back(RunTogether(*s->engine, {r}).outputs[0]);
  }
  auto check = [&](const BatchTiming& run, const std::string& what) {
    for (size_t i = 0; i < requests.size(); ++i) {
      const std::vector<TokenOutput>& got = run.outputs[i];
      const std::vector<TokenOutput>& want = oracle[i];
      ASSERT_EQ(got.size(), static_cast<size_t>(kGen)) << what << ", request " << i;
      if (!cuda()) {
        EXPECT_EQ(Ids(got), Ids(want)) << what << ", request " << i;
        for (size_t p = 0; p < got.size(); ++p) {
          EXPECT_EQ(LogprobError(got[p], want[p]), 0) << what << ", request " << i << " at " << p;
        }
        continue;
      }
      size_t p = 0;
      double worst = 0;
      for (; p < got.size() && got[p].token == want[p].token; ++p) {
        worst = std::max(worst, LogprobError(got[p], want[p]));
      }
      EXPECT_LE(worst, kCudaLogprobError) << what << ", request " << i;
      std::printf("  cuda %-26s request %zu: %2zu / %d ids the oracle's, logprob error <= %.3f",
                  what.c_str(), i, p, kGen, worst);
      if (p == got.size()) {
        std::printf("\n");
        continue;
      }
      double lead = INFINITY;  // the oracle's logprob of its token minus that of ours
      for (const TokenLogprob& l : want[p].top_logprobs) {
        if (l.token == got[p].token) lead = want[p].logprob - l.logprob;
      }
      const double err = LogprobError(got[p], want[p]);
      std::printf("; then %d for the oracle's %d, which leads by %.3f where the error is %.3f\n",
                  got[p].token, want[p].token, lead, err);
      EXPECT_LE(lead, 2 * err) << what << ", request " << i << ": diverged at " << p
                               << " where the oracle's choice was not a near tie";
    }
  };

  {
    auto s = open(GetParam(), 0.05, false);
    BatchTiming alone;
    for (const Request& r : requests)
      alone.outputs.push_back(RunTogether(*s->engine, {r}).outputs[0]);
    check(alone, "alone");
  }
  {
    auto s = open(GetParam(), 0.05, true);
    check(RunTogether(*s->engine, requests), "one batch");
    BatchTiming warm = RunTogether(*s->engine, requests);
    check(warm, "one batch, prefix cached");
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_GE(warm.cached_tokens[i], shared / 16 * 16) << "request " << i;
    }
  }
  {
    // Room for 10 blocks: one request needs 6 (a 50-odd-token prompt + 40 generated), the four
    // more than 10 even sharing their prefix's blocks.
    auto s = open(GetParam(), 10.5 * block_gb, true);
    ASSERT_EQ(s->num_kv_blocks, 10);
    check(RunTogether(*s->engine, requests), "preempted");
    EXPECT_GT(s->engine->stats().preemptions, 0u);
    std::printf("  %s: the preempted run had %llu preemptions\n", GetParam().c_str(),
                static_cast<unsigned long long>(s->engine->stats().preemptions));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DefaultModelTest, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// --kv-dtype f16 / bf16: the session builds a half-precision KV pool (half the bytes per token)
// and the default model still follows transformers' greedy trajectory through it.
TEST(DefaultModelKvDtypeTest, HalfPrecisionKvFollowsTheGreedyGolden) {
  for (const char* kv : {"f16", "bf16"}) {
    SCOPED_TRACE(kv);
    ModelFlags flags;
    flags.threads = 2;
    flags.device = "cpu";  // CUDA keeps bf16 pools only
    flags.kv_dtype = kv;
    auto s = OpenSession(flags);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    Session& session = **s;
    EXPECT_EQ(session.engine->config().kv_dtype, kv);
    EXPECT_EQ(session.kv_bytes_per_token * 2, session.model->KvBytesPerToken(DType::kF32));
    auto g = LoadJsonFile(session.model_path + "/golden.json");
    ASSERT_TRUE(g.ok());
    const auto prompt = (*g)["greedy"]["prompt_ids"].get<std::vector<TokenId>>();
    const auto want = (*g)["greedy"]["generated_ids"].get<std::vector<TokenId>>();
    const std::vector<TokenId> got =
        GreedyThroughEngine(*session.engine, prompt, static_cast<int>(want.size()));
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace loom
