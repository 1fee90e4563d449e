// Mixture-of-experts kernels (CudaBackend::MoeMlp). A sparse layer of n rows, k experts a row,
// E experts runs in four steps, every launch shape fixed by (n, k, E), so a CUDA graph captures
// them and no step reads anything back to the host:
//   1. route:   per row, the softmax of the router logits in f32 and the top k by logit (ties to
//               the lower index), their probabilities renormalized with norm_topk_prob:
//               Backend::RouteExperts' rule. Each expert's rows are counted.
//   2. plan:    each expert's segment of an expert-sorted order of the n*k (row, expert) pairs,
//               its tiles of `tile_rows` positions, and every pair's position in its segment.
//               Positions inside a segment come from atomics, so their order varies from run to
//               run; nothing else does: a position's result depends only on its row.
//   3. GEMMs:   one launch for all experts' gate and up projections, H[p] = act(x[row(p)]
//               gate_e^T) * (x[row(p)] up_e^T) in bf16, then one for Y[p] = H[p] down_e^T in
//               f32. A tile holds tile_rows positions of one expert, so only the routed
//               experts' weights are read; blocks past the last tile exit at once. Decode-sized
//               steps run as GEMVs, each weight row read once a tile in 16-byte vectors; larger
//               ones on tensor cores (bf16 in, f32 accumulate, 64 columns a block): MoeTiling.
//   4. combine: out[i] = sum_j p_ij Y[pos(i, j)] (+ sigmoid(s_i) * shared_i with a shared
//               expert), in bf16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/dtype.h"
#ifdef __CUDACC__
#include "backend/cuda/device_math.cuh"
#endif

namespace loom::cuda {

// One call's device workspace: MoeWorkspaceInts(n, k, E) int32s and n*k floats.
struct MoeWorkspace {
  int32_t* counts = nullptr;        // [E] rows routed to each expert
  int32_t* cursor = nullptr;        // [E] next free position of each segment
  int32_t* offsets = nullptr;       // [E + 1] segment starts
  int32_t* tile_offsets = nullptr;  // [E + 1] first tile of each segment
  int32_t* slot_pos = nullptr;      // [n * k] position of row i's j-th expert
  int32_t* sorted_rows = nullptr;   // [n * k] the row at each position
  float* weights = nullptr;         // [n * k] row i's j-th expert's probability
};
int64_t MoeWorkspaceInts(int64_t n, int top_k, int num_experts);
MoeWorkspace MoeWorkspaceAt(int32_t* ints, float* weights, int64_t n, int top_k, int num_experts);

// How the GEMMs of n rows, k experts each (`pairs` = n k) over E experts run: tiles of 16 positions
// as GEMVs (up to 2 positions an expert on average: decode), of 16 or 64 on tensor cores.
struct MoeTiling {
  int tile_rows = 16;
  bool gemv = true;
  int max_rows = 16;  // the most positions one expert's tile can hold: min(tokens, tile_rows)
};
MoeTiling MoeTilingFor(int64_t n, int top_k, int num_experts);
// The limits MoeMlp checks: E experts, k of them a row.
inline constexpr int kMoeMaxExperts = 1024;

// What the GEMMs add to their products (device code): an expert's bias per output column, f32
// [E, N] or null, and the gate/up activation: the clamped SwiGLU when swiglu_limit > 0 (gpt-oss),
// else GeLU-tanh or SiLU of the gate times up.
struct MoeEpilogue {
  const float* bias0 = nullptr;  // gate (or the plain product's) bias
  const float* bias1 = nullptr;  // up bias
  bool gelu = false;
  float swiglu_limit = 0.f;
#ifdef __CUDACC__
  __device__ __forceinline__ float Bias(const float* b, int e, int64_t n, int64_t col) const {
    return b != nullptr ? b[e * n + col] : 0.f;
  }
  __device__ __forceinline__ float Gated(float g, float u, int e, int64_t n, int64_t col) const {
    g += Bias(bias0, e, n, col);
    u += Bias(bias1, e, n, col);
    if (swiglu_limit > 0.f) return ClampedSwigluOp{swiglu_limit}(g, u);
    return gelu ? GeluTanhMulOp()(g, u) : SiluMulOp()(g, u);
  }
  __device__ __forceinline__ float Plain(float y, int e, int64_t n, int64_t col) const {
    return y + Bias(bias0, e, n, col);
  }
#endif
};

// Steps 1 and 2. logits [n, E] (bf16 or f32); expert_ids [n, k] receives each row's experts,
// most probable first.
void LaunchMoeRoute(const void* logits, DType logits_dtype, int64_t n, int num_experts, int top_k,
                    bool norm_topk_prob, int tile_rows, int32_t* expert_ids, const MoeWorkspace& ws,
                    cudaStream_t stream);
// Step 3, gate and up: x [n, hidden] bf16; w_gate, w_up [E, f, hidden] bf16; h [n*k, f] bf16
// (the epilogue's biases [E, f]). hidden and f are multiples of 16.
void LaunchMoeGateUp(const __nv_bfloat16* x, const __nv_bfloat16* w_gate, const __nv_bfloat16* w_up,
                     const MoeWorkspace& ws, int64_t pairs, int num_experts, MoeTiling tiling,
                     int64_t f, int64_t hidden, const MoeEpilogue& ep, __nv_bfloat16* h,
                     cudaStream_t stream);
// Step 3, down: h [n*k, f] bf16; w_down [E, hidden, f] bf16; b_down [E, hidden] f32 or null (a
// bias per expert, gpt-oss); y [n*k, hidden] f32.
void LaunchMoeDown(const __nv_bfloat16* h, const __nv_bfloat16* w_down, const float* b_down,
                   const MoeWorkspace& ws, int64_t pairs, int num_experts, MoeTiling tiling,
                   int64_t hidden, int64_t f, float* y, cudaStream_t stream);
// Step 4. shared [n, hidden] and shared_gate [n] (bf16 logits) are both null without a shared
// expert; out [n, hidden] bf16.
void LaunchMoeCombine(const float* y, const MoeWorkspace& ws, int64_t n, int top_k, int64_t hidden,
                      const __nv_bfloat16* shared, const __nv_bfloat16* shared_gate,
                      __nv_bfloat16* out, cudaStream_t stream);

}  // namespace loom::cuda
