// NoOpRunner against DecoderRunner on the same plans: same validation errors, same logits
// layout, every logit 0; a prefill chunk that samples nothing returns no rows.
#include "runtime/noop_runner.h"

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "runtime/decoder_runner.h"
#include "runtime/test_models.h"

namespace loom {
namespace {

// Block size 4: a 1-token decode over 5 cached tokens, a sampled 3-token prefill and an
// unsampled 4-token chunk.
StepPlan Mixed() {
  StepPlan p;
  p.block_size = 4;
  p.seqs.push_back(ScheduledSeq{RequestId{1}, {3}, 5, {0, 1}, 1});
  p.seqs.push_back(ScheduledSeq{RequestId{2}, {4, 5, 6}, 0, {2}, 1});
  p.seqs.push_back(ScheduledSeq{RequestId{3}, {7, 8, 9, 10}, 0, {3}, 0});
  p.num_tokens = 8;
  p.num_logits = 2;
  return p;
}

TEST(NoOpRunnerTest, SameLayoutAsTheDecoderRunnerWithZeroLogits) {
  CpuBackend be(1);
  DecoderRunner real(test_models::TinyLlama(&be), 4, 4, DType::kF32);
  NoOpRunner noop(&be, 32, 64, 4, 4);
  EXPECT_EQ(noop.vocab_size(), real.vocab_size());
  EXPECT_EQ(noop.max_model_len(), real.max_model_len());

  auto want = ExecuteToHost(real, Mixed());
  auto got = ExecuteToHost(noop, Mixed());
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), want->size());
  EXPECT_EQ(*got, std::vector<float>(2 * 32, 0.f));

  StepPlan chunk;
  chunk.block_size = 4;
  chunk.seqs.push_back(ScheduledSeq{RequestId{4}, {1, 2, 3, 4}, 0, {0}, 0});
  chunk.num_tokens = 4;
  got = ExecuteToHost(noop, chunk);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
}

TEST(NoOpRunnerTest, RejectsWhatTheDecoderRunnerRejects) {
  CpuBackend be(1);
  DecoderRunner real(test_models::TinyLlama(&be), 4, 4, DType::kF32);
  NoOpRunner noop(&be, 32, 64, 4, 4);
  StepPlan bad_block = Mixed();
  bad_block.seqs[1].block_table = {4};  // == num_blocks
  StepPlan bad_size = Mixed();
  bad_size.block_size = 8;
  for (const StepPlan& p : {bad_block, bad_size}) {
    auto want = ExecuteToHost(real, p);
    auto got = ExecuteToHost(noop, p);
    ASSERT_FALSE(want.ok());
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().ToString(), want.status().ToString());
  }
}

}  // namespace
}  // namespace loom
