// CudaGraphRunner: replays CUDA graphs for decode-only steps (every sequence computes exactly one
// token), installed into a DecoderRunner as its StepAccelerator; prefill and mixed steps stay
// eager. On an 8B model one decode step is ~600 small kernel launches: replaying them as one
// graph removes the host launch cost and the gaps between kernels.
//
// Static inputs. A graph bakes every pointer and launch shape, so each padded batch size B
// (1, 2, 4, ..., 256, up to the engine's max_num_seqs) has one graph reading fixed-capacity device
// buffers, all in one i32 block so a step costs one async host-to-device copy from pinned staging:
//
//   [tokens Bmax | positions Bmax | kv_len Bmax | page_indptr Bmax+1 | slots Bmax | pages Bmax*P]
//   query_start = 0, 1, ..., Bmax and sample_rows = 0, 1, ..., Bmax-1 are constant (filled once).
//
// P = max pages per sequence (ceil(max_model_len / block_size)). A step with n <= B sequences pads
// rows n..B-1 with token 0 at position 0, kv_len 1 (page 0) and slot -1 (StoreKv skips it): their
// attention reads a real block but their outputs are discarded. Attention is planned at capture
// with max_kv_len = P * block_size, so its split-KV count is fixed; the kernel derives each
// sequence's range from kv_len on the device (empty splits combine to nothing).
//
// Static allocations. Model::Forward allocates its activations with Backend::Alloc every step.
// Capture runs it inside the DeviceAllocator's private pool (device_allocator.h), so the graph's
// activations live in blocks no later allocation can receive; graphs share the pool.
//
// Lookahead (greedy decode, batch <= lookahead_max_rows). When every row of a replayed step is
// greedy, ArgmaxAndLookahead queues, after the argmax, the step that most likely comes next: one
// kernel (decode_inputs.cuh) advances the input block in place — each sequence one position
// further in the same pages, its token this step's argmax — and writes the ids to page-locked
// host memory, then the same graph replays (never across a block boundary, where the page list
// would grow, nor after a request's last step by length). The host then waits for the ids while
// the GPU already runs that step, so the engine's per-step host work and the launch no longer
// leave the GPU idle. The next TryForward takes it when its plan is exactly that step
// (same requests in the same order, positions, tokens and pages); any other plan discards it and
// runs as usual. A discarded step wrote K/V only at positions no sequence has computed yet: the
// plan that replaces it rewrites them, and a finished sequence's blocks are free (partial blocks
// are never in the prefix cache), so nothing later reads them.
//
// The batch-1 graph (when lookahead is on) ends with the argmax and that advance itself, so a
// queued step costs one graph launch instead of three kernels and a launch between replays
// (CudaGraphOptions::graph_tail = false: they run after the graph, as for larger batches). Its
// advance runs on every replay, also when no step is queued; any launch that is not the queued
// step restages the whole input block first, and at a block boundary the advanced slot is -1
// (nothing is written).
//
// Capture is lazy: the first decode step of each padded size runs the forward once eagerly on
// padding-only inputs (primes cuBLASLt plans and kernel attributes), then captures and
// instantiates. Logits of padded rows are computed and dropped.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "runtime/decoder_runner.h"

namespace loom::cuda {
class CudaEvent;
class PinnedHostBuffer;
}  // namespace loom::cuda

namespace loom {

struct CudaGraphOptions {
  // Padded batch sizes to capture (ascending); sizes above max_batch are dropped.
  std::vector<int> batch_sizes = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  int max_batch = 256;        // the engine's max_num_seqs
  int max_pages_per_seq = 0;  // 0: ceil(max_model_len / block_size)
  // Greedy decode steps of at most this many sequences queue the next step before their ids
  // come back (ArgmaxAndLookahead); 0: never (the CLI's --cuda-tune graph_lookahead). A queued step
  // the engine does not take (a request ended on EOS or a stop, one arrived) costs a whole step,
  // so it pays only where such a step is rare: at batch 64 of 128-token requests it cost 8-11%
  // (H200), at batch 1 it gains 1-5% (docs/benchmarks.md).
  int lookahead_max_rows = 1;
  // The batch-1 graph ends with the argmax and the lookahead's input advance (file comment;
  // --cuda-tune graph_tail). H200: +0.7% for the 1B at batch 1, within the spread.
  bool graph_tail = true;
  // That tail as one kernel instead of the argmax, combine and advance kernels (--cuda-tune
  // graph_tail_fused). H200, 1B batch 1: 1,301-1,303 vs 1,293-1,295 tok/s.
  bool tail_fused = true;
};

class CudaGraphRunner final : public StepAccelerator {
 public:
  // `model` and `kv` (the DecoderRunner's pools, `num_blocks` blocks of `block_size`) must
  // outlive the runner; the model's backend must be `backend`.
  CudaGraphRunner(const Model& model, const std::vector<KvLayer>& kv, int block_size,
                  CudaBackend* backend, const CudaGraphOptions& options);
  ~CudaGraphRunner() override;

