// Tensor-core paged attention for steps with multi-token query tiles (prefill chunks), in the
// style of FlashAttention-2: q.K^T and P.V on mma.sync m16n8k16 (bf16 in, f32 accumulate),
// online softmax in registers, K/V tiles gathered through the CSR page table with cp.async into
// double-buffered shared memory.
//
// Work split: a block handles one query tile (FlashPrefillTokensPerTile consecutive tokens of one
// sequence) x one kv head; its rows (warps x 16 x row tiles a warp) are the tile's tokens x the
// kv head's `group` query heads (GQA packed into the M dimension: each K/V tile is read once for
// the whole group). Keys are walked in tiles of 64 (32 for head_dim 256).
//
// Same contract as PagedAttentionKernel (paged_attention.cuh): bf16 q/out/pools, causal mask per
// row (row j of sequence s sits at position kv_len[s] - q_len + j), sliding window, soft-capping,
// a zero row for an empty key range. Decode rows of a mixed step (one-token tiles) are handled here
// too; pure-decode steps (max_query_len <= 1) stay on PagedAttentionKernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/paged_attention.cuh"

namespace loom::cuda {

// Whether LaunchFlashPrefill is built for these shapes: head_dim 64/128/256, group <= the tile's
// rows.
bool FlashPrefillSupports(const PagedAttentionArgs& a);

// Block shape for a step: 8 warps x 2 row tiles of 16 when that still makes a block for >= 3/4
// of the SMs, else 8x1 if that does, else 4x1 (head_dim 256: one row tile a warp).
// CudaTuning::attn_prefill_tile (attn_prefill_warps x attn_prefill_m_tiles) overrides it (W in
// {4, 8} warps, M in {1, 2} row tiles a warp; M is 1 for head_dim 256).
FlashPrefillTile FlashPrefillTileFor(const PagedAttentionArgs& a, int num_sms,
                                     const CudaTuning& tuning);

// Query tokens per tile: the block's rows / group.
int FlashPrefillTokensPerTile(int group, FlashPrefillTile tile);

// tile_start: [num_seqs + 1] exclusive prefix of query tiles per sequence (with the q_per_tile
// above), written on the device before this launch; grid_tiles >= the real tile count.
void LaunchFlashPrefill(const PagedAttentionArgs& a, FlashPrefillTile tile,
                        const int32_t* tile_start, int grid_tiles, cudaStream_t stream);

}  // namespace loom::cuda
