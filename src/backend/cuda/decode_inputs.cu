#include "backend/cuda/cuda_check.h"
#include "backend/cuda/decode_inputs.cuh"
#include "backend/cuda/ktrace.cuh"
#include "backend/cuda/launch.cuh"

namespace loom::cuda {
LOOM_KTRACE_TU(decode_inputs)
namespace {

// Launched with PDL after the argmax that writes ids (launch.cuh): everything it reads or
// writes is touched by that kernel or the replay before it, so all of it waits.
__global__ void AdvanceDecodeInputsKernel(const int32_t* ids, int n, DecodeInputs in,
                                          int block_size, int32_t* host_ids, int host_stride) {
  KTRACE_BEGIN();
  PdlWait();
  KTRACE_WAITED();
  PdlLaunchDependents();
  KTRACE_END(kKTraceAdvanceInputs, n, 0);
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  AdvanceDecodeRow(i, ids[i], in, block_size, host_ids, host_stride);
}

}  // namespace

void LaunchAdvanceDecodeInputs(const int32_t* ids, int n, const DecodeInputs& in, int block_size,
                               int32_t* host_ids, int host_stride, cudaStream_t stream, bool pdl) {
  if (n <= 0) return;
  const int threads = 128;
  LaunchPdl(AdvanceDecodeInputsKernel, dim3((n + threads - 1) / threads), dim3(threads), 0, stream,
            pdl, ids, n, in, block_size, host_ids, host_stride);
}

}  // namespace loom::cuda
