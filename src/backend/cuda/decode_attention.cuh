// Decode-only paged attention: every sequence of the step has one query token (max_query_len
// <= 1). Same inputs and numerics as PagedAttentionKernel (paged_attention.cuh: f32 accumulation,
// exp2 online softmax, an empty key range gives a zero row), built for KV bandwidth instead of
// generality.
//
// Work split: one block per (sequence, kv head, KV split), 4 warps. A warp streams its own keys
// straight from the pool with 16-byte loads (no shared-memory staging, no per-tile barriers):
// a key's head_dim is spread over D/8 lanes ("a lane group"), so a warp reads 32 / (D/8) keys per
// load instruction, each group several keys per iteration (several loads in flight per lane).
// All GQA rows of the kv head are held in registers, so every K/V byte is read once and used for
// every row. Each lane group keeps its own online softmax (max, sum) and P @ V accumulators; the
// groups and warps are merged once at the end. Split-KV (FlashDecoding) when sequences x kv
// heads leave SMs idle: each split writes a normalized partial row and its log2-sum-exp, and a
// combine kernel merges them.
//
// bf16 q/out/pools; head_dim in {64, 128, 256}; GQA group <= 8.
#pragma once

#include <cuda_runtime_api.h>

#include "backend/cuda/paged_attention.cuh"

namespace loom::cuda {

// True when the decode kernel handles this step (decode-only, supported shapes, not disabled by
// LOOM_ATTN_DECODE=0 or SetDecodeAttentionEnabled(false)).
bool DecodeAttentionApplies(const PagedAttentionArgs& args);

// Plan for the decode kernel (plan.decode = true): split count and scratch sizes.
PagedAttentionPlan PlanDecodeAttention(const PagedAttentionArgs& args, int num_sms);

void LaunchDecodeAttention(const PagedAttentionArgs& args, const PagedAttentionPlan& plan,
                           float* partial, float* lse, cudaStream_t stream);

// In-process switches for tests and the benchmark (not thread-safe; set before planning).
// Enabled: starts from LOOM_ATTN_DECODE (unset or non-zero = on).
void SetDecodeAttentionEnabled(bool enabled);
bool DecodeAttentionEnabled();
// Kernel variants and split count, for tests and the benchmark's A/B (defaults: automatic).
struct DecodeAttentionTuning {
  int splits = 0;  // > 0: forced split count (at most 64)
  // Keys per lane group per iteration: 2, 4, or 8 for GQA <= 4 (otherwise automatic: 4 for
  // GQA <= 4, else 2).
  int unroll = 0;
  int prefetch = 1;          // 0: no K/V prefetch of the next iteration
  bool seq_fastest = false;  // launch order: a kv head's sequences adjacent (the old order)
};
void SetDecodeAttentionTuning(const DecodeAttentionTuning& tuning);

}  // namespace loom::cuda
