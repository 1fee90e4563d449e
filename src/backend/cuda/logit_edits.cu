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

}  // namespace

void LaunchEditLogits(float* x, int64_t vocab, const LogitEdit* edits, int64_t n,
                      cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  EditLogitsKernel<<<blocks, kThreads, 0, stream>>>(x, vocab, edits, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace loom::cuda
