// ModelRunner: the seam between the engine and the model. It owns the model and the KV pools
// (per layer, [num_blocks, block_size, num_kv_heads, head_dim] for K and for V) and computes one
// StepPlan at a time, leaving the step's logits where it computed them (on the device for CUDA):
// what to do with them — device or host sampling, logit edits, logprobs — is the StepSampler's
// decision (sample/step_sampler.h), not the runner's. Device-agnostic: the CPU and CUDA runners
// implement the same interface.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "base/check.h"
#include "base/status.h"
#include "sched/step_plan.h"
#include "tensor/dtype.h"

namespace loom {

// The logits of one step, where the runner left them.
//
//   plan.seqs:  s0 (num_logits 1) | s1 (num_logits 0) | s2 (num_logits 3)
//   rows:       [ r(s0) , r(s2,0) , r(s2,1) , r(s2,2) ]      (plan.num_logits entries)
//   logits:     f32 [>= 1 + max(rows), vocab]; row rows[k] holds the k-th logits row
//
// And the final hidden states the plan's prompt-only seqs ask for (embeddings, step_plan.h):
// `hidden` row h is the h-th of the plan's hidden rows (seq by seq, [hidden_begin, hidden_end)
// of each), plan.num_hidden of them.
struct StepLogits {
  Tensor logits;               // f32 [m, vocab] on `backend`'s device, row-major
  std::vector<int32_t> rows;   // [plan.num_logits]: the row of `logits` of each logits row
  Backend* backend = nullptr;  // where `logits` lives (its ops may read and edit it in place)
  // [>= plan.num_hidden, hidden_size] in the backend's activation dtype (f32 on the CPU, bf16 on
  // CUDA); undefined when plan.num_hidden == 0.
  Tensor hidden;
};

// How a runner's KV block looks as host bytes (ReadKvBlocks / WriteKvBlocks): for each layer in
// order, the block's K rows then its V rows, each [block_size, num_kv_heads, head_dim] in the KV
// dtype. block_bytes == 0: the runner does not expose its KV (no tier below the pool).
struct KvBlockLayout {
  int num_layers = 0;
  int num_kv_heads = 0;  // of the first layer (a layer may differ; block_bytes counts each)
  int head_dim = 0;
  int64_t block_bytes = 0;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Computes the step: writes K/V for every scheduled token at its slot (see step_plan.h) and
  // returns the logits rows the plan asks for (ScheduledSeq::num_logits) and its hidden rows
  // (ScheduledSeq::hidden_begin / hidden_end; only when hidden_size() > 0), valid and writable
  // until the next Execute. plan.preempted / plan.finished name requests whose per-request
  // runner state (if any) can be dropped. Called from the engine thread only. An error fails
  // every request of the step; the engine keeps running.
  virtual StatusOr<StepLogits> Execute(const StepPlan& plan) = 0;

  // A fast path for a step whose every sequence has exactly one logits row, all sampled as the
  // plain argmax (no edits, no logprobs): called right after Execute(plan), it either writes
  // each row's argmax to `ids` [plan.seqs.size()] (Backend::ArgmaxRows codes) and returns true —
  // a runner may use the wait for them to queue the likely next step on the device — or touches
  // nothing and returns false (the caller takes the argmax of the logits itself).
  virtual bool GreedyIds(const StepPlan& plan, std::span<int32_t> ids) {
    (void)plan;
    (void)ids;
    return false;
  }

