// Paged attention over the block pool, for every query row of a step (prefill chunks with a
// cached prefix, and decodes, mixed), from the runner's CSR page tables (backend.h).
//
// Work split: a block handles one "query tile" (q_per_tile consecutive tokens of one sequence)
// x one kv head x one KV split. Its rows are the tile's tokens x the kv head's `group` query
// heads (GQA grouping: every K/V tile loaded once serves all of them), at most kMaxRows.
// Per 64-key tile: K and V are gathered through the page table into shared memory (16-byte
// loads), scores go to shared memory, then an online-softmax update (exp2, f32) and P @ V into
// f32 registers. Causal mask per row (key p <= row position), sliding window (p > pos - window),
// optional logit soft-capping.
//
// Split-KV (FlashDecoding): when there are too few tiles x kv heads to fill the GPU (small-batch
// decode), each tile's key range is cut into num_splits chunks; each writes a normalized partial
// output and its log-sum-exp, and a combine kernel merges them.
//
// bf16 q/out/pools; head_dim in {32, 64, 80, 96, 128, 256}; group <= kMaxRows. Quantized pools
// (--kv-quant) are read through LoadDequantBf16x8 (kv_quant.cuh) into the bf16 tiles.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/kv_quant.cuh"
#include "backend/cuda_tuning.h"

namespace loom::cuda {

inline constexpr int kAttnMaxRows = 32;

struct PagedAttentionArgs {
  const void* q;       // [num_tokens, num_heads * head_dim] bf16
  const void* k_pool;  // [num_blocks, block_size, num_kv_heads, head_dim] bf16, or quantized
  const void* v_pool;  // blocks (k_desc / v_desc; tensor/kv_quant.h)
  KvPoolDesc k_desc, v_desc;
  const int32_t* query_start;   // [num_seqs + 1]
  const int32_t* kv_len;        // [num_seqs]
  const int32_t* page_indptr;   // [num_seqs + 1]
  const int32_t* page_indices;  // [total pages]
  int num_seqs = 0, num_tokens = 0, max_query_len = 0, max_kv_len = 0;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
  int sliding_window = 0;
  float scale = 1.f, softcap = 0.f;
  const float* sinks = nullptr;  // [num_heads] f32 attention sinks (gpt-oss), or null
  void* out;                     // [num_tokens, num_heads * head_dim] bf16
};

// Block shape of the tensor-core prefill kernel (flash_prefill.cuh): warps x row tiles of 16 a
// warp.
struct FlashPrefillTile {
  int warps = 8;
  int m_tiles = 1;
};

// What every attention kernel reads, as typed device pointers plus the head geometry: the
// kernels' own argument structs extend it (one place converts PagedAttentionArgs).
struct PagedKernelTables {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k_pool;  // bf16 rows, or a quantized pool's bytes (k_desc / v_desc)
  const __nv_bfloat16* v_pool;
  KvPoolDesc k_desc, v_desc;
  const int32_t* query_start;
  const int32_t* kv_len;
  const int32_t* page_indptr;
  const int32_t* page_indices;
  int num_heads, num_kv_heads, group, window;
  float softcap;
  const float* sinks;  // null, or a logit per query head that joins its softmax (SinkWeight)
  __nv_bfloat16* out;
};
PagedKernelTables KernelTables(const PagedAttentionArgs& args);

struct PagedAttentionPlan {
  // Tensor-core prefill kernel (flash_prefill.cuh) instead of PagedAttentionKernel: steps with a
  // query longer than one token, head_dim 64/128/256. CudaTuning::attn_prefill = false turns it
  // off (A/B).
  bool flash = false;
  FlashPrefillTile flash_tile;
  int q_per_tile = 1;
  int grid_tiles = 0;  // upper bound on query tiles (blocks past the real count exit)
  int num_splits = 1;
  // Rows per block of the kernel instance: 4 or 8 for decode tiles (q_per_tile 1 x a GQA group
  // of <= 4 / <= 8), else kAttnMaxRows. Fewer rows: fewer idle row iterations (the kernel is
  // issue-bound at decode) and less shared memory (more blocks per SM).
  int rows = kAttnMaxRows;
  // Decode-only steps run the decode kernel (decode_attention.cuh) instead; its variant: keys
  // per lane group per iteration (mma: 8-key tiles per warp), next-iteration prefetch,
  // tensor-core kernel.
  bool decode = false;
  int decode_unroll = 0;
  bool decode_prefetch = true;
  bool decode_mma = false;
  // Decode splits (2..16) merged inside the attention kernel: the splits of a (sequence, kv
  // head) run as one thread-block cluster and meet in distributed shared memory, so no combine
  // kernel and no partial rows in global memory (Hopper; decode_attention.cuh).
  bool decode_cluster = false;
  // The tensor-core decode kernel loads its first K/V tile before the PDL wait
  // (CudaTuning::attn_early_kv; Hopper).
  bool decode_early_kv = false;
  // Scratch the caller provides: tile_start ints, and (when num_splits > 1) partial outputs and
  // log-sum-exps in f32.
  int64_t tile_start_ints = 0;
  int64_t partial_floats = 0;
  int64_t lse_floats = 0;
};

// Sets plan->partial_floats / lse_floats for plan->num_splits (none when it is 1).
void SizeSplitScratch(const PagedAttentionArgs& args, PagedAttentionPlan* plan);

// The kernel, block shape and split count for one step. `tuning`: the attn_* variants
// (attn_prefill = false: always PagedAttentionKernel for multi-token steps, the benchmark's
// old-vs-new A/B). Host only: runs without a device (Hopper-only paths are then off).
PagedAttentionPlan PlanPagedAttention(const PagedAttentionArgs& args, int num_sms,
                                      const CudaTuning& tuning);

// Fills tile_start [plan.tile_start_ints] (the first query tile of each sequence, and the
// total) for a non-decode `plan` of this step: once a step, before any layer's
// LaunchPagedAttention reads it. pdl: programmatic dependent launch (launch.cuh;
// CudaTuning::cuda_pdl).
void LaunchTileStarts(const PagedAttentionArgs& args, const PagedAttentionPlan& plan,
                      int32_t* tile_start, cudaStream_t stream, bool pdl);

// Runs `plan` (from PlanPagedAttention for the same step and heads) on `stream`; tile_start is
// LaunchTileStarts' table (unused by decode plans), partial / lse the split scratch.
void LaunchPagedAttention(const PagedAttentionArgs& args, const PagedAttentionPlan& plan,
                          int32_t* tile_start, float* partial, float* lse, cudaStream_t stream,
                          bool pdl);

// The head dims LaunchPagedAttention has kernels for (its generic kernel's instances; the
// tensor-core prefill and decode kernels serve a subset and leave the rest to it).
inline constexpr int kPagedAttentionHeadDims[] = {16, 32, 64, 80, 96, 128, 256};

}  // namespace loom::cuda
