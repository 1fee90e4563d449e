// DecoderRunner's StepAccelerator hook (the seam CUDA graphs use), on the CPU backend: a declined
// step runs eagerly with the same result, a taken step returns the accelerator's logits without
// the eager forward, and steps with an activation sink or hidden rows never reach the
// accelerator. The logits rows and the hidden rows (embeddings) a plan asks for.
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

// Prompt-only seqs ask for final hidden rows [hidden_begin, hidden_end) instead of logits: each
// row is the model's "final_norm" activation of that token (what lm_head reads), the same alone
// or next to other seqs, and a step with hidden rows runs eagerly (the accelerator returns logits
// only).
TEST(DecoderRunnerTest, EmitsTheHiddenRowsItIsAskedFor) {
  CpuBackend be(1);
  DecoderRunner runner(test_models::TinyLlama(&be), 8, 4, DType::kF32);
  const int64_t d = runner.hidden_size();
  ASSERT_GT(d, 0);
  // The reference: every token's final-normed state of 5 6 7 8 9 through the activation sink.
  std::vector<float> ref;
  ActivationSink sink = [&](const std::string& name, const Tensor& t) {
    if (name != "final_norm") return;
    ref.resize(static_cast<size_t>(t.numel()));
    be.CopyToHost(t, ref.data());
  };
  runner.set_activation_sink(&sink);
  StepPlan all;
  all.block_size = 4;
  ScheduledSeq every{RequestId{1}, {5, 6, 7, 8, 9}, 0, {0, 1}, 5};
  all.seqs.push_back(every);
  all.num_tokens = 5;
  all.num_logits = 5;
  ASSERT_TRUE(runner.Execute(all).ok());
  runner.set_activation_sink(nullptr);
  ASSERT_EQ(ref.size(), static_cast<size_t>(5 * d));

  auto take = std::make_unique<FakeAccelerator>(true);
  FakeAccelerator* t = take.get();
  runner.set_step_accelerator(std::move(take));
  StepPlan p;
  p.block_size = 4;
  ScheduledSeq gen{RequestId{2}, {9, 9}, 0, {2}, 1};
  ScheduledSeq mid{RequestId{3}, {5, 6, 7, 8, 9}, 0, {3, 4}, 0};  // tokens 1..3 of it
  mid.hidden_begin = 1;
  mid.hidden_end = 4;
  ScheduledSeq last{RequestId{4}, {5, 6, 7, 8, 9}, 0, {5, 6}, 0};  // its last token
  last.hidden_begin = 4;
  last.hidden_end = 5;
  p.seqs = {gen, mid, last};
  p.num_tokens = 12;
  p.num_logits = 1;
  p.num_hidden = 4;
  auto out = runner.Execute(p);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(t->calls, 0);
  EXPECT_EQ(out->rows.size(), 1u);
  const std::vector<float> hidden = HiddenToHost(*out, p.num_hidden);
  ASSERT_EQ(hidden.size(), static_cast<size_t>(4 * d));
  auto ref_row = [&](int64_t tok) {
    return std::vector<float>(ref.begin() + tok * d, ref.begin() + (tok + 1) * d);
  };
  auto got_row = [&](int64_t h) {
    return std::vector<float>(hidden.begin() + h * d, hidden.begin() + (h + 1) * d);
  };
  EXPECT_EQ(got_row(0), ref_row(1));
  EXPECT_EQ(got_row(1), ref_row(2));
  EXPECT_EQ(got_row(2), ref_row(3));
  EXPECT_EQ(got_row(3), ref_row(4));

  // A range past the seq's tokens is a broken plan, refused by name.
  StepPlan bad = p;
  bad.seqs[2].hidden_end = 6;
  EXPECT_EQ(runner.Execute(bad).status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace loom
