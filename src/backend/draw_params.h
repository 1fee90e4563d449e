// DrawParams: what one row's seeded draw needs when a backend samples it where the logits live
// (Backend::SampleRows), a plain struct the engine fills and the device reads. The rule is the
// host sampler's (sample/sampler.cc) for a row with only temperature / top-k / top-p / min-p.
#pragma once

#include <cstdint>

namespace loom {

struct DrawParams {
  float temperature = 1.0f;  // > 0
  int32_t top_k = 0;         // <= 0: off; also off when >= the row's unmasked tokens
  float top_p = 1.0f;        // in (0, 1]; 1 = off
  float min_p = 0.0f;        // in [0, 1]; 0 = off
  uint64_t seed = 0;         // the draw's uniform is CounterUniform(seed, step, /*stream=*/0)
  uint64_t step = 0;         // output tokens the request has generated so far
};

}  // namespace loom
