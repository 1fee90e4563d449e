// The next decode step's inputs from this one's, on the device (CudaGraphRunner's lookahead):
// for rows i < n, one token further in the same pages,
//   tokens[i] = ids[i];  positions[i] += 1;  kv_len[i] += 1;
//   slots[i] = pages[page_indptr[i] + p / block_size] * block_size + p % block_size  (p the new
//   position; -1 when its page is not in row i's page list yet: such inputs are never replayed),
// and ids[i] to host_ids[(old position parity) * host_stride + i] (page-locked host memory the
// device can write, read by the host after the stream reaches this kernel; the parity keeps the
// next step's write, which may be queued behind this one, off the ids the host is reading).
// Replaces a copy of the ids to the host and the next step's staged upload: two transfers and
// their latency between two replays.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace loom::cuda {

struct DecodeInputs {
  int32_t* tokens;
  int32_t* positions;
  int32_t* kv_len;
  const int32_t* page_indptr;
  const int32_t* pages;
  int32_t* slots;
};

// pdl: programmatic dependent launch (launch.cuh; CudaTuning::cuda_pdl).
void LaunchAdvanceDecodeInputs(const int32_t* ids, int n, const DecodeInputs& in, int block_size,
                               int32_t* host_ids, int host_stride, cudaStream_t stream, bool pdl);

#ifdef __CUDACC__
// Row i's advance with its new token `id` (the kernel above; also the fused argmax's last block,
// argmax.cuh LaunchArgmaxAdvance).
__device__ __forceinline__ void AdvanceDecodeRow(int i, int32_t id, const DecodeInputs& in,
                                                 int block_size, int32_t* host_ids,
                                                 int host_stride) {
  const int32_t pos = in.positions[i], p = pos + 1;
  in.tokens[i] = id;
  in.positions[i] = p;
  in.kv_len[i] = p + 1;
  const int32_t page = p / block_size, first = in.page_indptr[i];
  in.slots[i] = page < in.page_indptr[i + 1] - first
                    ? in.pages[first + page] * block_size + p % block_size
                    : -1;  // a block boundary: the runner restages before such a step
  host_ids[(pos & 1) * host_stride + i] = id;
}
#endif

}  // namespace loom::cuda
