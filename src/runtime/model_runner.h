// ModelRunner: the seam between the engine and the model. It owns the model and the KV pools
// (per layer, [num_blocks, block_size, num_kv_heads, head_dim] for K and for V) and computes one
// StepPlan at a time. Device-agnostic: the CPU and CUDA runners implement the same interface.
#pragma once

#include <vector>

#include "base/status.h"
#include "sched/step_plan.h"

namespace loom {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Computes the step: writes K/V for every scheduled token at its slot (see step_plan.h) and
  // returns the logits of the sampled rows, in plan order: host f32
  // [plan.num_sampled, vocab_size()] row-major. plan.preempted / plan.finished name requests
  // whose per-request runner state (if any) can be dropped. Called from the engine thread only.
  // An error fails every request of the step; the engine keeps running.
  virtual StatusOr<std::vector<float>> Execute(const StepPlan& plan) = 0;

  // Rows of the logits; token ids are in [0, vocab_size()).
  virtual int vocab_size() const = 0;
  // The model's context length in tokens (prompt + generated).
  virtual int max_model_len() const = 0;
};

}  // namespace loom
