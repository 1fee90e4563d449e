// NoOpRunner: a ModelRunner that does a real runner's per-step host work but no forward pass, so
// that `loom bench --overhead` can measure what a step costs besides the model.
//
// Per step it does what DecoderRunner::Execute does on its eager path, in the same order and
// with the same code: validate the plan and flatten it (PlanSlices), build the flat host arrays
// (token ids, positions, CSR page tables, slot mapping, sampled rows: BuildHostForwardBatch),
// upload them to the backend (UploadForwardBatch) and allocate the [rows, vocab] f32 logits
// tensor (which the engine's StepSampler then copies or samples as it would a real step's). It
// skips only Model::Forward (embedding, layers, attention including
// its per-step metadata, KV writes, LM head). Backend::Alloc zero-fills, so every logits row is
// constant 0: greedy sampling picks token 0 every time, which with ignore_eos keeps a request
// running until max_tokens. It owns no model and no KV pool (nothing reads or writes KV).
//
// Not counted: the forward itself, including the host work inside Model::Forward (activation
// allocations, attention metadata, thread-pool dispatch), which is model time. Caveats: run
// alone, the host work finds the CPU caches warm, whereas inside a real step the forward has just
// evicted them, so in situ it costs somewhat more than measured here; and on CUDA with graphs the
// real runner's decode steps bypass the eager input building that this runner always does.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "runtime/model_runner.h"

namespace loom {

class NoOpRunner final : public ModelRunner {
 public:
  // Plans must use `block_size` and block ids in [0, num_blocks), as for the runner it stands in
  // for. `backend` (not owned) must outlive the runner.
  NoOpRunner(Backend* backend, int vocab_size, int max_model_len, int num_blocks, int block_size);

  // Same inputs, errors and logits layout as DecoderRunner::Execute; every logit is 0. No hidden
  // states (hidden_size() is 0: the engine refuses embedding requests).
  StatusOr<StepLogits> Execute(const StepPlan& plan) override;
  int vocab_size() const override { return vocab_size_; }
  int max_model_len() const override { return max_model_len_; }

 private:
  Backend* backend_;
  int vocab_size_;
  int max_model_len_;
  int num_blocks_;
  int block_size_;
};

}  // namespace loom
