// CounterUniform: the sampler's counter-based random numbers, one definition for the host sampler
// (sample/sampler.cc) and the device one (backend/cuda/sample_rows.cu), so both draw the same
// uniform for a given (seed, counter, stream) and pick the same token from the same logits.
// Integer arithmetic (SplitMix64) and one exact conversion: the value is bit-identical on every
// compiler and device.
#pragma once

#include <cstdint>

#include "base/host_device.h"

namespace loom {

// SplitMix64's output function of x + golden gamma (Steele, Lea, Flood 2014).
LOOM_HOST_DEVICE uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A uniform double in [0, 1) that depends only on (seed, counter, stream): the top 53 bits of a
// hash, times 2^-53 (exact). The sampler uses counter = output tokens generated so far, stream 0
// for the draw and stream 1 for XTC's coin.
LOOM_HOST_DEVICE double CounterUniform(uint64_t seed, uint64_t counter, uint64_t stream) {
  const uint64_t x =
      SplitMix64(seed ^ SplitMix64(counter ^ SplitMix64(stream + 0x5851F42D4C957F2Dull)));
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

}  // namespace loom
