// StepSampler: the one place that decides how each logits row of a step is sampled, and samples
// it. Given the step's logits where the runner left them (StepLogits: on the device for CUDA),
// it chooses per row:
//
//   plain greedy (IsPlainGreedy)            -> argmax where the logits are (Backend::ArgmaxRows)
//   plain draw (IsPlainDraw)                -> draw where the logits are (Backend::SampleRows)
//   bias / penalties / min_tokens masking,  -> the row's LogitEdits applied where the logits are
//     maybe logprobs (IsEditable*,             (Backend::EditLogits), then the argmax or the draw,
//     LogprobsOnEditedRow)                     and its logprobs there (Backend::LogprobRows)
//   anything else, or a backend without     -> the row copied to the host (one transfer for all
//     the op, or device sampling off           such rows) and Sampler::SampleRow there, split over
//                                              up to num_threads threads when the step has enough
//                                              logits
//
// and gives every row the token (and logprobs) SampleRow would give it: exact for argmaxes,
// edits and logprobs; for a device draw up to float summation order at a boundary
// (sample_rows.cu). When every row of a step with one row per sequence is a plain greedy row on
// the device, the runner's own fast path goes first (ModelRunner::GreedyIds: CUDA graphs queue
// the next step while the ids come back).
//
// A row under a grammar mask (SampleContext::allowed) takes the same ways with the mask applied
// where the logits are (Backend::MaskLogits, after the edits), unless it asks for logprobs (those
// are of the unmasked row: the host computes them) or the backend has no MaskLogits.
//
// A forced row (SampleContext::forced: a reasoning budget closing its section) is not sampled:
// its result is the forced token, decided here without touching the logits, unless it asks for
// logprobs (then the host Sampler takes them and returns the forced token).
//
// Per request it keeps the LogitEditCache of the rows it edits on the device (updated token by
// token instead of rebuilt); Release drops it. A later input of the same decision: 1 + k rows per
// sequence for speculative decoding.
// Engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "runtime/model_runner.h"
#include "sample/sampler.h"

namespace loom {

struct StepSamplerConfig {
  int vocab_size = 0;
  // Threads that sample the rows whose logits come to the host (the calling thread and a pool of
  // num_threads - 1). >= 1.
  int num_threads = 1;
  // false: every row's logits come to the host, even where the backend could sample them (A/B
  // measurements, debugging; --no-device-sampling).
  bool device_sampling = true;
};

// One logits row of a step.
struct StepRow {
  RequestId request;  // whose per-request state the row uses
  // The request's parameters and its tokens up to this row's position: ctx.output is what the
  // row's token follows (SampleRow's draw counter is ctx.output.size()).
  SampleContext ctx;
  // The row is its sequence's last logits row of the step. Only such rows use the request's
  // LogitEditCache (which follows one row per step); other rows with edits go to the host.
  bool last_of_seq = true;
};

struct StepSamplerStats {
  int64_t rows_on_device = 0;          // rows whose token was chosen where the logits are
  int64_t rows_on_host = 0;            // rows sampled by the host Sampler
  int64_t masked_rows_on_device = 0;   // of rows_on_device, rows under a grammar mask
  uint64_t parallel_sample_steps = 0;  // steps whose host rows were sampled on > 1 thread
};

class StepSampler {
 public:
  explicit StepSampler(const StepSamplerConfig& config);
  ~StepSampler();
  StepSampler(const StepSampler&) = delete;
  StepSampler& operator=(const StepSampler&) = delete;

  // Samples the rows of a step that `runner` executed with result `logits`: rows[k] describes
  // logits row k (plan order, rows.size() == logits.rows.size()). Returns one result per row;
  // a row's error (NaN logits, every token masked) is its own. May edit `logits` in place and
  // call runner.GreedyIds(plan, ...). Updates the per-request edit caches of the rows' requests.
  std::vector<StatusOr<SampleResult>> Sample(const StepPlan& plan, std::span<const StepRow> rows,
                                             StepLogits& logits, ModelRunner& runner);

