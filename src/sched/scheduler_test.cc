#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace loom {
namespace {

using Ids = std::vector<BlockId>;
using Tokens = std::vector<TokenId>;

Tokens Range(int begin, int end) {
  Tokens t(end - begin);
  std::iota(t.begin(), t.end(), begin);
  return t;
}

RequestId R(uint64_t v) { return RequestId{v}; }

class SchedulerTest : public ::testing::Test {
 protected:
  void Init(int num_blocks, SchedulerConfig cfg, bool prefix_cache = true) {
    KvCacheConfig kv_cfg;
    kv_cfg.num_blocks = num_blocks;
    kv_cfg.block_size = 4;
    kv_cfg.enable_prefix_cache = prefix_cache;
    kv_cfg.root_hash = RootBlockHash("m", "f32", "t");
    kv_ = std::make_unique<KvCacheManager>(kv_cfg);
    sched_ = std::make_unique<Scheduler>(cfg, kv_.get());
  }

  // Schedules, checks invariants, then "executes": every sampled row gets token 1000 + step.
  StepPlan Step() {
    StepPlan plan = sched_->Schedule();
    sched_->CheckIntegrity();
    const TokenId t = 1000 + num_steps_++;
    std::vector<std::span<const TokenId>> accepted;
    for (const ScheduledSeq& seq : plan.seqs) {
      accepted.emplace_back(&t, static_cast<size_t>(seq.num_logits));
    }
    sched_->Update(plan, accepted);
    sched_->CheckIntegrity();
    return plan;
  }

  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  int num_steps_ = 0;
};

SchedulerConfig Config(int max_batched_tokens, int max_num_seqs) {
  SchedulerConfig cfg;
  cfg.max_batched_tokens = max_batched_tokens;
  cfg.max_num_seqs = max_num_seqs;
  cfg.max_model_len = 1024;
  return cfg;
}

TEST_F(SchedulerTest, ChunkedPrefillSplitsAtTheTokenBudget) {
  Init(16, Config(4, 8));
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 10), 5).ok());
  StepPlan p1 = Step();
  ASSERT_EQ(p1.seqs.size(), 1u);
  EXPECT_EQ(p1.seqs[0].tokens, Range(0, 4));
  EXPECT_EQ(p1.seqs[0].start_pos, 0);
  EXPECT_EQ(p1.seqs[0].block_table, (Ids{0}));
  EXPECT_EQ(p1.seqs[0].num_logits, 0);
  EXPECT_EQ(p1.num_tokens, 4);
  EXPECT_EQ(p1.num_logits, 0);

  StepPlan p2 = Step();
  EXPECT_EQ(p2.seqs[0].tokens, Range(4, 8));
  EXPECT_EQ(p2.seqs[0].start_pos, 4);
  EXPECT_EQ(p2.seqs[0].block_table, (Ids{0, 1}));

  StepPlan p3 = Step();
  EXPECT_EQ(p3.seqs[0].tokens, Range(8, 10));
  EXPECT_EQ(p3.seqs[0].block_table, (Ids{0, 1, 2}));
  EXPECT_EQ(p3.seqs[0].num_logits, 1);

  // Decode: the sampled token (1002) is computed next.
  StepPlan p4 = Step();
  EXPECT_EQ(p4.seqs[0].tokens, (Tokens{1002}));
  EXPECT_EQ(p4.seqs[0].start_pos, 10);
  EXPECT_EQ(p4.seqs[0].num_logits, 1);
  const SchedRequest* req = sched_->Find(R(1));
  EXPECT_EQ(req->num_computed_tokens, 11);
  EXPECT_EQ(req->tokens.back(), 1003);
  EXPECT_EQ(req->num_output_tokens(), 2);
}

