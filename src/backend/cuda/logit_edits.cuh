// Backend::EditLogits on the device: each LogitEdit (backend/logit_edit.h) applied to its logit,
// one thread an edit, with the host sampler's float operations (ApplyLogitEdit is shared).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/logit_edit.h"

namespace loom::cuda {

// x[e.row * vocab + e.token] = ApplyLogitEdit(e, that logit) for the n edits (device memory), no
// two naming the same (row, token); rows and tokens were checked on the host.
void LaunchEditLogits(float* x, int64_t vocab, const LogitEdit* edits, int64_t n,
                      cudaStream_t stream);

}  // namespace loom::cuda
