// The CUDA benchmarks' model: Llama-3.1-8B's shapes (runtime/test_models.h) with random bf16
// weights filled on the device (model/dummy_weights.h, DummyScale::kUnitGain: O(1) activations
// through the layers).
#pragma once

#include <memory>

#include "model/dummy_weights.h"
#include "runtime/test_models.h"

namespace loom {

using test_models::Llama31_8BConfig;

inline std::unique_ptr<Model> MakeBenchModel(Backend* backend, uint64_t seed = 42) {
  return MakeDummyModelFromConfig(Llama31_8BConfig(), backend, DType::kBF16, seed,
                                  "llama-3.1-8b shapes", DummyScale::kUnitGain);
}

}  // namespace loom
