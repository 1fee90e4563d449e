// DecoderRunner: the ModelRunner for our decoder on any Backend. Owns the model and its paged KV
// pools; turns each StepPlan into flat inputs once (forward_batch.h) and runs one forward. The
// logits stay on the backend's device (StepLogits); the StepSampler samples them there or copies
// the rows it samples on the host.
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
  // Takes only plans whose every seq has at most one logits row. On true, *logits is an f32
  // [plan.seqs.size() or more, vocab] tensor on the model's backend whose row i holds the logits
  // of plan.seqs[i]'s last token (rows of seqs with num_logits == 0 are unspecified); it stays
  // valid until the next call.
  virtual StatusOr<bool> TryForward(const StepPlan& plan, Tensor* logits) = 0;

  // After a TryForward that returned true for `plan`, whose every row is sampled as the plain
  // argmax (ids.size() == plan.seqs.size(); ModelRunner::GreedyIds): writes each row's argmax to
  // `ids` (Backend::ArgmaxRows codes: kArgmaxNone / kArgmaxNaN) and returns true, or touches
  // nothing and returns false (the caller takes the argmax itself). An accelerator may use the wait
  // for the ids to queue the likely next step (every sequence one token further, fed with these ids
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
  // Allocates `num_blocks` KV blocks of `block_size` tokens per layer in `kv_format`.
  DecoderRunner(std::unique_ptr<Model> model, int num_blocks, int block_size, KvFormat kv_format);

  // See ModelRunner. Errors (Internal): a plan that does not fit this runner (PlanSlices). A step
  // with hidden rows (embeddings) always runs eagerly (the accelerator returns logits only).
  StatusOr<StepLogits> Execute(const StepPlan& plan) override;
  // The accelerator's argmax and lookahead, when it ran the last Execute.
  bool GreedyIds(const StepPlan& plan, std::span<int32_t> ids) override;
  int vocab_size() const override { return model_->config().vocab_size; }
  int max_model_len() const override { return model_->config().max_position_embeddings; }
  int hidden_size() const override { return model_->config().hidden_size; }
  KvBlockLayout kv_block_layout() const override;
  Status ReadKvBlocks(std::span<const BlockId> blocks, std::span<uint8_t* const> hosts) override;
  StatusOr<uint64_t> StartKvBlockReads(std::span<const BlockId> blocks,
                                       std::span<uint8_t* const> hosts) override;
  void WaitKvBlockReads(uint64_t ticket) override;
  bool KvBlockReadsDone(uint64_t ticket) override;
  Status WriteKvBlocks(std::span<const BlockId> blocks,
                       std::span<const uint8_t* const> hosts) override;
  std::shared_ptr<uint8_t> AllocKvStaging(size_t bytes) override;

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

 private:
  Status CopyKvBlocks(std::span<const BlockId> blocks, std::span<uint8_t* const> hosts,
                      bool to_host);
  // The checks of a KV block copy: one host pointer a block, every block in the pool.
  Status CheckKvCopy(std::span<const BlockId> blocks, std::span<uint8_t* const> hosts) const;

  std::unique_ptr<Model> model_;
  int num_blocks_;
  int block_size_;
  std::vector<KvLayer> kv_;
  const ActivationSink* sink_ = nullptr;
  std::unique_ptr<StepAccelerator> accelerator_;
  bool accelerated_ = false;  // the last Execute ran through accelerator_
};

}  // namespace loom
