// The Sampler's logprobs on the device (Backend::LogprobRows): for each task, log_softmax of one
// f32 logits row at its chosen token and at its top_k largest logits, so a row that asks for
// logprobs can be sampled where its logits are and return ~40 floats instead of the row.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace loom::cuda {

// One row, as the kernel reads it (the host packs a launch's tasks into one upload).
struct LogprobTask {
  int32_t row = 0;       // row of x
  int32_t id_index = 0;  // its chosen token is ids[id_index]
};

inline constexpr int kLogprobMaxTopK = 20;

// out + i * stride: [log_softmax at ids[tasks[i].id_index] (0 if that is not a token id), then
// top_k (id, log_softmax) pairs, largest logit first, equal logits by lower id; -1 / 0 past the
// vocabulary]. log_z = max (f32) + f32(log(sum of exp(l - max) in f64)), as Sampler::SampleRow.
// top_k <= kLogprobMaxTopK, stride >= 1 + 2 * top_k.
void LaunchLogprobRows(const float* x, int64_t vocab, const LogprobTask* tasks, int64_t n,
                       const int32_t* ids, int top_k, int stride, float* out, cudaStream_t stream);

}  // namespace loom::cuda
