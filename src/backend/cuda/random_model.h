// A decoder Model with deterministic random weights, built directly on a backend (no file): the
// CUDA benchmark's Llama-3.1-8B stand-in and the CPU-vs-CUDA end-to-end parity test.
//
// Values come from HashUniform (base/hash_uniform.h): on a CudaBackend matrices are allocated in bf16
// and filled on the device (8B parameters in well under a second, no host copy); on any other
// backend they are filled on the host with the same values rounded to bf16, kept in f32, and
// uploaded, so both backends hold identical weights. Norm weights are f32 in both.
//   matrices [out, in]: uniform in [-sqrt(3 / in), sqrt(3 / in))   (unit-variance outputs)
//   embedding:          uniform in [-1, 1)
//   norm weights:       uniform in [0.9, 1.1)
#pragma once

#include <cstdint>
#include <memory>

#include "model/model.h"

namespace loom {

// Llama-3.1-8B: 32 layers, hidden 4096, 32 heads / 8 kv heads of 128, FFN 14336, vocab 128256,
// llama3 rope scaling (factor 8, theta 500000), untied lm_head.
ModelConfig Llama31_8BConfig();

// Builds the model on `backend` (which must outlive it).
std::unique_ptr<Model> MakeRandomModel(const ModelConfig& cfg, Backend* backend, uint64_t seed);

}  // namespace loom
