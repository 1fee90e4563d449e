// Row movement kernels over row-major matrices with `row_bytes` bytes a row (any dtype):
//   gather:  out[i, :]        = x[rows[i], :]                   (GatherRows, logits rows)
//   scatter: dst[slots[i], :] = src[i, :], skipped when slot < 0 (StoreKv into the page pool)
//   embed:   out[i, :]        = table[ids[i], :] * scale         (bf16 or f32 table, bf16 out)
// Out-of-range indices (a caller bug) write zeros for gather/embed and are skipped by scatter
// rather than faulting; the host cannot check device indices without a synchronization.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/dtype.h"

namespace loom::cuda {

// pdl: programmatic dependent launch (launch.cuh; CudaTuning::cuda_pdl).
void LaunchGatherRows(const void* x, int64_t x_rows, const int32_t* rows, int64_t n,
                      size_t row_bytes, void* out, cudaStream_t stream, bool pdl);
void LaunchScatterRows(const void* src, int64_t n, const int32_t* slots, int64_t num_slots,
                       size_t row_bytes, void* dst, cudaStream_t stream);
// Two scatters with the same rows and slots in one launch (StoreKv: K and V); src1/dst1 may be
// null for one.
void LaunchScatterRowPairs(const void* src0, void* dst0, const void* src1, void* dst1, int64_t n,
                           const int32_t* slots, int64_t num_slots, size_t row_bytes,
                           cudaStream_t stream);
void LaunchEmbed(const void* table, DType table_dtype, int64_t vocab, const int32_t* ids, int64_t n,
                 int64_t d, float scale, void* out, cudaStream_t stream);

}  // namespace loom::cuda