// A request held for a restore stops admission (no overtaking) while running requests keep
// stepping; released, it is admitted with the prefix its pins kept, and the pins are gone after
// any Schedule.
TEST_F(SchedulerTest, AHeldRequestStopsAdmissionButNotTheRunningBatch) {
  Init(16, Config(64, 8));
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 6), 4).ok());
  Step();  // R1 runs
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(100, 110), 2).ok());
  ASSERT_TRUE(sched_->AddRequest(R(3), Range(200, 203), 2).ok());
  EXPECT_EQ(sched_->FrontWaiting()->id, R(2));
  sched_->SetHeld(R(2), true);
  StepPlan held = Step();
  ASSERT_EQ(held.seqs.size(), 1u);
  EXPECT_EQ(held.seqs[0].request_id, R(1));
  EXPECT_EQ(sched_->num_waiting(), 2);

  // Pins taken for R2 while it waits (what the engine does once its blocks are restored).
  std::optional<BlockId> pinned = kv_->AllocateForRestore(R(2));
  ASSERT_TRUE(pinned.has_value());
  const std::vector<BlockHash> hashes = kv_->PrefixHashes(Range(100, 110), "");
  ASSERT_TRUE(kv_->CacheRestored(*pinned, hashes[0], kv_->root_hash()));
  sched_->SetHeld(R(2), false);
  StepPlan admitted = Step();
  ASSERT_EQ(admitted.seqs.size(), 3u);
  EXPECT_EQ(admitted.seqs[1].request_id, R(2));
  EXPECT_EQ(admitted.seqs[1].start_pos, 4);  // the restored block is its hit
  EXPECT_EQ(admitted.seqs[1].block_table[0], *pinned);
  EXPECT_EQ(sched_->Find(R(2))->num_cached_tokens, 4);
  EXPECT_EQ(kv_->num_pinned_blocks(), 0);

  // A held request keeps its pins across steps (its restore lands over several); once it is no
  // longer held, a Schedule that does not admit it releases them.
  ASSERT_TRUE(sched_->AddRequest(R(4), Range(300, 305), 2).ok());
  sched_->SetHeld(R(4), true);
  ASSERT_TRUE(kv_->AllocateForRestore(R(4)).has_value());
  Step();
  EXPECT_EQ(kv_->num_pinned_blocks(), 1);
  Step();
  EXPECT_EQ(kv_->num_pinned_blocks(), 1);
  EXPECT_TRUE(sched_->Finish(R(4)));  // and Finish frees them
  EXPECT_EQ(kv_->num_pinned_blocks(), 0);
  sched_->CheckIntegrity();
}

// Pins give way before any running row is preempted: a held request's restore must never cost
// the running batch.
TEST_F(SchedulerTest, PinsAreReleasedBeforeARunningRowIsPreempted) {
  Init(4, Config(64, 8));  // 4 blocks of 4 tokens
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 4), 10).ok());
  Step();  // R1: one full block
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(100, 110), 2).ok());
  sched_->SetHeld(R(2), true);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(kv_->AllocateForRestore(R(2)).has_value());
  EXPECT_EQ(kv_->num_free_blocks(), 0);
  StepPlan p = Step();  // R1 grows into a second block: the pins go, nothing is preempted
  EXPECT_TRUE(p.preempted.empty());
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(kv_->num_pinned_blocks(), 0);
  EXPECT_TRUE(sched_->Finish(R(2)));
  sched_->CheckIntegrity();
}

// A seq whose step scores more than one token (num_logits 1 + k, as speculative decoding plans
// them) may get several tokens accepted at once: they are appended in order, and the next step
// computes all of them.
TEST_F(SchedulerTest, UpdateAppendsSeveralAcceptedTokens) {
  Init(16, Config(64, 8));
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 6), 8).ok());
  StepPlan p1 = sched_->Schedule();
  ASSERT_EQ(p1.seqs.size(), 1u);
  p1.seqs[0].num_logits = 2;  // as if the prompt's last two rows were scored
  const Tokens accepted = {500, 501};
  const std::vector<std::span<const TokenId>> spans = {accepted};
  sched_->Update(p1, spans);
  sched_->CheckIntegrity();
  const SchedRequest* req = sched_->Find(R(1));
  EXPECT_EQ(req->num_computed_tokens, 6);
  EXPECT_EQ(req->num_output_tokens(), 2);
  StepPlan p2 = sched_->Schedule();
  ASSERT_EQ(p2.seqs.size(), 1u);
  EXPECT_EQ(p2.seqs[0].tokens, (Tokens{500, 501}));
  EXPECT_EQ(p2.seqs[0].start_pos, 6);
  EXPECT_EQ(p2.seqs[0].num_logits, 1);
  EXPECT_EQ(p2.seqs[0].block_table, (Ids{0, 1}));
}

