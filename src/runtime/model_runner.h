// ModelRunner: the seam between the engine and the model. It owns the model and the KV pools
// (per layer, [num_blocks, block_size, num_kv_heads, head_dim] for K and for V) and computes one
// StepPlan at a time, leaving the step's logits where it computed them (on the device for CUDA):
// what to do with them — device or host sampling, logit edits, logprobs — is the StepSampler's
// decision (sample/step_sampler.h), not the runner's. Device-agnostic: the CPU and CUDA runners
// implement the same interface.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "base/check.h"
#include "base/status.h"
#include "sched/step_plan.h"

namespace loom {

// The logits of one step, where the runner left them.
//
//   plan.seqs:  s0 (num_logits 1) | s1 (num_logits 0) | s2 (num_logits 3)
//   rows:       [ r(s0) , r(s2,0) , r(s2,1) , r(s2,2) ]      (plan.num_logits entries)
//   logits:     f32 [>= 1 + max(rows), vocab]; row rows[k] holds the k-th logits row
struct StepLogits {
  Tensor logits;               // f32 [m, vocab] on `backend`'s device, row-major
  std::vector<int32_t> rows;   // [plan.num_logits]: the row of `logits` of each logits row
  Backend* backend = nullptr;  // where `logits` lives (its ops may read and edit it in place)
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Computes the step: writes K/V for every scheduled token at its slot (see step_plan.h) and
  // returns the logits rows the plan asks for (ScheduledSeq::num_logits), valid and writable
  // until the next Execute. plan.preempted / plan.finished name requests whose per-request
  // runner state (if any) can be dropped. Called from the engine thread only. An error fails
  // every request of the step; the engine keeps running.
  virtual StatusOr<StepLogits> Execute(const StepPlan& plan) = 0;

  // A fast path for a step whose every sequence has exactly one logits row, all sampled as the
  // plain argmax (no edits, no logprobs): called right after Execute(plan), it either writes
  // each row's argmax to `ids` [plan.seqs.size()] (Backend::ArgmaxRows codes) and returns true —
  // a runner may use the wait for them to queue the likely next step on the device — or touches
  // nothing and returns false (the caller takes the argmax of the logits itself).
  virtual bool GreedyIds(const StepPlan& plan, std::span<int32_t> ids) {
    (void)plan;
    (void)ids;
    return false;
  }

  // Rows of the logits; token ids are in [0, vocab_size()).
  virtual int vocab_size() const = 0;
  // The model's context length in tokens (prompt + generated).
  virtual int max_model_len() const = 0;
};

// Execute, then the logits rows copied to the host: f32 [plan.num_logits, vocab] row-major, plan
// order (tests and tools that compare logits; the engine samples through StepSampler).
inline StatusOr<std::vector<float>> ExecuteToHost(ModelRunner& runner, const StepPlan& plan) {
  ASSIGN_OR_RETURN(StepLogits out, runner.Execute(plan));
  const size_t vocab = static_cast<size_t>(runner.vocab_size());
  std::vector<float> host(out.rows.size() * vocab);
  if (out.rows.empty()) return host;
  CHECK(out.backend != nullptr) << "ExecuteToHost: logits without a backend";
  std::vector<float> all(static_cast<size_t>(out.logits.numel()));
  out.backend->CopyToHost(out.logits, all.data());
  for (size_t k = 0; k < out.rows.size(); ++k) {
    const float* src = all.data() + static_cast<size_t>(out.rows[k]) * vocab;
    std::copy(src, src + vocab, host.begin() + static_cast<std::ptrdiff_t>(k * vocab));
  }
  return host;
}

}  // namespace loom
