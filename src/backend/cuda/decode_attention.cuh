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
//
// Where it stands (H200, Llama-3.1-8B heads, cuda_attn_bench): 64 x 8192 reads KV at 2.47 TB/s,
// 55 % of the measured 4.51 TB/s HBM read bandwidth (generic kernel: 1.59 TB/s). ncu: 168
// registers -> 3 blocks (12 warps) per SM, SM issue ~57 % busy, DRAM 41 % (at ncu's 1.5 GHz):
// both instruction-heavy (f32 FMAs, bf16 conversions and the lane-group shuffle reductions per
// key) and short of loads in flight. Tensor-core q.K / P.V would cut both.
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
  // iteration, 1 or 2, prefetch only with 1); 0: the CUDA-core kernel; -1: LOOM_ATTN_DECODE_MMA
  // (unset = 0). Not yet run on a GPU, hence off by default.
  int mma = -1;
};
void SetDecodeAttentionTuning(const DecodeAttentionTuning& tuning);

}  // namespace loom::cuda
