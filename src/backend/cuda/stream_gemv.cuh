// out[m] = x[k] @ w[m, k]^T for one row of x (batch-1 decode): a GEMV whose weight stream does
// not wait for anything.
//
// One block per SM (grid = min(row groups, SMs)), each owning a contiguous run of row groups;
// two smaller blocks an SM where the whole weight fits one stage a block, and logits launches
// take the end of their groups from a work queue.
// A producer warp streams the block's weight slices with bulk async copies (TMA,
// cp.async.bulk, 4 KB per row slice, 2 KB gated) into a ring of 32 KB shared-memory stages tracked
// by mbarriers (a 128 KB ring where x leaves room); eight consumer warps take one row each (two for
// the gated epilogues: the (gate, up) pair) and dot the stage with x, which they keep in shared
// memory. The producer never waits on the previous kernel: weights are never written by a step, so
// under PDL (launch.cuh) the ring fills while the kernel before is still running, and the HBM
// stream runs through what used to be a launch and ramp-up bubble. The consumers wait (PdlWait)
// before they read x or write out.
//
// Same contract as LaunchSmallBatchGemm with n = 1 (epilogues, norm prologue); the summation
// order differs from the small-batch kernel (f32 accumulation either way).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/qkv_rope_store.cuh"
#include "backend/cuda/small_batch_gemm.cuh"
#include "tensor/dtype.h"

namespace loom::cuda {

// x lives in shared memory next to the ring: k up to this.
inline constexpr int64_t kStreamGemvMaxK = 24576;

// True when LaunchStreamGemv accepts these arguments (Hopper or newer, k % 8 == 0, k <=
// kStreamGemvMaxK, a 96 KB ring and x fit the device's shared memory, x and w 16-byte aligned).
bool StreamGemvApplies(const void* x, const void* w, int64_t k);

// queue: null, or two u32 counters, zero before the first launch, that f32-out launches with many
// row groups a block use as a work queue (each leaves them at zero); launches that share one must
// be on one stream. pdl: programmatic dependent launch (launch.cuh; CudaTuning::cuda_pdl).
// Whether one-row GEMVs take this kernel at all is the caller's (CudaTuning::gemv_stream).
void LaunchStreamGemv(const void* x, const void* w, void* out, DType out_dtype, int64_t m,
                      int64_t k, cudaStream_t stream, bool pdl, GemvEpilogue epilogue,
                      const GemvNorm* norm, unsigned* queue = nullptr);

// One decode row through a fused [q | k | v] projection: RMSNorm(x) @ w_qkv^T, then the
// QkvRopeStore kernel's work in the epilogue (rope.qkv unused; q to rope.q_out, k / v to their
// slot). Each consumer warp takes the two rows one rope rotation mixes, so the output is
// bit-identical to the streamed GEMV followed by LaunchQkvRopeStore, one launch instead of two.
// Applies to one row (rope.n == 1) without per-head q/k norms; whether to use it is the
// caller's (CudaTuning::gemv_rope).
bool StreamGemvRopeStoreApplies(const void* x, const void* w, int64_t k,
                                const QkvRopeStoreArgs& rope);
void LaunchStreamGemvRopeStore(const void* x, const void* w, int64_t k, const GemvNorm& norm,
                               const QkvRopeStoreArgs& rope, cudaStream_t stream, bool pdl);

}  // namespace loom::cuda
