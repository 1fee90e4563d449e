// Seeded draws on the device: for each task, the token the host sampler (sample/sampler.cc,
// Sampler::SampleRow) draws from one f32 logits row with temperature, top-k, top-p and min-p and
// nothing else, without copying the row to the host. The algorithm and its cost are described in
// sample_rows.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/draw_params.h"

namespace loom::cuda {

// One row to draw, as the kernel reads it (the host packs a launch's tasks into one upload).
struct DrawTask {
  DrawParams params;
  int32_t row = 0;  // row of x
  int32_t unused = 0;
};

// The largest vocabulary LaunchSampleRows takes (one cluster of blocks holds a row in shared
// memory).
int64_t SampleRowsMaxVocab();

// Points of the kernel a timed launch records (SampleRowsTuning::stamps): task 0's first block,
// thread 0, %globaltimer ns when it got there. Select's six points repeat per radix level (the
// last select's: top-p's when both run): histogram built, cluster barrier, slice summed, barrier,
// slices gathered, bin found.
enum SampleRowsStamp : int {
  kStampStart,
  kStampLoaded,                      // the row's chunk is in shared memory
  kStampMax,                         // max / NaN / unmasked count reduced over the cluster
  kStampP,                           // p computed, level-0 histogram built
  kStampSelect,                      // + 6 * level + point
  kStampRanges = kStampSelect + 18,  // each thread's kept sum of its id range
  kStampScanned,                     // the ranges' starting sums (block scan + cluster exchange)
  kStampWalked,                      // the walk to the target
  kStampPicked,                      // the lowest crossing reduced over the cluster, token written
  kStampEnd,                         // after the exit barrier
  kNumStamps
};

// Knobs for benchmarks; the defaults are the measured best (docs/benchmarks.md).
struct SampleRowsTuning {
  int chunk_target = 0;                  // logits a block aims to hold (0: the default, 16384)
  unsigned long long* stamps = nullptr;  // device [kNumStamps]: a timed launch (see above)
};

// out[i] = the draw for tasks[i] from row tasks[i].row of x: a token id, kArgmaxNaN when the row
// holds a NaN, kArgmaxNone when every entry is -inf (argmax.cuh).
//   x [*, vocab] f32 row-major on the device; tasks [n], out [n] i32 on the device.
void LaunchSampleRows(const float* x, int64_t vocab, const DrawTask* tasks, int64_t n, int32_t* out,
                      cudaStream_t stream, const SampleRowsTuning& tuning = {});

}  // namespace loom::cuda
