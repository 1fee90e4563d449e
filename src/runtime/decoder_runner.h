// DecoderRunner: the ModelRunner for our decoder on any Backend. Owns the model and its paged KV
// pools; turns each StepPlan into flat inputs once (forward_batch.h) and runs one forward.
//
// Output. The logits stay on the backend's device until the step's rows are known: on a backend
// with ArgmaxRows / SampleRows (CUDA), kGreedy and kDraw rows come back as token ids (one i32
// each, one copy for all) and only the other rows' logits are copied, into reusable host staging
// (page-locked on CUDA). On the CPU backend every row is returned as logits, exactly as Execute.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "model/model.h"
#include "runtime/model_runner.h"

namespace loom {

// An optional fast path for some steps (e.g. CUDA graph replay of decode-only steps, see
// cuda_graph_runner.h). Given a validated plan, either runs the forward exactly as the eager path
// would (same KV writes, same logits) and returns true, or touches nothing and returns false.
class StepAccelerator {
 public:
  virtual ~StepAccelerator() = default;
  // On true, *logits is an f32 [plan.seqs.size() or more, vocab] tensor on the model's backend
  // whose row i holds the logits of plan.seqs[i]'s last token (rows of seqs with sample == false
  // are unspecified); it stays valid until the next call.
  virtual StatusOr<bool> TryForward(const StepPlan& plan, Tensor* logits) = 0;

  // After a TryForward that returned true for `plan`, whose every row is sampled greedily
  // (RowSampling::kGreedy; ids.size() == plan.seqs.size()): writes each row's argmax to `ids`
  // (Backend::ArgmaxRows codes: kArgmaxNone / kArgmaxNaN) and returns true, or touches nothing
  // and returns false (the caller takes the argmax itself). An accelerator may use the wait for
  // the ids to queue the likely next step (every sequence one token further, fed with these ids
  // on the device), so the device need not idle while the host handles this one; a next
  // TryForward that asks for exactly that step gets its logits, any other plan discards it.
  virtual bool ArgmaxAndLookahead(const StepPlan& /*plan*/, std::span<int32_t> /*ids*/) {
    return false;
  }
  // Discards a queued lookahead step; the runner calls it before a step it runs without
  // TryForward (with an activation sink).
  virtual void DropLookahead() {}
};

class DecoderRunner final : public ModelRunner {
 public:
  // Allocates `num_blocks` KV blocks of `block_size` tokens per layer in `kv_dtype`.
  DecoderRunner(std::unique_ptr<Model> model, int num_blocks, int block_size, DType kv_dtype);

  StatusOr<std::vector<float>> Execute(const StepPlan& plan) override;
  // See the file comment. `rows` must have one entry per sampled row (seqs with sample == true
  // and at least one token), else InternalError.
  StatusOr<StepOutput> ExecuteAndSample(const StepPlan& plan,
                                        std::span<const RowSpec> rows) override;
  int vocab_size() const override { return model_->config().vocab_size; }
  int max_model_len() const override { return model_->config().max_position_embeddings; }

  const Model& model() const { return *model_; }
  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  // Debug hook: named activations of every following step go to `sink` (null: off). Steps with
  // a sink always run eagerly.
  void set_activation_sink(const ActivationSink* sink) { sink_ = sink; }
  // The per-layer KV pools (for a StepAccelerator built over this runner).
  const std::vector<KvLayer>& kv() const { return kv_; }
  // Installs (or, with null, removes) a fast path tried before the eager forward.
  void set_step_accelerator(std::unique_ptr<StepAccelerator> a) { accelerator_ = std::move(a); }
  StepAccelerator* step_accelerator() const { return accelerator_.get(); }
  // false: ExecuteAndSample returns every row's logits even where the backend could take the
  // argmax or the draw (A/B measurements, debugging). Default true.
  void set_device_sampling(bool on) { device_sampling_ = on; }
  // Rows with logit edits are edited and sampled where the logits are when the backend can.
  bool edits_rows_on_device() const override;
  // Rows that ask for logprobs too, when the backend takes them (Backend::LogprobRows).
  bool logprobs_on_device() const override;
  // Sampled rows returned as token ids by ExecuteAndSample since construction (tests, stats).
  int64_t rows_sampled_on_device() const { return rows_sampled_on_device_; }

 private:
  // Turns device logits into the step's output: `logits_rows[k]` is the row of `logits` that
  // holds sampled row k.
  StepOutput Emit(const Tensor& logits, const std::vector<int32_t>& logits_rows,
                  std::span<const RowSpec> rows);
  // Whether every row is kGreedy and this backend takes argmaxes (device sampling on).
  bool AllGreedyHere(std::span<const RowSpec> rows) const;
  // The step's output from device argmax ids (one per sampled row, ArgmaxRows codes).
  StepOutput GreedyOutput(std::span<const int32_t> ids);
  // Host staging of at least `floats` f32, grown (never shrunk) on demand.
  float* Staging(size_t floats);

  std::unique_ptr<Model> model_;
  int num_blocks_;
  int block_size_;
  std::vector<KvLayer> kv_;
  const ActivationSink* sink_ = nullptr;
  std::unique_ptr<StepAccelerator> accelerator_;
  std::shared_ptr<Buffer> staging_;  // host, AllocHostStaging: the returned logits
  std::vector<LogitEdit> edits_;     // Emit's edits of the step, kept to reuse its allocation
  bool device_sampling_ = true;
  int64_t rows_sampled_on_device_ = 0;
};

}  // namespace loom
