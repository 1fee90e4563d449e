// Rotary embedding in place on x [n, num_heads * head_dim] bf16, positions [n] i32,
// inv_freq [rotary_dim / 2] f32. angle = f32(pos) * inv_freq[j] (as HF); cos/sin are scaled by
// attention_factor. Halves (j, j + rotary_dim/2) or pairs (2j, 2j+1) when interleaved; dims
// past rotary_dim are untouched. One thread per (token, head, j).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace loom::cuda {

void LaunchRope(void* x, const int32_t* positions, const float* inv_freq, int rotary_dim,
                float attention_factor, bool interleaved, int64_t n, int num_heads, int head_dim,
                cudaStream_t stream);

}  // namespace loom::cuda
