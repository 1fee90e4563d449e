// ModelRunner: the seam between the engine and the model. It owns the model and the KV pools
// (per layer, [num_blocks, block_size, num_kv_heads, head_dim] for K and for V) and computes one
// StepPlan at a time. Device-agnostic: the CPU and CUDA runners implement the same interface.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backend/draw_params.h"
#include "backend/logit_edit.h"
#include "base/status.h"
#include "sched/step_plan.h"

namespace loom {

// What the engine needs back for one sampled row (ModelRunner::ExecuteAndSample). The runner may
// always return the logits instead (kTokenOnHost).
enum class RowSampling : uint8_t {
  kLogits,  // the row's logits: the engine's Sampler runs on the host
  kGreedy,  // only the argmax of the unmodified logits (see IsPlainGreedy in sample/sampler.h)
  kDraw,    // only the seeded draw RowSpec::draw describes (see IsPlainDraw in sample/sampler.h)
};

// One sampled row of ExecuteAndSample.
struct RowSpec {
  RowSampling mode = RowSampling::kLogits;
  DrawParams draw;  // kDraw only
  // kGreedy / kDraw: the row's logit_bias, penalties and min_tokens masking
  // (BuildLogitEdits in sample/sampler.h; LogitEdit::row unused), applied before the argmax or
  // the draw. Only from the engine when the runner says edits_rows_on_device(); points into the
  // engine's per-request LogitEditCache, valid for the ExecuteAndSample call.
  std::span<const LogitEdit> edits;
  // kGreedy / kDraw: >= 0 (<= 20): the runner also returns the row's logprobs
  // (StepOutput::logprobs), log_softmax of the row after its edits (LogprobsOnEditedRow in
  // sample/sampler.h). Only from the engine when the runner says logprobs_on_device().
  int num_logprobs = -1;
};

// A row's logprobs as SampleRow reports them (SampleResult::logprob, top_logprobs): its token's,
// and the num_logprobs best (token, logprob), best first, equal logits by lower id.
struct RowLogprobs {
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;
};

// StepOutput::tokens entries that are not token ids.
inline constexpr int32_t kTokenOnHost = -1;  // the row's logits are in StepOutput::logits
inline constexpr int32_t kTokenNaN = -2;     // sampled on the runner: the row holds a NaN logit
inline constexpr int32_t kTokenNone = -3;    // sampled on the runner: every logit is -inf

// Move-only: `logits` may point into `owned`, whose buffer a move keeps but a copy would not.
struct StepOutput {
  StepOutput() = default;
  StepOutput(StepOutput&&) = default;
  StepOutput& operator=(StepOutput&&) = default;
  StepOutput(const StepOutput&) = delete;
  StepOutput& operator=(const StepOutput&) = delete;

  // [number of sampled rows], plan order: the token of a kGreedy / kDraw row the runner sampled
  // itself (the host sampler's choice), or one of the kToken* codes above.
  std::vector<int32_t> tokens;
  // f32 [number of rows with tokens[k] == kTokenOnHost, vocab] row-major, in plan order. Points
  // into runner-owned memory (or into `owned`); writable (the sampler uses it as scratch) and
  // valid until the runner's next Execute / ExecuteAndSample.
  std::span<float> logits;
  std::vector<float> owned;  // backing store of `logits` for runners without their own
  // [number of sampled rows] when some row the runner sampled has RowSpec::num_logprobs >= 0
  // (its entry; the others' are empty), else empty.
  std::vector<RowLogprobs> logprobs;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Computes the step: writes K/V for every scheduled token at its slot (see step_plan.h) and
  // returns the logits of the sampled rows, in plan order: host f32
  // [plan.num_sampled, vocab_size()] row-major. plan.preempted / plan.finished name requests
  // whose per-request runner state (if any) can be dropped. Called from the engine thread only.
  // An error fails every request of the step; the engine keeps running.
  virtual StatusOr<std::vector<float>> Execute(const StepPlan& plan) = 0;

  // Execute, where `rows` [plan.num_sampled] says per sampled row what the engine needs: a
  // runner that can sample where the logits live (on the device) returns kGreedy / kDraw rows
  // as token ids and copies only the other rows' logits to the host. The default returns every
  // row's logits (from Execute). Same KV writes and errors as Execute.
  virtual StatusOr<StepOutput> ExecuteAndSample(const StepPlan& plan,
                                                std::span<const RowSpec> rows) {
    ASSIGN_OR_RETURN(std::vector<float> logits, Execute(plan));
    StepOutput out;
    out.tokens.assign(rows.size(), kTokenOnHost);
    out.owned = std::move(logits);
    out.logits = std::span<float>(out.owned);
    return out;
  }

  // Whether ExecuteAndSample takes kGreedy / kDraw rows with RowSpec::edits (and applies them
  // where the logits are). If not, the engine sends such rows as kLogits.
  virtual bool edits_rows_on_device() const { return false; }
  // Whether ExecuteAndSample takes such rows with RowSpec::num_logprobs >= 0 too. If not, the
  // engine sends rows that ask for logprobs as kLogits.
  virtual bool logprobs_on_device() const { return false; }

  // Rows of the logits; token ids are in [0, vocab_size()).
  virtual int vocab_size() const = 0;
  // The model's context length in tokens (prompt + generated).
  virtual int max_model_len() const = 0;
};

}  // namespace loom