// A decode with a draft is its pending token and the draft, 1 + k logits rows; only the pending
// token and the accepted drafts count as computed, and the token after them is pending next.
// Drafts are cut to max_new_tokens, the context and the budget, and never preempt anyone.
TEST_F(SchedulerTest, DraftsAreVerifiedAndOnlyTheAcceptedOnesComputed) {
  Init(16, Config(64, 8));
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 6), 8).ok());
  Step();  // prefill: output 1000 pending
  sched_->SetDraft(R(1), {50, 51, 52});
  StepPlan p = sched_->Schedule();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].tokens, (Tokens{1000, 50, 51, 52}));
  EXPECT_EQ(p.seqs[0].start_pos, 6);
  EXPECT_EQ(p.seqs[0].num_logits, 4);
  EXPECT_EQ(p.num_logits, 4);
  EXPECT_EQ(p.num_tokens, 4);
  EXPECT_FALSE(p.seqs[0].last_by_length);
  EXPECT_EQ(p.seqs[0].block_table.size(), 3u);  // covers position 9
  // 50 accepted, 51 rejected: the row scoring 51 gave 77.
  const Tokens accepted = {50, 77};
  sched_->Update(p, std::vector<std::span<const TokenId>>{accepted});
  sched_->CheckIntegrity();
  const SchedRequest* req = sched_->Find(R(1));
  EXPECT_EQ(req->num_computed_tokens, 8);  // 6 prompt + 1000 + 50
  EXPECT_EQ(req->tokens, (Tokens{0, 1, 2, 3, 4, 5, 1000, 50, 77}));
  EXPECT_TRUE(req->draft.empty());
  StepPlan next = sched_->Schedule();  // no draft set: a plain decode of 77
  ASSERT_EQ(next.seqs.size(), 1u);
  EXPECT_EQ(next.seqs[0].tokens, (Tokens{77}));
  EXPECT_EQ(next.seqs[0].start_pos, 8);
  EXPECT_EQ(next.seqs[0].num_logits, 1);
  const TokenId t = 78;
  sched_->Update(next, std::vector<std::span<const TokenId>>{std::span<const TokenId>(&t, 1)});
  // Output so far: 1000 50 77 78 (4 of 8): at most 3 drafts leave room for the token after them.
  sched_->SetDraft(R(1), {1, 2, 3, 4, 5, 6});
  StepPlan capped = sched_->Schedule();
  EXPECT_EQ(capped.seqs[0].tokens, (Tokens{78, 1, 2, 3}));
  const Tokens all = {1, 2, 3, 9};
  sched_->Update(capped, std::vector<std::span<const TokenId>>{all});
  EXPECT_EQ(sched_->Find(R(1))->num_output_tokens(), 8);
  EXPECT_EQ(sched_->Find(R(1))->num_computed_tokens, 13);
  EXPECT_TRUE(sched_->Finish(R(1)));
  sched_->CheckIntegrity();
  EXPECT_EQ(kv_->stats().num_used_blocks, 0);

  // A draft the pool has no room for is dropped; the decode runs alone, nobody is preempted.
  Init(3, Config(64, 8));
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(0, 7), 4).ok());
  ASSERT_TRUE(sched_->AddRequest(R(3), Range(100, 103), 2).ok());
  Step();  // both prefilled: R2 holds 2 blocks (7 + 1 pending), R3 one
  sched_->SetDraft(R(2), {5, 6, 7, 8});
  StepPlan tight = sched_->Schedule();
  ASSERT_EQ(tight.seqs.size(), 2u);
  EXPECT_TRUE(tight.preempted.empty());
  EXPECT_EQ(tight.seqs[0].tokens.size(), 1u);
  EXPECT_EQ(tight.seqs[0].num_logits, 1);
}