  // Takes decode-only plans with at most the largest batch size and at most max_pages_per_seq
  // pages per sequence; returns false (nothing done) for every other plan. The logits it hands
  // back are rows of the graphs' static output (valid until the next replay).
  StatusOr<bool> TryForward(const StepPlan& plan, Tensor* logits) override;
  // The step's argmax, and meanwhile the next step queued (see the file comment).
  bool ArgmaxAndLookahead(const StepPlan& plan, std::span<int32_t> ids) override;
  void DropLookahead() override { ahead_.pending = false; }

  int num_graphs() const { return static_cast<int>(graphs_.size()); }
  int64_t replays() const { return replays_; }
  int max_batch() const { return batch_sizes_.empty() ? 0 : batch_sizes_.back(); }
  // Lookahead steps queued, and how many of them the next plan took (the rest were discarded).
  int64_t lookaheads() const { return lookaheads_; }
  int64_t lookahead_hits() const { return lookahead_hits_; }

 private:
  struct Graph;
  // Writes the step's (padded to B) inputs into the pinned staging and returns the i32 count
  // to copy.
  int64_t Stage(const StepPlan& plan, int B);
  Status Capture(int B);
  ForwardInput InputsFor(int B) const;
  // Stages `plan` (padded to B) and queues its copy to the device and its graph.
  void Launch(const StepPlan& plan, int B);
  // The lookahead's advance of rows [0, n) of the input block by ids_ (decode_inputs.cuh).
  void LaunchAdvance(int n);
  // The batch-1 graph's tail as one kernel: the argmax of `logits` (one row) and row 0's advance.
  void LaunchArgmaxAdvance(const Tensor& logits);
  // Whether `plan` is exactly the queued lookahead step.
  bool IsLookahead(const StepPlan& plan, int B) const;

  // The step queued by ArgmaxAndLookahead: per row, the request, its position, its token (the
  // previous step's id, on the device before the host knew it) and the pages staged for it.
  struct Lookahead {
    bool pending = false;
    int B = 0;
    std::vector<RequestId> requests;
    std::vector<int32_t> positions, tokens;
    std::vector<std::vector<BlockId>> pages;
  };

  const Model& model_;
  const std::vector<KvLayer>& kv_;
  int block_size_;
  CudaBackend* backend_;
  std::vector<int> batch_sizes_;
  int bmax_ = 0;
  int max_pages_ = 0;
  Tensor block_;        // i32 [5 * bmax + 1 + bmax * max_pages] on the device (layout above)
  Tensor query_start_;  // i32 [bmax + 1]: 0..bmax
  Tensor sample_rows_;  // i32 [bmax]: 0..bmax-1
  Tensor logits_;       // f32 [bmax, vocab]
  std::unique_ptr<cuda::PinnedHostBuffer> staging_;  // i32, same layout as block_
  // Recorded after each copy out of staging_: Stage waits for it before rewriting the staging
  // (the caller need not synchronize between steps).
  std::unique_ptr<cuda::CudaEvent> staged_;
  std::map<int, std::unique_ptr<Graph>> graphs_;
  int64_t replays_ = 0;
  int lookahead_max_rows_ = 1;
  bool in_graph_tail_ = true;  // the batch-1 graph ends with argmax + advance (graph_tail)
  int last_B_ = 0;             // the padded size of the last replay
  Tensor ids_;                 // i32 [bmax]: the last step's argmax
  bool tail_fused_ = true;     // options.tail_fused
  Tensor tail_scratch_;        // LaunchArgmaxAdvance's chunk winners and ticket
  // i32 [2 x bmax]: the D2H copy's ids at [0, n); the advance's at the parity of each row's
  // position (decode_inputs.cuh), so a queued step's write never lands on the ids being read.
  std::unique_ptr<cuda::PinnedHostBuffer> ids_host_;
  int32_t* ids_host_device_ = nullptr;           // ids_host_ as the device addresses it
  std::unique_ptr<cuda::CudaEvent> ids_copied_;  // recorded once ids_host_ holds the ids
  Lookahead ahead_;
  int64_t lookaheads_ = 0, lookahead_hits_ = 0;
};

}  // namespace loom