  // The KV pools as host bytes, for the tiers below the pool (host RAM, SSD). Called from the
  // engine thread between steps: ReadKvBlocks sees the KV of every step executed so far,
  // WriteKvBlocks lands before the next step reads it. Block blocks[i]'s block_bytes are at
  // hosts[i].
  virtual KvBlockLayout kv_block_layout() const { return {}; }
  virtual Status ReadKvBlocks(std::span<const BlockId> blocks, std::span<uint8_t* const> hosts) {
    (void)blocks;
    (void)hosts;
    return UnimplementedError("this model runner does not expose its KV cache");
  }
  // ReadKvBlocks without waiting: the blocks are read as of the steps executed so far (later
  // steps' writes are not seen) and the bytes are at `hosts` once WaitKvBlockReads(*ticket)
  // returns. The default reads synchronously (ticket 0).
  virtual StatusOr<uint64_t> StartKvBlockReads(std::span<const BlockId> blocks,
                                               std::span<uint8_t* const> hosts) {
    RETURN_IF_ERROR(ReadKvBlocks(blocks, hosts));
    return uint64_t{0};
  }
  virtual void WaitKvBlockReads(uint64_t ticket) { (void)ticket; }
  // Whether WaitKvBlockReads(ticket) would return at once (does not wait).
  virtual bool KvBlockReadsDone(uint64_t ticket) {
    (void)ticket;
    return true;
  }
  virtual Status WriteKvBlocks(std::span<const BlockId> blocks,
                               std::span<const uint8_t* const> hosts) {
    (void)blocks;
    (void)hosts;
    return UnimplementedError("this model runner does not expose its KV cache");
  }
  // Host memory that Read/WriteKvBlocks copy from and to fastest (page-locked on CUDA: the copy
  // reads it directly); plain host memory by default. Not zero-filled.
  virtual std::shared_ptr<uint8_t> AllocKvStaging(size_t bytes) {
    return std::shared_ptr<uint8_t>(new uint8_t[bytes == 0 ? 1 : bytes],
                                    std::default_delete<uint8_t[]>());
  }

  // Rows of the logits; token ids are in [0, vocab_size()).
  virtual int vocab_size() const = 0;
  // The model's context length in tokens (prompt + generated).
  virtual int max_model_len() const = 0;
  // Width of the final hidden states Execute returns for prompt-only seqs (embeddings); 0: this
  // runner returns none (plans must not ask for hidden rows).
  virtual int hidden_size() const { return 0; }
};

// The step's hidden rows copied to the host as f32 [plan_num_hidden, hidden_size] row-major
// (bf16 activations widened exactly). Precondition: out.hidden holds >= plan_num_hidden rows.
inline std::vector<float> HiddenToHost(const StepLogits& out, int plan_num_hidden) {
  if (plan_num_hidden == 0) return {};
  CHECK(out.backend != nullptr && out.hidden.defined()) << "HiddenToHost: no hidden states";
  CHECK_EQ(out.hidden.ndim(), 2);
  CHECK_GE(out.hidden.dim(0), plan_num_hidden);
  const size_t width = static_cast<size_t>(out.hidden.dim(1));
  const size_t n = static_cast<size_t>(plan_num_hidden) * width;
  std::vector<float> host(n);
  if (out.hidden.dtype() == DType::kF32) {
    std::vector<float> all(static_cast<size_t>(out.hidden.numel()));
    out.backend->CopyToHost(out.hidden, all.data());
    std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), host.begin());
    return host;
  }
  CHECK(out.hidden.dtype() == DType::kBF16)
      << "HiddenToHost: hidden states in " << DTypeName(out.hidden.dtype());
  std::vector<uint16_t> all(static_cast<size_t>(out.hidden.numel()));
  out.backend->CopyToHost(out.hidden, all.data());
  for (size_t i = 0; i < n; ++i) host[i] = Bf16ToF32(all[i]);
  return host;
}

// Execute, then the logits rows copied to the host: f32 [plan.num_logits, vocab] row-major, plan
// order (tests and tools that compare logits; the engine samples through StepSampler).
inline StatusOr<std::vector<float>> ExecuteToHost(ModelRunner& runner, const StepPlan& plan) {
  ASSIGN_OR_RETURN(StepLogits out, runner.Execute(plan));
  const size_t vocab = static_cast<size_t>(runner.vocab_size());
  std::vector<float> host(out.rows.size() * vocab);
  if (out.rows.empty()) return host;
  CHECK(out.backend != nullptr) << "ExecuteToHost: logits without a backend";
  std::vector<float> all(static_cast<size_t>(out.logits.numel()));
  out.backend->CopyToHost(out.logits, all.data());
  for (size_t k = 0; k < out.rows.size(); ++k) {
    const float* src = all.data() + static_cast<size_t>(out.rows[k]) * vocab;
    std::copy(src, src + vocab, host.begin() + static_cast<std::ptrdiff_t>(k * vocab));
  }
  return host;
}

}  // namespace loom
