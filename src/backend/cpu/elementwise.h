// Row-wise and elementwise CPU kernels behind CpuBackend (norms, RoPE, activations, copies).
// All take raw f32 pointers with the shapes documented per function; each output row depends
// only on its input row, computed in a fixed order (batch-invariant).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace loom::cpu {

// out[i] = x[i] / sqrt(mean(x[i]^2) + eps) * (w + weight_offset).   x, out [n, d] (may alias).
void RmsNormRows(const float* x, const float* w, float eps, float weight_offset, int64_t n,
                 int64_t d, float* out, int num_threads);

// Rotates the first rotary_dim dims of every head in place.   x [n, num_heads * head_dim];
// positions [n]; inv_freq [rotary_dim / 2]. interleaved: pairs (2i, 2i+1), else (i, i + rot/2).
void RopeRows(float* x, const int32_t* positions, const float* inv_freq, int rotary_dim,
              float attention_factor, bool interleaved, int64_t n, int num_heads, int head_dim,
              int num_threads);

// out = silu(gate) * up or gelu_tanh(gate) * up, elementwise over `count` values.
void SiluMulValues(const float* gate, const float* up, float* out, int64_t count, int num_threads);
void GeluTanhMulValues(const float* gate, const float* up, float* out, int64_t count,
                       int num_threads);

// x = cap * tanh(x / cap), elementwise.
void SoftCapValues(float* x, int64_t count, float cap, int num_threads);

// Converts `count` f32 values into dtype (f32/f16/bf16) at dst.
void StoreValues(const float* src, DType dtype, void* dst, int64_t count);

}  // namespace loom::cpu
