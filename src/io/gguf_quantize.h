// GGUF -> GGUF quantization, as llama.cpp's `llama-quantize` does it (`loom quantize`): every
// metadata key is copied, general.file_type and general.quantization_version are set, and each
// tensor is either copied or converted to the type the scheme picks for it. Tensors are written in
// llama.cpp's order (by layer, then name), which is also the order the mixture's counters see.
//
// The per-tensor types follow llama.cpp's mixtures (src/llama-quant.cpp, llama_tensor_get_type)
// for the schemes loom can read:
//   - only matrices (2-D and 3-D) named *weight are converted; norms, the MoE router
//     (ffn_gate_inp) and 1-D tensors keep their type;
//   - output.weight (or token_embd.weight when there is no output.weight) becomes q6_K unless the
//     scheme's type is q8_0 (or its rows do not fit a 256-block: then q8_0);
//   - *_K_M: attn_v / attn_qkv and ffn_down of the layers use_more_bits picks (the first and
//     last eighth, every third one between) become q6_K; Q4_K_S: the first 4 attn_v and the
//     first eighth of ffn_down become q5_K;
//   - 8-expert models (Mixtral): attn_v and attn_k become q8_0, attn_output q5_K for Q4_K_*;
//     80-layer grouped-query Llamas (70B): q4_K attn_v becomes q5_K;
//   - a row length the type cannot hold falls back to q8_0 (llama.cpp uses q5_0 / q5_1, which
//     loom does not read), then to f16.
// The block encodings are llama.cpp's reference quantizers byte for byte (tensor/quant.h), so,
// but for those fallbacks, the file is the one llama-quantize (without --imatrix) writes
// (tools/cuda/run_quantize_on_device.sh compares them).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/gguf.h"

namespace loom {

// A scheme: what `llama-quantize` calls the file type ("Q4_K_M", ...).
struct QuantScheme {
  std::string name;    // "Q4_K_M"
  uint32_t file_type;  // llama.h's llama_ftype id written as general.file_type
  DType base;          // the type of most matrices
  bool quantized() const { return GetDTypeInfo(base).quantized; }
};

// The schemes loom writes, by name (case-insensitive): F32, F16, BF16, Q8_0, Q4_0, Q4_K_S,
// Q4_K_M (and Q4_K), Q5_K_S, Q5_K_M (and Q5_K), Q6_K. Unknown names: INVALID_ARGUMENT listing
// them.
StatusOr<QuantScheme> ParseQuantScheme(const std::string& name);

struct GgufQuantizeOptions {
  QuantScheme scheme;
  // llama-quantize --pure: every converted matrix gets scheme.base (rows permitting), no mixture.
  bool pure = false;
  // Convert tensors that are already quantized (dequantized first, which compounds the error).
  // Without it such a tensor is an error, as in llama-quantize without --allow-requantize.
  bool allow_requantize = false;
  int threads = 1;
  // Called after each tensor: (bytes of the input processed so far, total).
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// One tensor's fate.
struct TensorQuantPlan {
  std::string name;
  Shape shape;
  DType from, to;
};

// The type of every tensor of `in`, in the order QuantizeGguf writes them (llama.cpp's). Errors
// name the tensor (a quantized tensor without allow_requantize; a file with no tensors).
StatusOr<std::vector<TensorQuantPlan>> PlanGgufQuantization(const GgufFile& in,
                                                            const GgufQuantizeOptions& options);

struct GgufQuantizeResult {
  std::vector<TensorQuantPlan> plan;
  uint64_t input_bytes = 0, output_bytes = 0;  // tensor data only
};

// Writes the quantized copy of `in` to `out_path` (through a temporary file renamed at the end,
// so a failure leaves no partial file behind). Errors name the path.
StatusOr<GgufQuantizeResult> QuantizeGguf(const GgufFile& in, const std::string& out_path,
                                          const GgufQuantizeOptions& options);

}  // namespace loom
