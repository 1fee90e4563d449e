#include "backend/cuda/cuda_check.h"
#include "backend/cuda/logit_edits.cuh"

namespace loom::cuda {
namespace {

__global__ void EditLogitsKernel(float* x, int64_t vocab, const LogitEdit* edits, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const LogitEdit e = edits[i];
  float& l = x[int64_t{e.row} * vocab + e.token];
  l = ApplyLogitEdit(e, l);
}

// grid (column blocks, rows): thread j of row i clears x[rows[i], j] when its bit in the row's
// mask is clear.
__global__ void MaskLogitsKernel(float* x, int64_t vocab, const int32_t* rows,
                                 const int32_t* mask_of, const uint32_t* masks, int64_t words) {
  const int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (j >= vocab) return;
  const int64_t i = blockIdx.y;
  const int64_t w = j >> 5;
  const uint32_t* mask = masks + int64_t{mask_of[i]} * words;
  const bool allowed = w < words && ((mask[w] >> (j & 31)) & 1u) != 0;
  if (!allowed) x[int64_t{rows[i]} * vocab + j] = -__builtin_huge_valf();
}

}  // namespace

void LaunchMaskLogits(float* x, int64_t vocab, const int32_t* rows, const int32_t* mask_of,
                      const uint32_t* masks, int64_t n, int64_t words, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>((vocab + kThreads - 1) / kThreads),
                  static_cast<unsigned>(n));
  MaskLogitsKernel<<<grid, kThreads, 0, stream>>>(x, vocab, rows, mask_of, masks, words);
  CUDA_CHECK(cudaGetLastError());
}

void LaunchEditLogits(float* x, int64_t vocab, const LogitEdit* edits, int64_t n,
                      cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  EditLogitsKernel<<<blocks, kThreads, 0, stream>>>(x, vocab, edits, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace loom::cuda
