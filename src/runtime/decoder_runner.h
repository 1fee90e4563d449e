// DecoderRunner: the ModelRunner for our decoder on any Backend. Owns the model and its paged KV
// pools; turns each StepPlan into flat inputs once (forward_batch.h) and runs one forward.
#pragma once

#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/model_runner.h"

namespace loom {

// An optional fast path for some steps (e.g. CUDA graph replay of decode-only steps, see
// cuda_graph_runner.h). Given a validated plan, either computes it exactly as the eager path would
// (same KV writes, same logits layout) and returns true, or touches nothing and returns false.
class StepAccelerator {
 public:
  virtual ~StepAccelerator() = default;
  virtual StatusOr<bool> TryExecute(const StepPlan& plan, std::vector<float>* logits) = 0;
};

class DecoderRunner final : public ModelRunner {
 public:
  // Allocates `num_blocks` KV blocks of `block_size` tokens per layer in `kv_dtype`.
  DecoderRunner(std::unique_ptr<Model> model, int num_blocks, int block_size, DType kv_dtype);

  StatusOr<std::vector<float>> Execute(const StepPlan& plan) override;
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

 private:
  std::unique_ptr<Model> model_;
  int num_blocks_;
  int block_size_;
  std::vector<KvLayer> kv_;
  const ActivationSink* sink_ = nullptr;
  std::unique_ptr<StepAccelerator> accelerator_;
};

}  // namespace loom
