// `loom quantize HF_DIR OUT_DIR FP8`: a Hugging Face checkpoint written as an FP8 one, the layout
// Qwen3-*-FP8 and DeepSeek-V3 ship (quantization_config {quant_method "fp8", fmt "e4m3",
// activation_scheme "dynamic", weight_block_size [128, 128]}), which transformers, vLLM and SGLang
// load, and loom keeps as fp8 blocks (model/hf_quantization.h).
//
// Quantized: the 2-D f32 / f16 / bf16 `model.layers.*.weight` tensors (attention and MLP
// projections, per-expert matrices), except routers (`mlp.gate`, `block_sparse_moe.gate`,
// `shared_expert_gate`). Each becomes F8_E4M3 codes plus `<name>_scale_inv`, f32
// [ceil(rows / 128), ceil(cols / 128)]: per 128 x 128 block, scale = amax / 448 and code =
// e4m3(w / scale) rounded to nearest even (F32ToF8E4M3), so w ~= code * scale. Everything else
// (embeddings, the output head, norms, biases, routers, stacked 3-D experts) is copied as it is.
// config.json gains the quantization_config; the directory's other files (tokenizer, chat template,
// generation_config.json, ...) are copied; the weights go to one model.safetensors, written to a
// .part file renamed at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace loom {

struct HfFp8Options {
  int threads = 1;
  // After each tensor: its name, and whether it was quantized.
  std::function<void(const std::string& name, bool quantized)> progress;
};

struct HfFp8Result {
  uint64_t input_bytes = 0, output_bytes = 0;  // tensor data
  int quantized = 0, copied = 0;               // tensors
};

// Errors: the input is not a safetensors directory, is already quantized (its config.json has a
// quantization_config), or out_dir already holds a config.json; a write fails.
StatusOr<HfFp8Result> QuantizeHfToFp8(const std::string& in_dir, const std::string& out_dir,
                                      const HfFp8Options& options);

}  // namespace loom
