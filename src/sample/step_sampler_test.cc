// StepSampler on a FakeDeviceBackend (the device's sampling ops on host memory): every way a row
// can be sampled gives exactly the host Sampler's token and logprobs, each row goes the way its
// parameters allow, and the runner's GreedyIds fast path is asked only for steps of one plain
// argmax row per sequence.
#include "sample/step_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/hash_uniform.h"
#include "sample/fake_device_backend.h"

namespace loom {
namespace {

constexpr int kVocab = 96;

// A runner that only answers GreedyIds (with ids 7, 8, ...) and counts the calls.
class GreedyOnlyRunner final : public ModelRunner {
 public:
  explicit GreedyOnlyRunner(bool take) : take_(take) {}
  StatusOr<StepLogits> Execute(const StepPlan&) override { return InternalError("not used"); }
  bool GreedyIds(const StepPlan& plan, std::span<int32_t> ids) override {
    ++calls;
    EXPECT_EQ(ids.size(), plan.seqs.size());
    if (!take_) return false;
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(7 + i);
    return true;
  }
  int vocab_size() const override { return kVocab; }
  int max_model_len() const override { return 1024; }
  int calls = 0;

 private:
  bool take_;
};

// One logits row per entry of `params`, in `seqs` sequences of the given row counts.
struct Step {
  StepPlan plan;
  std::vector<SamplingParams> params;
  std::vector<std::vector<TokenId>> outputs;  // per row: the tokens it follows
  std::vector<float> logits;                  // [rows, kVocab]
};

Step MakeStep(const std::vector<int>& rows_per_seq, std::vector<SamplingParams> params) {
  Step s;
  s.params = std::move(params);
  size_t row = 0;
  for (size_t i = 0; i < rows_per_seq.size(); ++i) {
    ScheduledSeq seq;
    seq.request_id = RequestId{i + 1};
    seq.num_logits = rows_per_seq[i];
    seq.tokens.assign(static_cast<size_t>(rows_per_seq[i]), 3);
    s.plan.seqs.push_back(seq);
    for (int j = 0; j < rows_per_seq[i]; ++j, ++row) {
      std::vector<TokenId> out;
      for (size_t t = 0; t < 4 + row + static_cast<size_t>(j); ++t) {
        out.push_back(static_cast<TokenId>((row * 13 + t * 7) % kVocab));
      }
      s.outputs.push_back(out);
    }
    s.plan.num_logits += rows_per_seq[i];
  }
  CHECK_EQ(row, s.params.size());
  s.logits.resize(row * kVocab);
  for (size_t i = 0; i < s.logits.size(); ++i) s.logits[i] = HashUniform(99, i, -4.f, 8.f);
  return s;
}

std::vector<StepRow> Rows(const Step& s) {
  std::vector<StepRow> rows;
  size_t row = 0;
  for (const ScheduledSeq& seq : s.plan.seqs) {
    for (int j = 0; j < seq.num_logits; ++j, ++row) {
      StepRow& r = rows.emplace_back();
      r.request = seq.request_id;
      r.ctx.params = &s.params[row];
      r.ctx.output = s.outputs[row];
      r.ctx.seed = 1000 + row;
      r.last_of_seq = j + 1 == seq.num_logits;
    }
  }
  return rows;
}

// The step sampled by `sampler` with its logits on `be`, next to the host Sampler's results.
// masks[k], when given and not empty, is row k's grammar mask.
// forced[k], when given, is row k's forced token (-1: none).
void ExpectHostResults(const Step& s, StepSampler& sampler, Backend* be, ModelRunner& runner,
                       const std::vector<std::vector<uint32_t>>& masks = {},
                       const std::vector<TokenId>& forced = {}) {
  std::vector<StepRow> rows = Rows(s);
  for (size_t k = 0; k < masks.size(); ++k) rows[k].ctx.allowed = masks[k];
  for (size_t k = 0; k < forced.size(); ++k) rows[k].ctx.forced = forced[k];
  StepLogits logits;
  logits.backend = be;
  logits.logits = HostTensor(DType::kF32, Shape{static_cast<int64_t>(rows.size()), kVocab});
  std::copy(s.logits.begin(), s.logits.end(), logits.logits.data_as<float>());
  for (int32_t k = 0; k < static_cast<int32_t>(rows.size()); ++k) logits.rows.push_back(k);
  const std::vector<StatusOr<SampleResult>> got = sampler.Sample(s.plan, rows, logits, runner);
  ASSERT_EQ(got.size(), rows.size());
  Sampler host(kVocab);
  for (size_t k = 0; k < rows.size(); ++k) {
    std::vector<float> row(s.logits.begin() + static_cast<std::ptrdiff_t>(k * kVocab),
                           s.logits.begin() + static_cast<std::ptrdiff_t>((k + 1) * kVocab));
    StatusOr<SampleResult> want = host.SampleRow(row, rows[k].ctx);
    ASSERT_TRUE(want.ok() && got[k].ok()) << "row " << k;
    EXPECT_EQ(got[k]->token, want->token) << "row " << k;
    EXPECT_EQ(got[k]->logprob, want->logprob) << "row " << k;
    ASSERT_EQ(got[k]->top_logprobs.size(), want->top_logprobs.size()) << "row " << k;
    for (size_t i = 0; i < want->top_logprobs.size(); ++i) {
      EXPECT_EQ(got[k]->top_logprobs[i].token, want->top_logprobs[i].token) << k;
      EXPECT_EQ(got[k]->top_logprobs[i].logprob, want->top_logprobs[i].logprob) << k;
    }
  }
}

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}
SamplingParams Draw() {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  return p;
}

// Six rows, one per way: the plain argmax and draw, penalties on a greedy row, a bias on a
// draw, logprobs of a greedy row (all on the device), and an XTC draw (host).
TEST(StepSamplerTest, EveryWayGivesTheHostSamplersResult) {
  SamplingParams penalties = Greedy();
  penalties.repetition_penalty = 1.3f;
  penalties.frequency_penalty = 0.4f;
  SamplingParams bias = Draw();
  bias.logit_bias = {{5, 4.0f}, {9, -30.0f}};
  SamplingParams logprobs = Greedy();
  logprobs.num_logprobs = 3;
  SamplingParams xtc = Draw();
  xtc.xtc_probability = 0.5f;
  xtc.xtc_threshold = 0.05f;
  const Step s = MakeStep({1, 1, 1, 1, 1, 1}, {Greedy(), Draw(), penalties, bias, logprobs, xtc});
  FakeDeviceBackend be(/*edits=*/true, /*logprobs=*/true);
  GreedyOnlyRunner runner(true);
  StepSampler sampler(StepSamplerConfig{kVocab, 1, true});
  ExpectHostResults(s, sampler, &be, runner);
  EXPECT_EQ(runner.calls, 0);  // not every row a plain argmax
  EXPECT_EQ(sampler.stats().rows_on_device, 5);
  EXPECT_EQ(sampler.stats().rows_on_host, 1);
  EXPECT_EQ(be.draw_rows_, 2);
  EXPECT_EQ(be.edited_rows_, 2);
  EXPECT_EQ(be.logprob_rows_, 1);

  // Without the edit and logprob ops, or with device sampling off, the same results.
  FakeDeviceBackend plain(false, false);
  StepSampler host_edits(StepSamplerConfig{kVocab, 1, true});
  ExpectHostResults(s, host_edits, &plain, runner);
  EXPECT_EQ(host_edits.stats().rows_on_device, 2);
  StepSampler off(StepSamplerConfig{kVocab, 2, false});
  ExpectHostResults(s, off, &be, runner);
  EXPECT_EQ(off.stats().rows_on_device, 0);
  EXPECT_EQ(off.stats().rows_on_host, 6);
}

// A sequence with several logits rows (1 + k for speculative decoding): only its last row uses
// the request's edit cache on the device; the earlier rows with edits are sampled on the host.
TEST(StepSamplerTest, OnlyTheLastRowOfASequenceIsEditedOnTheDevice) {
  SamplingParams penalties = Greedy();
  penalties.presence_penalty = 1.5f;
  const Step s = MakeStep({3, 1}, {penalties, penalties, penalties, Greedy()});
  FakeDeviceBackend be(true, true);
  GreedyOnlyRunner runner(true);
  StepSampler sampler(StepSamplerConfig{kVocab, 1, true});
  ExpectHostResults(s, sampler, &be, runner);
  EXPECT_EQ(runner.calls, 0);
  EXPECT_EQ(sampler.stats().rows_on_host, 2);
  EXPECT_EQ(sampler.stats().rows_on_device, 2);
  EXPECT_EQ(be.edited_rows_, 1);
}

// GreedyIds answers a step of one plain argmax row per sequence; a runner that declines leaves
// it to the device argmax; other steps never ask.
TEST(StepSamplerTest, GreedyIdsOnlyForOnePlainArgmaxRowPerSequence) {
  FakeDeviceBackend be(true, true);
  const Step greedy = MakeStep({1, 1, 1}, {Greedy(), Greedy(), Greedy()});
  GreedyOnlyRunner takes(true);
  StepSampler sampler(StepSamplerConfig{kVocab, 1, true});
  const std::vector<StepRow> rows = Rows(greedy);
  StepLogits logits;
  logits.backend = &be;
  logits.logits = HostTensor(DType::kF32, Shape{3, kVocab});
  logits.rows = {0, 1, 2};
  const auto got = sampler.Sample(greedy.plan, rows, logits, takes);
  EXPECT_EQ(takes.calls, 1);
  ASSERT_EQ(got.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(got[k]->token, static_cast<TokenId>(7 + k));
  EXPECT_EQ(be.argmax_rows_, 0);

  GreedyOnlyRunner declines(false);
  ExpectHostResults(greedy, sampler, &be, declines);
  EXPECT_EQ(declines.calls, 1);
  EXPECT_EQ(be.argmax_rows_, 3);

  GreedyOnlyRunner never(true);
  ExpectHostResults(MakeStep({2, 1}, {Greedy(), Greedy(), Greedy()}), sampler, &be, never);
  ExpectHostResults(MakeStep({1, 1}, {Greedy(), Draw()}), sampler, &be, never);
  EXPECT_EQ(never.calls, 0);
}

// Rows under grammar masks are masked where the logits are and sampled there (greedy, draw,
// edited), except a row asking for logprobs (those are of the unmasked row); the tokens are the
// host Sampler's, and the fast GreedyIds path is not taken for a masked step.
TEST(StepSamplerTest, GrammarMaskedRowsOnTheDevice) {
  SamplingParams penalties = Greedy();
  penalties.repetition_penalty = 1.3f;
  SamplingParams logprobs = Greedy();
  logprobs.num_logprobs = 2;
  const Step s = MakeStep({1, 1, 1, 1, 1}, {Greedy(), Draw(), penalties, logprobs, Greedy()});
  // A few allowed ids per row; row 1's mask is two words short of the vocabulary (ids >= 32 are
  // then not allowed either); the last row is free.
  std::vector<std::vector<uint32_t>> masks = {{0x00010002u, 0, 0x80000000u},
                                              {0x0000F00Fu},
                                              {0, 0x00300000u, 0x1u},
                                              {0x00000024u, 0, 0},
                                              {}};
  FakeDeviceBackend be(/*edits=*/true, /*logprobs=*/true, /*masks=*/true);
  GreedyOnlyRunner runner(true);
  StepSampler sampler(StepSamplerConfig{kVocab, 1, true});
  ExpectHostResults(s, sampler, &be, runner, masks);
  EXPECT_EQ(runner.calls, 0);
  EXPECT_EQ(sampler.stats().rows_on_device, 4);
  EXPECT_EQ(sampler.stats().masked_rows_on_device, 3);
  EXPECT_EQ(sampler.stats().rows_on_host, 1);  // the logprobs row
  EXPECT_EQ(be.masked_rows_, 3);

  // All rows plain greedy but masked: still no GreedyIds.
  const Step greedy = MakeStep({1, 1}, {Greedy(), Greedy()});
  ExpectHostResults(greedy, sampler, &be, runner, {{0x4u, 0, 0}, {0, 0, 0x10u}});
  EXPECT_EQ(runner.calls, 0);

  // A backend without MaskLogits: masked rows on the host, same tokens.
  FakeDeviceBackend no_masks(true, true, /*masks=*/false);
  StepSampler host(StepSamplerConfig{kVocab, 1, true});
  ExpectHostResults(s, host, &no_masks, runner, masks);
  EXPECT_EQ(host.stats().rows_on_host, 4);
  EXPECT_EQ(host.stats().masked_rows_on_device, 0);
}

// Forced rows (a reasoning budget closing its section) give their token whatever the logits or a
// mask say, without a device op or a host copy; one that asks for logprobs goes to the host,
// which gives the forced token's logprob in its row. Forced rows keep GreedyIds away.
TEST(StepSamplerTest, ForcedRowsGiveTheirToken) {
  SamplingParams logprobs = Greedy();
  logprobs.num_logprobs = 2;
  const Step s = MakeStep({1, 1, 1, 1}, {Greedy(), Draw(), logprobs, Greedy()});
  const std::vector<TokenId> forced = {5, -1, 40, 60};
  const std::vector<std::vector<uint32_t>> masks = {{}, {}, {}, {0x1u, 0, 0}};  // 60 not allowed
  FakeDeviceBackend be(/*edits=*/true, /*logprobs=*/true, /*masks=*/true);
  GreedyOnlyRunner runner(true);
  StepSampler sampler(StepSamplerConfig{kVocab, 1, true});
  ExpectHostResults(s, sampler, &be, runner, masks, forced);
  EXPECT_EQ(runner.calls, 0);
  EXPECT_EQ(sampler.stats().rows_on_device, 1);  // the draw
  EXPECT_EQ(sampler.stats().rows_on_host, 1);    // the forced row with logprobs
  EXPECT_EQ(be.masked_rows_, 0);
  EXPECT_EQ(be.argmax_rows_, 0);

  std::vector<StepRow> rows = Rows(s);
  for (size_t k = 0; k < forced.size(); ++k) rows[k].ctx.forced = forced[k];
  StepLogits logits;
  logits.backend = &be;
  logits.logits = HostTensor(DType::kF32, Shape{4, kVocab});
  std::copy(s.logits.begin(), s.logits.end(), logits.logits.data_as<float>());
  logits.rows = {0, 1, 2, 3};
  const auto got = sampler.Sample(s.plan, rows, logits, runner);
  EXPECT_EQ(got[0]->token, 5);
  EXPECT_EQ(got[2]->token, 40);
  EXPECT_EQ(got[3]->token, 60);
  // Row 2's logprob of 40: log_softmax of its logits.
  double z = 0.0;
  for (int v = 0; v < kVocab; ++v) z += std::exp(static_cast<double>(s.logits[2 * kVocab + v]));
  EXPECT_NEAR(got[2]->logprob, s.logits[2 * kVocab + 40] - std::log(z), 1e-4);
  ASSERT_EQ(got[2]->top_logprobs.size(), 2u);
}

}  // namespace
}  // namespace loom