// Jump-forward's tokens, appended while waiting (forced at admission) and while running, are
// computed by the next step with the tokens before them, and only the last one is scored.
TEST_F(SchedulerTest, AppendedTokensAreComputedWithTheNextStep) {
  Init(16, Config(64, 8));
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 6), 12).ok());
  const Tokens at_admission = {700, 701};
  sched_->AppendTokens(R(1), at_admission);
  StepPlan p1 = Step();
  ASSERT_EQ(p1.seqs.size(), 1u);
  EXPECT_EQ(p1.seqs[0].tokens, (Tokens{0, 1, 2, 3, 4, 5, 700, 701}));
  EXPECT_EQ(p1.seqs[0].num_logits, 1);
  const Tokens forced = {800, 801, 802};
  sched_->AppendTokens(R(1), forced);  // after the sampled 1000
  StepPlan p2 = Step();
  ASSERT_EQ(p2.seqs.size(), 1u);
  EXPECT_EQ(p2.seqs[0].tokens, (Tokens{1000, 800, 801, 802}));
  EXPECT_EQ(p2.seqs[0].start_pos, 8);
  EXPECT_EQ(p2.seqs[0].num_logits, 1);
  EXPECT_EQ(p2.seqs[0].block_table, (Ids{0, 1, 2}));
  const SchedRequest* req = sched_->Find(R(1));
  EXPECT_EQ(req->num_computed_tokens, 12);
  EXPECT_EQ(req->num_output_tokens(), 7);  // 700 701 1000 800 801 802 1001
}

// The step that samples a request's last token by length says so (max_tokens; admission keeps
// prompt + max_tokens within the context); a runner that queues the next step ahead skips such
// rows.
TEST_F(SchedulerTest, MarksTheLastStepByLength) {
  SchedulerConfig cfg = Config(64, 8);
  cfg.max_model_len = 12;
  Init(16, cfg);
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 2), 3).ok());  // max_tokens 3
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(0, 9), 3).ok());  // and ends at the context
  std::vector<std::pair<bool, bool>> last;                     // per step: (R1, R2)
  for (int i = 0; i < 3; ++i) {
    StepPlan p = Step();
    ASSERT_EQ(p.seqs.size(), 2u);
    EXPECT_TRUE(p.seqs[0].num_logits == 1 && p.seqs[1].num_logits == 1);
    last.emplace_back(p.seqs[0].last_by_length, p.seqs[1].last_by_length);
  }
  // Each samples outputs 1, 2, 3; the third is the last.
  const std::vector<std::pair<bool, bool>> want = {{false, false}, {false, false}, {true, true}};
  EXPECT_EQ(last, want);
}

TEST_F(SchedulerTest, DecodesFirstThenFillsTheBudgetWithAPrefillChunk) {
  Init(32, Config(8, 8));
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 3), 10).ok());
  Step();  // prefill A
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(50, 70), 10).ok());
  StepPlan p = Step();
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(p.seqs[0].request_id, R(1));
  EXPECT_EQ(p.seqs[0].tokens.size(), 1u);
  EXPECT_EQ(p.seqs[1].request_id, R(2));
  EXPECT_EQ(p.seqs[1].tokens, Range(50, 57));  // 8 - 1 tokens of budget left
  EXPECT_EQ(p.num_tokens, 8);
  // Next step: A decodes again, B continues its prefill where it stopped.
  StepPlan q = Step();
  EXPECT_EQ(q.seqs[1].start_pos, 7);
  EXPECT_EQ(q.seqs[1].tokens, Range(57, 64));
}

