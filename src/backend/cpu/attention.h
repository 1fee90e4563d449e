// Paged attention on the CPU: for each query row and head, an online softmax (f32) over the
// cache positions its sequence may see, read page by page through the block table.
//
//   pools  k, v: [num_blocks, block_size, num_kv_heads, head_dim] (f32, f16 or bf16), or quantized
//          rows (KvLayer::k_quant / v_quant), each read as DequantizeKvRow's values: the same
//          result, bit for bit, as the f32 pools of those values
//   seq s: pages page_indices[page_indptr[s] .. page_indptr[s + 1]); cache position p lives in
//          block pages[p / block_size], row p % block_size.
//   query row j of s (q_len = query_start[s + 1] - query_start[s]) is at position
//          pos = kv_len[s] - q_len + j and sees p in (pos - sliding_window, pos] (or [0, pos]).
//   GQA: query head h reads kv head h / (num_heads / num_kv_heads); the heads of one group share
//        each key/value row load.
//   sinks (params.sinks, gpt-oss): head h's softmax also counts exp(sinks[h] - max), a logit with
//        no value, so its weights sum to less than 1.
#pragma once

#include "backend/backend.h"

namespace loom::cpu {

// Writes out [num_tokens, num_heads * head_dim] f32 from q (same shape). CHECKs shapes and that
// every sequence's pages cover its kv_len. use_avx2 selects the vector helpers.
void PagedAttention(const Tensor& q, const KvLayer& layer, const AttentionMeta& meta,
                    const AttentionParams& params, const Tensor& out, int num_threads,
                    bool use_avx2);

}  // namespace loom::cpu
