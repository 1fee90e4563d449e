// Hugging Face quantized checkpoints: the `quantization_config` of config.json, and a
// TensorSource that hands the loader their weights in a dtype loom runs.
//
// Read today: FP8 e4m3 weights (quant_method "fp8", as Qwen3-*-FP8 and DeepSeek write them, with
// `<name>_scale_inv` per weight_block_size block; "compressed-tensors" float 8-bit weights and
// "fbgemm_fp8", with `<name>_scale` per tensor or per output channel). Each F8_E4M3 weight keeps
// its codes as DType::kFP8 blocks (one f32 scale per 128 elements of a row, which holds each of
// these scale layouts exactly): w = f8 * scale. Where a row's 128-runs would straddle two scales
// (rows not a multiple of 128, blocks narrower than 128), it is dequantized to bf16 instead (f32
// product rounded once, transformers' dequantization).
// quant_method "mxfp4" (gpt-oss: its experts' `<name>_blocks` / `<name>_scales`) needs no
// source: the weight loader decodes them with DequantizeMxfp4; ParseHfQuantization returns
// nullopt for it.
// Other methods (awq, gptq, bitsandbytes, int compressed-tensors, ...) are refused by name.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"
#include "model/weights.h"

namespace loom {

struct Fp8Checkpoint {
  std::string method;  // "fp8", "compressed-tensors", "fbgemm_fp8"
  // weight_block_size (rows, cols) of `<name>_scale_inv`; 0 when the config names none (a scale's
  // shape then says per tensor, per channel, or blocks of 128).
  int block_rows = 0, block_cols = 0;
};

// The checkpoint's quantization: nullopt without a quantization_config; Unimplemented naming
// quant_method (and what loom reads) for one loom cannot load. `where` prefixes messages.
StatusOr<std::optional<Fp8Checkpoint>> ParseHfQuantization(const nlohmann::json& config,
                                                           const std::string& where);

// MXFP4 (OCP microscaling, as gpt-oss stores its experts): `blocks` u8 [..., rows, G, 16] holds
// 32 e2m1 codes per group of a row, low nibble first; `scales` u8 [..., rows, G] the group's
// e8m0 exponent, 2^(s - 127). Returns bf16 [..., rows, G * 32]: e2m1 values times a power of two
// are exact in bf16. InvalidArgument (prefixed with `where`) on mismatched shapes or a NaN scale
// (255).
StatusOr<Tensor> DequantizeMxfp4(const Tensor& blocks, const Tensor& scales,
                                 const std::string& where);
// The same codes repacked as DType::kMXFP4 [..., rows, G * 32] (GGUF's block layout, what
// llama.cpp's converter writes and what backends keep): each group's exponent, then byte j =
// code j | code j + 16 << 4. Same errors.
StatusOr<Tensor> Mxfp4FromHfBlocks(const Tensor& blocks, const Tensor& scales,
                                   const std::string& where);
// A DType::kMXFP4 tensor (a GGUF file's) checked for NaN scales (255): InvalidArgument naming the
// block.
Status CheckMxfp4Scales(const Tensor& t, const std::string& where);

// `inner`'s tensors, with every F8_E4M3 one returned as fp8 blocks, or bf16 (above), with its
// scale found beside it: `<name>_scale_inv`, else `<name>_scale`. An F8 tensor without a scale,
// or a scale whose shape fits neither per tensor, per row nor blocks: InvalidArgument naming both.
std::unique_ptr<TensorSource> Fp8CheckpointSource(std::unique_ptr<TensorSource> inner,
                                                  Fp8Checkpoint checkpoint);

}  // namespace loom
