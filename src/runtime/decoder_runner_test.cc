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
  p.seqs.push_back(ScheduledSeq{RequestId{1}, {3}, 0, {0}, true});
  p.num_tokens = 1;
  p.num_sampled = 1;
  return p;
}

TEST(DecoderRunnerTest, AcceleratorDeclinesTakesAndIsSkippedWithASink) {
  CpuBackend be(1);
  DecoderRunner plain(test_models::TinyLlama(&be), 4, 4, DType::kF32);
  DecoderRunner runner(test_models::TinyLlama(&be), 4, 4, DType::kF32);
  auto want = plain.Execute(Decode());
  ASSERT_TRUE(want.ok());

  auto decline = std::make_unique<FakeAccelerator>(false);
  FakeAccelerator* d = decline.get();
  runner.set_step_accelerator(std::move(decline));
  auto got = runner.Execute(Decode());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(d->calls, 1);
  EXPECT_EQ(*got, *want);  // declined: the eager forward ran

  auto take = std::make_unique<FakeAccelerator>(true);
  FakeAccelerator* t = take.get();
  runner.set_step_accelerator(std::move(take));
  got = runner.Execute(Decode());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(t->calls, 1);
  EXPECT_EQ(*got, std::vector<float>(32, 7.f));

  int seen = 0;
  ActivationSink sink = [&](const std::string&, const Tensor&) { ++seen; };
  runner.set_activation_sink(&sink);
  got = runner.Execute(Decode());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(t->calls, 1);  // not asked: debugging needs the eager activations
  EXPECT_GT(seen, 0);
  EXPECT_EQ(*got, *want);
}

// The CPU backend has no ArgmaxRows / SampleRows: kGreedy and kDraw rows come back as logits, the
// same as Execute's.
TEST(DecoderRunnerTest, ExecuteAndSampleOnCpuReturnsEveryRowsLogits) {
  CpuBackend be(1);
  DecoderRunner plain(test_models::TinyLlama(&be), 4, 4, DType::kF32);
  DecoderRunner runner(test_models::TinyLlama(&be), 4, 4, DType::kF32);
  StepPlan p = Decode();
  p.seqs.push_back(ScheduledSeq{RequestId{2}, {5, 6}, 0, {1}, true});
  p.seqs.push_back(ScheduledSeq{RequestId{3}, {7}, 0, {2}, false});
  p.num_tokens = 4;
  p.num_sampled = 2;
  auto want = plain.Execute(p);
  ASSERT_TRUE(want.ok());
  ASSERT_EQ(want->size(), 64u);
  std::vector<RowSpec> modes(2);
  modes[0].mode = RowSampling::kGreedy;
  modes[1].mode = RowSampling::kDraw;
  modes[1].draw.temperature = 0.8f;
  auto got = runner.ExecuteAndSample(p, modes);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->tokens, (std::vector<int32_t>{kTokenOnHost, kTokenOnHost}));
  EXPECT_EQ(std::vector<float>(got->logits.begin(), got->logits.end()), *want);
  EXPECT_EQ(runner.rows_sampled_on_device(), 0);

  const std::vector<RowSpec> one = {RowSpec{RowSampling::kGreedy, {}, {}}};
  EXPECT_EQ(runner.ExecuteAndSample(p, one).status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace loom