TEST_F(SchedulerTest, RowLimitQueuesTheRestFifo) {
  Init(32, Config(64, 2));
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(sched_->AddRequest(R(i), Range(0, 2), 4).ok());
  StepPlan p = Step();
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(sched_->num_running(), 2);
  EXPECT_EQ(sched_->num_waiting(), 1);
  EXPECT_TRUE(sched_->Finish(R(1)));
  StepPlan q = Step();
  ASSERT_EQ(q.seqs.size(), 2u);
  EXPECT_EQ(q.seqs[0].request_id, R(2));
  EXPECT_EQ(q.seqs[1].request_id, R(3));
  EXPECT_EQ(q.finished, (std::vector<RequestId>{R(1)}));
}

TEST_F(SchedulerTest, HeadOfQueueThatDoesNotFitBlocksLaterRequests) {
  Init(4, Config(64, 8), /*prefix_cache=*/false);
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 8), 4).ok());   // 2 blocks now
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(0, 12), 4).ok());  // 3 blocks: does not fit
  ASSERT_TRUE(sched_->AddRequest(R(3), Range(0, 2), 2).ok());   // would fit, must not overtake
  StepPlan p = Step();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].request_id, R(1));
  EXPECT_EQ(sched_->num_waiting(), 2);
  sched_->Finish(R(1));
  StepPlan q = Step();
  ASSERT_EQ(q.seqs.size(), 2u);  // 2 takes 3 blocks, 3 the last one
  EXPECT_EQ(q.seqs[0].request_id, R(2));
  EXPECT_EQ(q.seqs[1].request_id, R(3));
  EXPECT_EQ(sched_->num_waiting(), 0);
}

TEST_F(SchedulerTest, PreemptsTheNewestAndRecomputesItWithItsOutput) {
  Init(3, Config(64, 8), /*prefix_cache=*/true);
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 4), 8).ok());    // block 0, full
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(10, 14), 8).ok());  // block 1, full
  StepPlan p1 = Step();
  ASSERT_EQ(p1.seqs.size(), 2u);
  // Each sampled a token at position 4: both need a second block, one is left (block 2).
  StepPlan p2 = Step();
  EXPECT_EQ(p2.preempted, (std::vector<RequestId>{R(2)}));
  ASSERT_EQ(p2.seqs.size(), 1u);
  EXPECT_EQ(p2.seqs[0].request_id, R(1));
  EXPECT_EQ(p2.seqs[0].block_table, (Ids{0, 2}));
  EXPECT_EQ(sched_->num_preemptions(), 1u);
  const SchedRequest* b = sched_->Find(R(2));
  EXPECT_FALSE(b->running);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_EQ(b->tokens, (Tokens{10, 11, 12, 13, 1000}));  // keeps its output
  // While A holds every block B stays queued; finishing A lets B back in with a prefix hit
  // on its own cached first block: only the output token is recomputed.
  sched_->Finish(R(1));
  StepPlan p3 = Step();
  ASSERT_EQ(p3.seqs.size(), 1u);
  EXPECT_EQ(p3.seqs[0].request_id, R(2));
  EXPECT_EQ(p3.seqs[0].start_pos, 4);
  EXPECT_EQ(p3.seqs[0].tokens, (Tokens{1000}));
  EXPECT_EQ(p3.seqs[0].block_table[0], 1);
  EXPECT_EQ(p3.seqs[0].num_logits, 1);
  EXPECT_EQ(sched_->Find(R(2))->num_cached_tokens, 0);  // usage reports the first admission
}

