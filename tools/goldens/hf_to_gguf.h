// HfToGguf: converts a Hugging Face model directory (config.json + *.safetensors) into a GGUF image
// the way llama.cpp's convert_hf_to_gguf.py does, so that tests can load HF goldens through loom's
// GGUF path and require HF's logits. Covered: llama (and mistral, written as "llama"), qwen2,
// qwen3, gemma2, gemma3 (text), phi3, and the MoE qwen2moe, qwen3moe and Mixtral (as "llama"). What
// it reproduces of the converter:
//   - metadata keys and which ones each architecture writes (e.g. gemma2 writes no rope base,
//     phi3 writes rope.dimension_count = partial_rotary_factor * hidden / heads);
//   - tensor names (blk.N.attn_q, attn_qkv, ffn_up holding Phi-3's gate+up, Gemma's
//     post_attention_norm / ffn_norm / post_ffw_norm, attn_q_norm / attn_k_norm, ...);
//   - Llama q/k rows permuted for pairwise rotation, Gemma norm weights stored as 1 + w, Gemma's
//     lm_head dropped, rope_type "llama3" written as the rope_freqs.weight factor table;
//   - 1-D tensors as f32, matrices in their checkpoint dtype (the converter's --outtype auto for
//     f32 checkpoints).
// Where a tiny test config needs a key the converter does not write for that architecture, the
// key is one llama.cpp reads (gemma3.attention.sliding_window_pattern); configs that no GGUF key
// can express are refused with a message saying why.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "io/gguf_writer.h"

namespace loom {

// The GGUF of the model in `dir`. Errors name the file and what is unsupported.
StatusOr<GgufWriter> ConvertHfToGguf(const std::string& dir);

// llama.cpp's rope_freqs.weight for rope_type "llama3" (LlamaModel.generate_extra_tensors),
// computed in f32 like the converter's torch code: one divisor per rotary dimension pair.
std::vector<float> Llama3RopeFreqFactors(float theta, int head_dim, float factor,
                                         float low_freq_factor, float high_freq_factor,
                                         int original_max_position_embeddings);

}  // namespace loom
