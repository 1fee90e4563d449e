// Deterministic "random" values from a counter-based hash, identical on host and device: value i
// of stream `seed` is lo + scale * u, u = (top 24 bits of SplitMix64(seed, i)) / 2^24 in [0, 1).
// Exact in f32 (24-bit u, one multiply, one add), so the CPU reference can rebuild a tensor that
// the GPU filled (e.g. the random-weight model of the benchmark and the end-to-end test).
#pragma once

#include <cstdint>

#include "base/host_device.h"

namespace loom {

LOOM_HOST_DEVICE float HashUniform(uint64_t seed, uint64_t i, float lo, float scale) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float u = static_cast<float>(static_cast<uint32_t>(z >> 40)) * (1.0f / 16777216.0f);
#if defined(__CUDA_ARCH__)
  return __fadd_rn(lo, __fmul_rn(scale, u));  // no FMA contraction: same bits as the host
#else
  return lo + scale * u;
#endif
}

}  // namespace loom
