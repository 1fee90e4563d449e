#include "runtime/decoder_runner.h"

#include "runtime/forward_batch.h"

namespace loom {

DecoderRunner::DecoderRunner(std::unique_ptr<Model> model, int num_blocks, int block_size,
                             DType kv_dtype)
    : model_(std::move(model)), num_blocks_(num_blocks), block_size_(block_size) {
  CHECK_GT(num_blocks, 0);
  CHECK_GT(block_size, 0);
  kv_ = model_->AllocateKv(num_blocks, block_size, kv_dtype);
}

StatusOr<std::vector<float>> DecoderRunner::Execute(const StepPlan& plan) {
  ASSIGN_OR_RETURN(std::vector<SeqSlice> slices, PlanSlices(plan, num_blocks_, block_size_));
  if (accelerator_ != nullptr && sink_ == nullptr) {
    std::vector<float> out;
    ASSIGN_OR_RETURN(bool done, accelerator_->TryExecute(plan, &out));
    if (done) return out;
  }
  HostForwardBatch hb = BuildHostForwardBatch(slices, block_size_);
  Backend* be = model_->backend();
  ForwardInput in = UploadForwardBatch(hb, block_size_, be);
  const int64_t rows = static_cast<int64_t>(hb.sample_rows.size());
  std::vector<float> out(static_cast<size_t>(rows) * static_cast<size_t>(vocab_size()));
  if (hb.token_ids.empty()) return out;
  Tensor logits = be->Alloc(DType::kF32, Shape{std::max<int64_t>(rows, 1), vocab_size()});
  RETURN_IF_ERROR(model_->Forward(in, kv_, logits, sink_));
  if (rows > 0) be->CopyToHost(logits.Slice(0, rows), out.data());
  return out;
}

}  // namespace loom
