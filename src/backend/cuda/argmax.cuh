// Greedy sampling on the device: the argmax of every row of a logits matrix with the host
// sampler's rules (sample/sampler.cc): the lowest id among the entries equal to the maximum,
// -inf entries never chosen (kArgmaxNone when the whole row is -inf), and a NaN anywhere in the
// row reported (kArgmaxNaN) instead of a token.
//
// Work split. A row of 128256 f32 logits is 513 KB. One block per row would leave most of the
// 132 SMs idle at batch 1 and keep too few loads in flight, so each row is cut into `splits`
// contiguous chunks (about two blocks per SM over the whole launch, at least kMinChunk entries
// each). A block reduces its chunk with 16-byte loads and warp shuffles; when splits > 1 a second
// one-thread-per-row kernel combines the chunk winners from `scratch`.
//
//   row r:    [ chunk 0 | chunk 1 | ... | chunk splits-1 ]
//   block s:  scratch[r * splits + s] = (max, lowest id of it, saw a NaN) of chunk s
//   combine:  out[r] = best of scratch[r * splits .. r * splits + splits)
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/decode_inputs.cuh"
#include "tensor/dtype.h"

namespace loom::cuda {

inline constexpr int32_t kArgmaxNone = -1;  // every entry is -inf
inline constexpr int32_t kArgmaxNaN = -2;   // the row holds a NaN

// Bytes of device scratch LaunchArgmaxRows needs for these sizes (0 when one block per row).
size_t ArgmaxScratchBytes(int64_t rows, int64_t vocab, int num_sms);

// out[r] = argmax of row r of x (rules above).   x [rows, vocab] f32 or bf16, row-major on the
// device; out [rows] i32 on the device; scratch: ArgmaxScratchBytes(rows, vocab, num_sms) bytes.
// pdl: programmatic dependent launch (launch.cuh; CudaTuning::cuda_pdl).
void LaunchArgmaxRows(const void* x, DType dtype, int64_t rows, int64_t vocab, int num_sms,
                      void* scratch, int32_t* out, cudaStream_t stream, bool pdl);

// One row (batch-1 decode): out[0] = argmax of x as above, then row 0 of `in` advanced with it
// (AdvanceDecodeRow, decode_inputs.cuh), in one launch: the chunk blocks count themselves on
// `ticket` and the last one combines the chunk winners and advances, where LaunchArgmaxRows +
// LaunchAdvanceDecodeInputs take three kernels. ticket: a device counter that is 0 before the
// launch (the last block puts it back to 0); scratch: ArgmaxScratchBytes(1, vocab, num_sms).
void LaunchArgmaxAdvance(const void* x, DType dtype, int64_t vocab, int num_sms, void* scratch,
                         unsigned* ticket, int32_t* out, const DecodeInputs& in, int block_size,
                         int32_t* host_ids, int host_stride, cudaStream_t stream, bool pdl);

}  // namespace loom::cuda
