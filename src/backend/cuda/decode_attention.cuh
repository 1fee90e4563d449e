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
// combine kernel merges them; on Hopper, up to 16 splits of a (sequence, kv head) run as one
// thread-block cluster instead and merge through distributed shared memory in the same kernel
// (the combine kernel cost ~5 us a layer at batch 1 on the H200).
//
// bf16 q/out/pools; head_dim in {64, 128, 256}; GQA group <= 8.
//
// Tensor-core variant (the default for head_dim 64 / 128): q.K^T and P.V with mma.sync (GQA rows
// padded to the mma's 8-row tiles; P rounded to bf16 for P.V, as the prefill kernel does), two
// 8-key tiles per warp per iteration. H200, Llama-3.1-8B heads (cuda_attn_bench): 64 x 8192
// reads KV at 4.04 TB/s, 90 % of the measured 4.49 TB/s HBM read rate (CUDA-core variant 2.01,
// generic kernel 1.59). The CUDA-core variant serves head_dim 256 and LOOM_ATTN_DECODE_MMA=0.
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
  int unroll = 0;    // keys per lane group per iteration, 2 or 4 (else: 4 for GQA <= 4, else 2)
  int prefetch = 1;  // 0: no K/V prefetch of the next iteration
  // 1: the tensor-core kernel (head_dim 64 / 128; unroll then means 8-key tiles per warp per
  // iteration, 1 or 2 (default), prefetch only with 1); 0: the CUDA-core kernel; -1:
  // LOOM_ATTN_DECODE_MMA (unset = 1).
  int mma = -1;
  // 1: merge 2..16 splits in a thread-block cluster (distributed shared memory) instead of the
  // combine kernel; 0: the combine kernel; -1: LOOM_ATTN_CLUSTER_MERGE (unset = 1 on Hopper).
  int cluster = -1;
};
void SetDecodeAttentionTuning(const DecodeAttentionTuning& tuning);

}  // namespace loom::cuda