TEST_F(SchedulerTest, PreemptsTheNewestEvenWhenOlderOnesStillFit) {
  Init(2, Config(64, 8), /*prefix_cache=*/false);
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 4), 4).ok());
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(0, 4), 4).ok());
  Step();
  // A grows first; nothing is free, so B (the newest) is preempted and A takes its block.
  StepPlan p = Step();
  EXPECT_EQ(p.preempted, (std::vector<RequestId>{R(2)}));
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].block_table, (Ids{0, 1}));
  sched_->Finish(R(1));
  // B alone: prompt + 1 output = 5 tokens = 2 blocks; it runs again from scratch.
  StepPlan q = Step();
  EXPECT_EQ(q.seqs[0].tokens.size(), 5u);
  EXPECT_EQ(q.seqs[0].start_pos, 0);
}

TEST_F(SchedulerTest, TheNewestPreemptsItselfWhenItCannotGrow) {
  Init(2, Config(64, 8), /*prefix_cache=*/false);
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 2), 4).ok());  // grows inside block 0
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(0, 4), 4).ok());  // needs a second block
  Step();
  StepPlan p = Step();
  EXPECT_EQ(p.preempted, (std::vector<RequestId>{R(2)}));
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].request_id, R(1));
  EXPECT_EQ(sched_->num_waiting(), 1);
  // No admission in a step that preempted, even though a block is free now.
  EXPECT_EQ(kv_->num_free_blocks(), 1);
}

TEST_F(SchedulerTest, PrefixHitSkipsCachedBlocks) {
  Init(16, Config(64, 8));
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 10), 4).ok());
  Step();
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(0, 10), 4).ok());
  StepPlan p = Step();
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(p.seqs[1].request_id, R(2));
  EXPECT_EQ(p.seqs[1].start_pos, 8);
  EXPECT_EQ(p.seqs[1].tokens, (Tokens{8, 9}));
  EXPECT_EQ(p.seqs[1].block_table, (Ids{0, 1, 3}));
  EXPECT_EQ(sched_->Find(R(2))->num_cached_tokens, 8);
  EXPECT_EQ(kv_->stats().prefix_hit_tokens, 8u);
}

TEST_F(SchedulerTest, KvBudgetQueuesJoinersAndRejectsLoneOversizedRequests) {
  SchedulerConfig cfg = Config(64, 8);
  cfg.bytes_per_token_kv = 1000;
  cfg.kv_budget_bytes = 20000;  // 20 tokens of projected KV for all running requests
  Init(64, cfg);
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 6), 6).ok());  // 12 tokens
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(0, 6), 6).ok());  // 12 more: over budget, waits
  StepPlan p = Step();
  EXPECT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(sched_->num_waiting(), 1);
  EXPECT_EQ(sched_->running_projected_kv_bytes(), 12000);
  sched_->Finish(R(1));
  EXPECT_EQ(Step().seqs[0].request_id, R(2));

  Status s = sched_->AddRequest(R(3), Range(0, 15), 6);  // 21 tokens alone
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("--kv-budget"), std::string::npos) << s.message();
  EXPECT_EQ(sched_->Find(R(3)), nullptr);
}

