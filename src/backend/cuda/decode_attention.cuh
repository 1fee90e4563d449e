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
// generic kernel 1.59). The CUDA-core variant serves head_dim 256 and attn_decode_mma=0.
#pragma once

#include <cuda_runtime_api.h>

#include "backend/cuda/paged_attention.cuh"

namespace loom::cuda {

// True when the decode kernel handles this step (decode-only, supported shapes, and
// tuning.attn_decode).
bool DecodeAttentionApplies(const PagedAttentionArgs& args, const CudaTuning& tuning);

// Plan for the decode kernel (plan.decode = true): split count, kernel variant and scratch
// sizes, from tuning's attn_decode_* / attn_cluster_* / attn_early_kv (defaults: automatic).
// Host only (without a device the Hopper-only cluster merge and early K/V loads are off).
PagedAttentionPlan PlanDecodeAttention(const PagedAttentionArgs& args, int num_sms,
                                       const CudaTuning& tuning);

// pdl: programmatic dependent launch (launch.cuh; CudaTuning::cuda_pdl).
void LaunchDecodeAttention(const PagedAttentionArgs& args, const PagedAttentionPlan& plan,
                           float* partial, float* lse, cudaStream_t stream, bool pdl);

}  // namespace loom::cuda
