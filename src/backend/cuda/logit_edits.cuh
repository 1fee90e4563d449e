// Backend::EditLogits on the device: each LogitEdit (backend/logit_edit.h) applied to its logit,
// one thread an edit, with the host sampler's float operations (ApplyLogitEdit is shared); and
// Backend::MaskLogits, the grammar masks, one thread a logit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/logit_edit.h"

namespace loom::cuda {

// x[e.row * vocab + e.token] = ApplyLogitEdit(e, that logit) for the n edits (device memory), no
// two naming the same (row, token); rows and tokens were checked on the host.
void LaunchEditLogits(float* x, int64_t vocab, const LogitEdit* edits, int64_t n,
                      cudaStream_t stream);

// Backend::MaskLogits: for each of the n rows (device memory: rows[n], mask_of[n] indexing the
// distinct masks[num_masks * words]), every logit of x[rows[i]] whose bit in mask mask_of[i] is
// clear (or past 32 * words) becomes -inf.
void LaunchMaskLogits(float* x, int64_t vocab, const int32_t* rows, const int32_t* mask_of,
                      const uint32_t* masks, int64_t n, int64_t words, cudaStream_t stream);

}  // namespace loom::cuda