TEST_F(SchedulerTest, AdmissionRejectionsNameTheLimit) {
  SchedulerConfig cfg = Config(64, 8);
  cfg.max_model_len = 100;
  cfg.bytes_per_token_kv = 1'000'000;  // 1 MB per token
  cfg.memory_budget_bytes = 1'050'000'000;
  cfg.model_bytes = 1'000'000'000;  // leaves 50 tokens
  Init(20, cfg);                    // 80 tokens of pool

  Status ctx = sched_->CheckAdmission(90, 20);
  EXPECT_EQ(ctx.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(ctx.message(),
            "the request needs 90 prompt + 20 max_tokens = 110 tokens, but the model's context "
            "length is 100 tokens; shorten the prompt or lower max_tokens");

  Status mem = sched_->CheckAdmission(40, 20);
  EXPECT_EQ(mem.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(mem.message(),
            "memory_admission: the request needs 40 prompt + 20 max_tokens = 60 tokens = 0.06 GB "
            "of KV, but --memory-budget 1.05 GB leaves 0.05 GB after the model (50 tokens); "
            "lower max_tokens or raise --memory-budget");

  EXPECT_TRUE(sched_->CheckAdmission(40, 10).ok());
  EXPECT_EQ(sched_->CheckAdmission(0, 10).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sched_->CheckAdmission(5, 0).code(), StatusCode::kInvalidArgument);

  SchedulerConfig small = Config(64, 8);
  Init(2, small);  // 8 tokens of pool
  Status pool = sched_->CheckAdmission(6, 3);
  EXPECT_EQ(pool.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.message(),
            "the request needs 6 prompt + 3 max_tokens = 9 tokens of KV (3 blocks of 4), but the "
            "KV pool holds only 2 blocks (8 tokens); lower max_tokens or enlarge the KV cache "
            "(--kv-cache-gb)");
  EXPECT_TRUE(sched_->CheckAdmission(6, 2).ok());
}

TEST_F(SchedulerTest, AbortMidPrefillAndMidDecodeFreesBlocks) {
  Init(8, Config(4, 8), /*prefix_cache=*/false);
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 12), 4).ok());
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(0, 2), 4).ok());
  Step();  // R1's first chunk uses the whole budget
  EXPECT_EQ(kv_->stats().num_used_blocks, 1);
  EXPECT_TRUE(sched_->Finish(R(1)));  // mid-prefill
  EXPECT_EQ(kv_->stats().num_used_blocks, 0);
  sched_->CheckIntegrity();
  EXPECT_EQ(Step().finished, (std::vector<RequestId>{R(1)}));
  Step();  // R2 decoding
  EXPECT_EQ(kv_->stats().num_used_blocks, 1);
  EXPECT_TRUE(sched_->Finish(R(2)));
  EXPECT_FALSE(sched_->Finish(R(2)));
  EXPECT_EQ(kv_->stats().num_used_blocks, 0);
  EXPECT_FALSE(sched_->HasWork());
  StepPlan p = Step();
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.finished, (std::vector<RequestId>{R(2)}));
}

// Prompt-only requests (embeddings): hidden rows instead of logits, chunked like prompts, no
// prefix cache either way; the caller finishes them once their prompt is computed.
class PromptOnlyTest : public SchedulerTest {
 protected:
  // Schedule + Update (no token is sampled for a prompt-only seq); then every prompt-only
  // request whose prompt is computed is finished, as the engine does, before CheckIntegrity.
  StepPlan StepAndFinish() {
    StepPlan plan = sched_->Schedule();
    const TokenId t = 1000 + num_steps_++;
    std::vector<std::span<const TokenId>> accepted;
    for (const ScheduledSeq& seq : plan.seqs) {
      accepted.emplace_back(&t, static_cast<size_t>(seq.num_logits));
    }
    sched_->Update(plan, accepted);
    for (const ScheduledSeq& seq : plan.seqs) {
      const SchedRequest* req = sched_->Find(seq.request_id);
      if (req->hidden != HiddenRows::kNone && req->num_computed_tokens == req->num_tokens()) {
        sched_->Finish(seq.request_id);
      }
    }
    sched_->CheckIntegrity();
    return plan;
  }
};

