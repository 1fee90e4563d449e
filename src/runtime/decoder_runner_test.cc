// DecoderRunner's StepAccelerator hook (the seam CUDA graphs use), on the CPU backend: a declined
// step runs eagerly with the same result, a taken step returns the accelerator's logits without
// the eager forward, and steps with an activation sink never reach the accelerator.
#include "runtime/decoder_runner.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "runtime/test_models.h"

namespace loom {
namespace {

class FakeAccelerator final : public StepAccelerator {
 public:
  explicit FakeAccelerator(bool take) : take_(take) {}
  StatusOr<bool> TryForward(const StepPlan& plan, Tensor* logits) override {
    ++calls;
    if (!take_) return false;
    *logits = HostTensor(DType::kF32, Shape{static_cast<int64_t>(plan.seqs.size()), 32});
    std::fill_n(logits->data_as<float>(), logits->numel(), 7.f);
    return true;
  }
  int calls = 0;

 private:
  bool take_;
};

StepPlan Decode() {
  StepPlan p;
  p.block_size = 4;
  p.seqs.push_back(ScheduledSeq{RequestId{1}, {3}, 0, {0}, 1});
  p.num_tokens = 1;
  p.num_logits = 1;
  return p;
}

TEST(DecoderRunnerTest, AcceleratorDeclinesTakesAndIsSkippedWithASink) {
  CpuBackend be(1);
  DecoderRunner plain(test_models::TinyLlama(&be), 4, 4, DType::kF32);
  DecoderRunner runner(test_models::TinyLlama(&be), 4, 4, DType::kF32);
  auto want = ExecuteToHost(plain, Decode());
  ASSERT_TRUE(want.ok());

  auto decline = std::make_unique<FakeAccelerator>(false);
  FakeAccelerator* d = decline.get();
  runner.set_step_accelerator(std::move(decline));
  auto got = ExecuteToHost(runner, Decode());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(d->calls, 1);
  EXPECT_EQ(*got, *want);  // declined: the eager forward ran

  auto take = std::make_unique<FakeAccelerator>(true);
  FakeAccelerator* t = take.get();
  runner.set_step_accelerator(std::move(take));
  got = ExecuteToHost(runner, Decode());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(t->calls, 1);
  EXPECT_EQ(*got, std::vector<float>(32, 7.f));

  int seen = 0;
  ActivationSink sink = [&](const std::string&, const Tensor&) { ++seen; };
  runner.set_activation_sink(&sink);
  got = ExecuteToHost(runner, Decode());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(t->calls, 1);  // not asked: debugging needs the eager activations
  EXPECT_GT(seen, 0);
  EXPECT_EQ(*got, *want);
}

// A seq may ask for the logits of its last num_logits tokens (a decode with drafts to verify):
// each row equals what a step ending at that token computes, and seqs asking for none add no
// rows. Block size 4; every request has its own blocks.
TEST(DecoderRunnerTest, EmitsTheLogitsRowsItIsAskedFor) {
  CpuBackend be(1);
  DecoderRunner runner(test_models::TinyLlama(&be), 8, 4, DType::kF32);
  auto step = [&](std::vector<ScheduledSeq> seqs) {
    StepPlan p;
    p.block_size = 4;
    for (ScheduledSeq& s : seqs) {
      p.num_tokens += static_cast<int>(s.tokens.size());
      p.num_logits += s.num_logits;
      p.seqs.push_back(std::move(s));
    }
    return ExecuteToHost(runner, p);
  };
  // Alone: the logits after 5, after 5 6 and after 5 6 7 (each a fresh prefill).
  std::vector<std::vector<float>> alone;
  for (int n = 1; n <= 3; ++n) {
    std::vector<TokenId> prompt = {5, 6, 7};
    prompt.resize(static_cast<size_t>(n));
    auto got = step({ScheduledSeq{RequestId{1}, prompt, 0, {0}, 1}});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), 32u);
    alone.push_back(*got);
  }
  // One step: a chunk asking for nothing, then 5 6 7 asking for its last two rows and a decode.
  auto got = step({ScheduledSeq{RequestId{2}, {9, 9}, 0, {1}, 0},
                   ScheduledSeq{RequestId{3}, {5, 6, 7}, 0, {2}, 2},
                   ScheduledSeq{RequestId{4}, {5}, 0, {3}, 1}});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 3u * 32u);
  auto row = [&](size_t k) {
    return std::vector<float>(got->begin() + static_cast<std::ptrdiff_t>(k * 32),
                              got->begin() + static_cast<std::ptrdiff_t>((k + 1) * 32));
  };
  // The CPU backend is exact whatever the batch (f32, per-row arithmetic).
  EXPECT_EQ(row(0), alone[1]);
  EXPECT_EQ(row(1), alone[2]);
  EXPECT_EQ(row(2), alone[0]);

  // More rows than tokens is a broken plan, refused by name.
  auto bad = step({ScheduledSeq{RequestId{5}, {5}, 0, {4}, 2}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace loom
