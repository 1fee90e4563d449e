// MakeDummyModel (FEATURES.md F19, `--dummy-weights`): any supported architecture built from its
// config.json alone, with deterministic random weights created directly on the backend — for
// benchmarks of models we do not have (or do not want to download). No weight file is read and,
// on CUDA, no host copy of the weights is made (16 GB for Llama-3.1-8B): matrices are allocated in
// bf16 on the device and filled there by CudaBackend::FillUniform.
//
// Values: HashUniform (base/hash_uniform.h), identical on host and device, so a CPU and a
// CUDA dummy model with the same seed hold the same (bf16-rounded) weights.
//   matrices and embedding [out, in]: uniform with std 0.02 (|w| < 0.0347), HF's initializer_range
//   norm weights [d]:                 uniform in [0.9, 1.1)   ([-0.1, 0.1) for Gemma's (1 + w))
//   biases [m]:                       uniform in [-0.02, 0.02)
// Every tensor of the Weights layout (model/weights.h) the config asks for is created with the
// shape LoadWeights would check (fused qkv / gate_up for Phi-3, q/k norms, sandwich norms, tied
// lm_head == embed).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "model/model.h"

namespace loom {

// How large the random values are. kHf: HF's initializer (matrices and embedding std 0.02,
// above), what a --dummy-weights benchmark runs. kUnitGain: every matrix keeps its input's
// scale (uniform with std 1/sqrt(in)) and the embedding is uniform in [-1, 1), so activations
// stay O(1) through the layers: a numerics test (CUDA vs the CPU) sees each op's rounding at
// full size. Norms and biases are the same in both.
enum class DummyScale { kHf, kUnitGain };

// `config_path`: a config.json file, or a directory holding one. `weight_dtype`: dtype of the
// matrices (bf16, f16 or f32 on the CPU backend; a device backend always gets bf16). Norms and
// biases are f32. `quantize` (fp8, IsLoadQuantizeDType): the decoder layers' matrices (not the
// embedding, output head or routers; on a device backend not the experts either) are made in
// that dtype instead, as --quantize would re-encode them. Errors name the config file and field.
// The backend must outlive the model.
StatusOr<std::unique_ptr<Model>> MakeDummyModel(const std::string& config_path, Backend* backend,
                                                DType weight_dtype = DType::kBF16,
                                                uint64_t seed = 0,
                                                std::optional<DType> quantize = std::nullopt);

// Same, from an already-built config (config.Validate() must pass).
std::unique_ptr<Model> MakeDummyModelFromConfig(ModelConfig config, Backend* backend,
                                                DType weight_dtype, uint64_t seed,
                                                std::string origin,
                                                DummyScale scale = DummyScale::kHf,
                                                std::optional<DType> quantize = std::nullopt);

}  // namespace loom
