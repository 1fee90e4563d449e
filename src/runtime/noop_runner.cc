#include "runtime/noop_runner.h"

#include <algorithm>

#include "base/check.h"
#include "runtime/forward_batch.h"

namespace loom {

NoOpRunner::NoOpRunner(Backend* backend, int vocab_size, int max_model_len, int num_blocks,
                       int block_size)
    : backend_(backend),
      vocab_size_(vocab_size),
      max_model_len_(max_model_len),
      num_blocks_(num_blocks),
      block_size_(block_size) {
  CHECK(backend != nullptr);
  CHECK_GT(vocab_size, 0);
  CHECK_GT(max_model_len, 0);
  CHECK_GT(num_blocks, 0);
  CHECK_GT(block_size, 0);
}

StatusOr<StepLogits> NoOpRunner::Execute(const StepPlan& plan) {
  // Mirrors DecoderRunner::Execute's eager path line for line, minus Model::Forward.
  ASSIGN_OR_RETURN(std::vector<SeqSlice> slices, PlanSlices(plan, num_blocks_, block_size_));
  StepLogits out;
  out.backend = backend_;
  HostForwardBatch hb = BuildHostForwardBatch(slices, block_size_);
  if (hb.token_ids.empty()) return out;
  [[maybe_unused]] ForwardInput in = UploadForwardBatch(hb, block_size_, backend_);
  const int64_t rows = static_cast<int64_t>(hb.sample_rows.size());
  // No forward: `in` is built and uploaded but not read; the logits stay zero-filled.
  out.logits = backend_->Alloc(DType::kF32, Shape{std::max<int64_t>(rows, 1), vocab_size_});
  out.rows.resize(static_cast<size_t>(rows));
  for (int32_t k = 0; k < static_cast<int32_t>(rows); ++k) out.rows[k] = k;
  return out;
}

}  // namespace loom
