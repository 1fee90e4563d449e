// A read-only reduction over a device buffer, for measuring the HBM read bandwidth that a
// bandwidth-bound kernel can reach (cuda_attn_bench compares attention against it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace loom::cuda {

// Reads `bytes` (a multiple of 16) of `data` once with 16-byte streaming loads; `sink` (one
// uint32) is written only on an improbable checksum, which keeps the loads from being elided.
void LaunchReadProbe(const void* data, int64_t bytes, uint32_t* sink, int num_sms,
                     cudaStream_t stream);

}  // namespace loom::cuda