  // Forgets `id`'s per-request state (call when it finishes). No-op for an unknown id.
  void Release(RequestId id) { edit_caches_.erase(id); }

  const StepSamplerStats& stats() const { return stats_; }

 private:
  // How one row is sampled (chosen by Plan).
  enum class Where : uint8_t { kHost, kDeviceGreedy, kDeviceDraw, kForced };
  struct RowPlan {
    Where where = Where::kHost;
    bool masked = false;               // the row's grammar mask applied before the argmax / draw
    DrawParams draw;                   // kDeviceDraw
    std::span<const LogitEdit> edits;  // applied before the device argmax / draw
    int num_logprobs = -1;             // >= 0: logprobs taken on the device after the edits
  };
  // The capabilities of the backend the logits live on, as used this step.
  struct DeviceOps {
    bool argmax = false, draw = false, edits = false, logprobs = false, masks = false;
  };
  RowPlan Plan(const StepRow& row, const DeviceOps& ops);
  // The rows planned for the device: edits, masks, then argmaxes and draws, then logprobs, one
  // launch each; their results into `results`.
  void SampleOnDevice(StepLogits& logits, std::span<const StepRow> rows,
                      std::span<const RowPlan> plans, std::vector<StatusOr<SampleResult>>& results);
  // The kHost rows: their logits to the host (in place for host memory), then SampleRow.
  void SampleOnHost(StepLogits& logits, std::span<const StepRow> rows,
                    std::span<const RowPlan> plans, std::vector<StatusOr<SampleResult>>& results);

  // A row sampled by the host Sampler.
  struct HostRow {
    size_t row_idx = 0;        // the step's logits row
    const SampleContext* ctx;  // points into the caller's rows: valid for the step
    std::span<float> logits;   // [vocab_size] f32, host (sampler scratch)
  };
  // How many sampling workers `num_rows` host rows costing `work_logits` get (a sampled row costs
  // vocab_size, an argmax-only row an eighth of it): at most one per row and per
  // kMinSampleLogitsPerWorker, at most num_threads; 1 = the calling thread alone.
  size_t NumSamplingWorkers(size_t num_rows, int64_t work_logits) const;
  // Bit-identical to sampling the rows one after another: each row reads only its own logits and
  // request state and draws from its own counter-based RNG; a worker's Sampler holds only scratch.
  void SampleHostRows(std::span<const HostRow> rows, int64_t work_logits,
                      std::vector<StatusOr<SampleResult>>& results);
  // Host staging of at least `floats` f32 for `backend`'s copies, grown (never shrunk).
  float* Staging(Backend* backend, size_t floats);

  // Waking the pool costs tens of microseconds; one row of a 128k vocabulary about a millisecond
  // (docs/benchmarks.md). A worker gets at least this many logits to sample.
  static constexpr int64_t kMinSampleLogitsPerWorker = int64_t{1} << 16;

  StepSamplerConfig config_;
  // One per sampling worker, each on its own cache lines: SampleRow writes its Sampler's vector
  // members once per candidate, and two workers' Samplers sharing a line run slower than one.
  struct alignas(128) SamplerSlot {
    explicit SamplerSlot(int vocab_size) : sampler(vocab_size) {}
    Sampler sampler;
  };
  std::vector<SamplerSlot> samplers_;  // [num_threads]
  std::unique_ptr<ThreadPool> pool_;   // num_threads - 1 threads; null if none
  std::unordered_map<RequestId, LogitEditCache> edit_caches_;
  std::shared_ptr<Buffer> staging_;               // host, Backend::AllocHostStaging
  std::vector<LogitEdit> edits_;                  // the step's device edits (allocation reused)
  std::vector<int32_t> mask_rows_;                // the step's device masks: logits rows...
  std::vector<std::span<const uint32_t>> masks_;  // ...and their masks (allocations reused)
  StepSamplerStats stats_;
};

}  // namespace loom