TEST_F(PromptOnlyTest, HiddenRowsPerPoolingAcrossChunks) {
  Init(16, Config(4, 8));
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 10), 0, "", HiddenRows::kAll).ok());
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(20, 26), 0, "", HiddenRows::kLast).ok());
  ASSERT_TRUE(sched_->AddRequest(R(3), Range(30, 36), 0, "", HiddenRows::kFirst).ok());
  struct Want {
    uint64_t id;
    int start, n, begin, end;
  };
  // Budget 4 a step: R1 takes 3 steps (4, 4, 2), then R2 and R3 share the budget.
  const std::vector<std::vector<Want>> steps = {
      {{1, 0, 4, 0, 4}}, {{1, 4, 4, 0, 4}}, {{1, 8, 2, 0, 2}, {2, 0, 2, 0, 0}},
      {{2, 2, 4, 3, 4}}, {{3, 0, 4, 0, 1}}, {{3, 4, 2, 0, 0}},
  };
  for (size_t s = 0; s < steps.size(); ++s) {
    StepPlan plan = StepAndFinish();
    ASSERT_EQ(plan.seqs.size(), steps[s].size()) << "step " << s;
    int hidden = 0;
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      const ScheduledSeq& seq = plan.seqs[i];
      const Want& w = steps[s][i];
      EXPECT_EQ(seq.request_id, R(w.id)) << "step " << s;
      EXPECT_EQ(seq.start_pos, w.start) << "step " << s;
      EXPECT_EQ(static_cast<int>(seq.tokens.size()), w.n) << "step " << s;
      EXPECT_EQ(seq.hidden_begin, w.begin) << "step " << s;
      EXPECT_EQ(seq.hidden_end, w.end) << "step " << s;
      EXPECT_EQ(seq.num_logits, 0) << "step " << s;
      EXPECT_FALSE(seq.last_by_length);
      hidden += seq.num_hidden();
    }
    EXPECT_EQ(plan.num_hidden, hidden);
    EXPECT_EQ(plan.num_logits, 0);
  }
  EXPECT_FALSE(sched_->HasWork());
  // Every block is back and none entered the prefix cache.
  EXPECT_EQ(kv_->stats().num_free_blocks, 16);
  EXPECT_EQ(kv_->stats().num_cached_blocks, 0);
}

TEST_F(PromptOnlyTest, BypassesThePrefixCache) {
  Init(16, Config(64, 8));
  // A generation request caches its prompt's two full blocks...
  ASSERT_TRUE(sched_->AddRequest(R(1), Range(0, 9), 1).ok());
  StepAndFinish();
  sched_->Finish(R(1));
  ASSERT_EQ(kv_->stats().num_cached_blocks, 2);
  const uint64_t queries = kv_->stats().prefix_queries;
  // ...which a prompt-only request of the same tokens does not reuse (it computes all 9).
  ASSERT_TRUE(sched_->AddRequest(R(2), Range(0, 9), 0, "", HiddenRows::kAll).ok());
  StepPlan plan = StepAndFinish();
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(plan.seqs[0].start_pos, 0);
  EXPECT_EQ(plan.seqs[0].tokens, Range(0, 9));
  EXPECT_EQ(plan.num_hidden, 9);
  EXPECT_EQ(kv_->stats().prefix_queries, queries);  // not a prefix-cache query either
  EXPECT_EQ(sched_->Find(R(2)), nullptr);
  EXPECT_EQ(kv_->stats().num_cached_blocks, 2);
}

TEST_F(PromptOnlyTest, AdmissionTakesZeroNewTokensAndChecksTheContext) {
  SchedulerConfig cfg = Config(64, 8);
  cfg.max_model_len = 8;
  Init(16, cfg);
  EXPECT_TRUE(sched_->CheckAdmission(8, 0, /*prompt_only=*/true).ok());
  const Status too_long = sched_->CheckAdmission(9, 0, /*prompt_only=*/true);
  EXPECT_EQ(too_long.code(), StatusCode::kOutOfRange);
  EXPECT_NE(too_long.message().find("9 input tokens"), std::string::npos) << too_long.message();
  EXPECT_EQ(sched_->CheckAdmission(4, 1, /*prompt_only=*/true).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(sched_->CheckAdmission(4, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(sched_->AddRequest(R(1), Range(0, 4), 0).ok());
}

TEST(SchedulerConfigTest, ValidateNamesTheFlag) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 0;
  EXPECT_NE(cfg.Validate().message().find("--batch"), std::string::npos);
  cfg = SchedulerConfig();
  cfg.kv_budget_bytes = 5;
  EXPECT_FALSE(cfg.Validate().ok());
  EXPECT_TRUE(SchedulerConfig().Validate().ok());
}

}  // namespace
}  // namespace loom
