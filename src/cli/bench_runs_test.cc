// The measurements behind `loom bench --shared-prefix` and `--overhead` on the embedded default
// model (block size 16), through the real engine: the warm request of a shared-prefix pair reuses
// exactly the whole blocks of the prefix, and the no-op engine runs the same decode workload to
// the end with the same scheduling and KV bookkeeping as the real one.
#include "cli/bench_runs.h"

#include <gtest/gtest.h>

#include "spec/draft_proposer.h"

namespace loom {
namespace {

class BenchRunsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelFlags flags;
    flags.threads = 2;
    flags.device = "cpu";  // engine bookkeeping; no device-specific numbers
    auto s = OpenSession(flags);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = std::move(s).value();
    ASSERT_EQ(session_->flags.block_size, 16);
  }

  std::unique_ptr<Session> session_;
};

TEST_F(BenchRunsTest, WarmRequestReusesTheWholeBlocksOfTheSharedPrefix) {
  struct Case {
    int prefix_tokens, want_warm_cached;
  };
  // 100 -> 6 whole blocks; 96 is exactly 6 blocks; 15 fills none. Each case has a new seed, so
  // its cold request finds nothing from the previous cases.
  const Case cases[] = {{100, 96}, {96, 96}, {15, 0}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    auto t = RunSharedPrefix(*session_->engine, c.prefix_tokens, 16, seed++);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->cold_cached_tokens, 0) << c.prefix_tokens;
    EXPECT_EQ(t->warm_cached_tokens, c.want_warm_cached) << c.prefix_tokens;
    EXPECT_GT(t->cold_ttft_s, 0);
    EXPECT_GT(t->warm_ttft_s, 0);
  }
  EngineStats st = session_->engine->stats();
  EXPECT_EQ(st.prefix_cache_hits, 2u);  // the warm requests of the first two cases
  EXPECT_EQ(st.prefix_cache_hit_tokens, 96u + 96u);
}

TEST_F(BenchRunsTest, SharedPrefixBeyondTheContextIsAnError) {
  const int too_long = session_->engine->max_model_len();
  auto t = RunSharedPrefix(*session_->engine, too_long, 16, 1);
  EXPECT_FALSE(t.ok());
}

TEST_F(BenchRunsTest, NoOpEngineRunsTheDecodeWorkloadLikeTheRealOne) {
  auto noop = MakeNoOpEngine(*session_);
  ASSERT_TRUE(noop.ok()) << noop.status().ToString();
  Engine& real = *session_->engine;
  Engine& fake = **noop;
  ASSERT_EQ(fake.vocab_size(), real.vocab_size());
  constexpr int kConcurrency = 4, kPrompt = 8, kGen = 12;
  auto want = RunBatch(real, DecodeRequests(kConcurrency, kPrompt, kGen, real.vocab_size(), 7));
  auto got = RunBatch(fake, DecodeRequests(kConcurrency, kPrompt, kGen, real.vocab_size(), 7));
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();

  // One prefill step for all four, then kGen - 1 decode steps on both engines.
  EXPECT_EQ(want->steps_after_first, kGen - 1);
  EXPECT_EQ(got->steps_after_first, kGen - 1);
  EXPECT_GT(got->mean_step_s(), 0);
  ASSERT_EQ(got->outputs.size(), static_cast<size_t>(kConcurrency));
  for (int i = 0; i < kConcurrency; ++i) {
    // Greedy over constant logits picks id 0; ignore_eos keeps the request to max_tokens.
    EXPECT_EQ(Ids(got->outputs[i]), std::vector<TokenId>(kGen, 0)) << i;
    EXPECT_EQ(got->finish_reasons[i], FinishReason::kLength) << i;
    EXPECT_EQ(want->outputs[i].size(), static_cast<size_t>(kGen)) << i;
  }
  const EngineStats a = real.stats(), b = fake.stats();
  EXPECT_EQ(b.steps, a.steps);
  EXPECT_EQ(b.computed_tokens, a.computed_tokens);
  EXPECT_EQ(b.generated_tokens, a.generated_tokens);
  EXPECT_EQ(b.kv_blocks_cached, a.kv_blocks_cached);  // the same blocks filled and hashed
  EXPECT_EQ(b.kv_blocks_used, 0);
}

// `loom bench --replay-drafts`'s run on the real default model: drafts replaying the greedy
// output are all accepted at acceptance 1 (rows then decode 1 + 4 tokens a step), none at 0, and
// the tokens are the ones generated without drafts either way.
TEST(BenchReplayTest, ReplayedDraftsOnTheDefaultModelAreLossless) {
  ModelFlags flags;
  flags.threads = 2;
  flags.device = "cpu";
  flags.draft_kind = "ngram";
  flags.num_draft_tokens = 4;
  flags.draft_token_cost = "0";
  auto s = OpenSession(flags);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Engine& engine = *(*s)->engine;
  constexpr int kConcurrency = 3, kPrompt = 8, kGen = 41;
  const auto requests = [&] {
    return DecodeRequests(kConcurrency, kPrompt, kGen, engine.vocab_size(), 21);
  };
  engine.SetDraftProposer(nullptr);
  auto plain = RunBatch(engine, requests());
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(engine.stats().draft_tokens, 0u);
  for (const double accept : {1.0, 0.0}) {
    auto replay = std::make_unique<ReplayProposer>(accept, engine.vocab_size());
    const std::vector<Request> reqs = requests();
    for (size_t i = 0; i < reqs.size(); ++i) replay->Record(reqs[i].prompt, Ids(plain->outputs[i]));
    engine.SetDraftProposer(std::move(replay));
    const EngineStats before = engine.stats();
    auto got = RunBatch(engine, requests());
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const EngineStats after = engine.stats();
    for (int i = 0; i < kConcurrency; ++i) {
      EXPECT_EQ(Ids(got->outputs[i]), Ids(plain->outputs[i])) << accept << " request " << i;
    }
    const uint64_t drafted = after.draft_tokens - before.draft_tokens;
    const uint64_t accepted = after.accepted_draft_tokens - before.accepted_draft_tokens;
    EXPECT_GT(drafted, 0u) << accept;
    if (accept == 1.0) {
      EXPECT_EQ(accepted, drafted);
      EXPECT_LE(got->steps_after_first, (kGen - 1) / 5 + 2);
    } else {
      EXPECT_EQ(accepted, 0u);
    }
  }
}

}  // namespace
}  // namespace loom
