// DecoderRunner: the ModelRunner for our decoder on any Backend. Owns the model and its paged KV
// pools; turns each StepPlan into flat inputs once (forward_batch.h) and runs one forward.
#pragma once

#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/model_runner.h"

namespace loom {

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
  // Debug hook: named activations of every following step go to `sink` (null: off).
  void set_activation_sink(const ActivationSink* sink) { sink_ = sink; }

 private:
  std::unique_ptr<Model> model_;
  int num_blocks_;
  int block_size_;
  std::vector<KvLayer> kv_;
  const ActivationSink* sink_ = nullptr;
};

}  // namespace loom
