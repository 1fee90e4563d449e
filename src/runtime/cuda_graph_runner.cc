#include "runtime/cuda_graph_runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "backend/cuda/argmax.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/decode_inputs.cuh"
#include "backend/cuda/device_allocator.h"
#include "base/logging.h"

namespace loom {
namespace {

// Offsets (in i32) of the parts of the input block for capacity bmax.
struct Layout {
  int64_t tokens, positions, kv_len, page_indptr, slots, pages, total;
  Layout(int bmax, int max_pages) {
    tokens = 0;
    positions = tokens + bmax;
    kv_len = positions + bmax;
    page_indptr = kv_len + bmax;
    slots = page_indptr + bmax + 1;
    pages = slots + bmax;
    total = pages + int64_t{bmax} * max_pages;
  }
};

Tensor UploadIota(CudaBackend* be, int64_t n) {
  Tensor h = HostTensor(DType::kI32, Shape{n});
  for (int64_t i = 0; i < n; ++i) h.data_as<int32_t>()[i] = static_cast<int32_t>(i);
  return be->Upload(h);
}

}  // namespace

struct CudaGraphRunner::Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  // The graph ends with the argmax and the advance of its inputs (batch 1, LOOM_GRAPH_TAIL).
  bool tail = false;
  ~Graph() {
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
  }
};

CudaGraphRunner::CudaGraphRunner(const Model& model, const std::vector<KvLayer>& kv, int block_size,
                                 CudaBackend* backend, const CudaGraphOptions& options)
    : model_(model), kv_(kv), block_size_(block_size), backend_(backend) {
  CHECK(backend_ != nullptr && model_.backend() == backend_)
      << "CudaGraphRunner: the model must live on the given CudaBackend";
  CHECK_GT(block_size_, 0);
  int want = 1;
  while (want < options.max_batch) want *= 2;  // the padded size the largest batch needs
  for (int b : options.batch_sizes) {
    CHECK_GT(b, 0);
    if (b <= want) batch_sizes_.push_back(b);
  }
  std::sort(batch_sizes_.begin(), batch_sizes_.end());
  CHECK(!batch_sizes_.empty()) << "CudaGraphRunner: no batch sizes";
  bmax_ = batch_sizes_.back();
  const int context = model_.config().max_position_embeddings;
  max_pages_ = options.max_pages_per_seq > 0 ? options.max_pages_per_seq
                                             : (context + block_size_ - 1) / block_size_;
  const Layout L(bmax_, max_pages_);
  block_ = backend_->Alloc(DType::kI32, Shape{L.total});
  query_start_ = UploadIota(backend_, bmax_ + 1);
  sample_rows_ = UploadIota(backend_, bmax_);
  logits_ = backend_->Alloc(DType::kF32, Shape{bmax_, model_.config().vocab_size});
  staging_ = std::make_unique<cuda::PinnedHostBuffer>(static_cast<size_t>(L.total) * 4);
  staged_ = std::make_unique<cuda::CudaEvent>();
  CHECK_GE(options.lookahead_max_rows, 0) << "CudaGraphRunner: lookahead_max_rows";
  lookahead_max_rows_ = options.lookahead_max_rows;
  in_graph_tail_ = options.graph_tail && backend_->has_argmax_rows();
  ids_ = backend_->Alloc(DType::kI32, Shape{bmax_});
  ids_host_ = std::make_unique<cuda::PinnedHostBuffer>(static_cast<size_t>(2 * bmax_) * 4);
  void* mapped = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(&mapped, ids_host_->data(), 0));
  ids_host_device_ = static_cast<int32_t*>(mapped);
  ids_copied_ = std::make_unique<cuda::CudaEvent>();
  // The batch-1 tail as one kernel (tail_fused = false: the argmax, combine and advance
  // kernels): its chunk winners, then its ticket, which must start at 0.
  tail_fused_ = options.tail_fused;
  const size_t winners =
      cuda::ArgmaxScratchBytes(1, model_.config().vocab_size, backend_->num_sms());
  tail_scratch_ = backend_->Alloc(DType::kI32, Shape{static_cast<int64_t>(winners / 4 + 2)});
  CUDA_CHECK(cudaMemsetAsync(tail_scratch_.data(), 0, tail_scratch_.nbytes(), backend_->stream()));
  staged_->Record(backend_->stream());
  backend_->Synchronize();
}

CudaGraphRunner::~CudaGraphRunner() {
  backend_->Synchronize();
  if (replays_ > 0) {
    LOG(INFO) << "decode graphs: " << replays_ << " steps replayed, " << lookaheads_
              << " queued ahead (" << lookahead_hits_ << " taken)";
  }
  graphs_.clear();
}

ForwardInput CudaGraphRunner::InputsFor(int B) const {
  const Layout L(bmax_, max_pages_);
  auto part = [&](int64_t offset, int64_t n) { return block_.Slice(offset, n); };
  ForwardInput in;
  in.token_ids = part(L.tokens, B);
  in.positions = part(L.positions, B);
  in.sample_rows = sample_rows_.Slice(0, B);
  in.num_sample_rows = B;
  in.sample_rows_all = true;
  AttentionMeta& m = in.meta;
  m.num_seqs = B;
  m.num_tokens = B;
  m.max_query_len = 1;
  m.max_kv_len = max_pages_ * block_size_;  // fixes the split-KV plan for any kv_len
  m.block_size = block_size_;
  m.query_start = query_start_.Slice(0, B + 1);
  m.kv_len = part(L.kv_len, B);
  m.page_indptr = part(L.page_indptr, B + 1);
  m.page_indices = part(L.pages, int64_t{B} * max_pages_);
  m.slot_mapping = part(L.slots, B);
  return in;
}

int64_t CudaGraphRunner::Stage(const StepPlan& plan, int B) {
  staged_->Synchronize();  // the previous copy out of the staging is done
  const Layout L(bmax_, max_pages_);
  int32_t* h = static_cast<int32_t*>(staging_->data());
  const int n = static_cast<int>(plan.seqs.size());
  int32_t num_pages_total = 0;
  h[L.page_indptr] = 0;
  for (int i = 0; i < B; ++i) {
    if (i < n) {
      const ScheduledSeq& s = plan.seqs[static_cast<size_t>(i)];
      const int32_t pos = s.start_pos;
      const int32_t kv_len = pos + 1;
      const int32_t pages = (kv_len + block_size_ - 1) / block_size_;
      h[L.tokens + i] = s.tokens[0];
      h[L.positions + i] = pos;
      h[L.kv_len + i] = kv_len;
      h[L.slots + i] =
          s.block_table[static_cast<size_t>(pos / block_size_)] * block_size_ + pos % block_size_;
      std::memcpy(h + L.pages + num_pages_total, s.block_table.data(),
                  static_cast<size_t>(pages) * sizeof(int32_t));
      num_pages_total += pages;
    } else {  // padding: attends to one key of block 0, writes no KV
      h[L.tokens + i] = 0;
      h[L.positions + i] = 0;
      h[L.kv_len + i] = 1;
      h[L.slots + i] = -1;
      h[L.pages + num_pages_total] = 0;
      num_pages_total += 1;
    }
    h[L.page_indptr + i + 1] = num_pages_total;
  }
  return L.pages + num_pages_total;
}

Status CudaGraphRunner::Capture(int B) {
  const cudaStream_t stream = backend_->stream();
  // Padding-only inputs: no KV is written by the warm-up run.
  StepPlan empty;
  const int64_t count = Stage(empty, B);
  CUDA_CHECK(cudaMemcpyAsync(block_.data(), staging_->data(), static_cast<size_t>(count) * 4,
                             cudaMemcpyHostToDevice, stream));
  staged_->Record(stream);
  const ForwardInput in = InputsFor(B);
  const Tensor logits = logits_.Slice(0, B);
  RETURN_IF_ERROR(model_.Forward(in, kv_, logits));  // warm-up (plans, kernel attributes)
  backend_->Synchronize();

  auto g = std::make_unique<Graph>();
  g->tail = B == 1 && lookahead_max_rows_ >= 1 && in_graph_tail_;
  cuda::DeviceAllocator& alloc = backend_->allocator();
  alloc.BeginPrivatePool();
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  Status st = model_.Forward(in, kv_, logits);
  if (st.ok() && g->tail) {
    if (tail_fused_) {
      LaunchArgmaxAdvance(logits.Slice(0, 1));
    } else {
      backend_->ArgmaxRows(logits.Slice(0, 1), ids_.Slice(0, 1));
      LaunchAdvance(1);
    }
  }
  const cudaError_t end = cudaStreamEndCapture(stream, &g->graph);
  alloc.EndPrivatePool();
  RETURN_IF_ERROR(st);
  if (end != cudaSuccess) {
    return InternalError(std::string("CUDA graph capture of the decode step failed: ") +
                         cudaGetErrorString(end));
  }
  CUDA_CHECK(cudaGraphInstantiate(&g->exec, g->graph, 0));
  size_t num_nodes = 0;
  CUDA_CHECK(cudaGraphGetNodes(g->graph, nullptr, &num_nodes));
  LOG(INFO) << "captured decode CUDA graph for batch " << B << " (" << num_nodes
            << " nodes, graph pool " << alloc.pool_bytes() / (1 << 20) << " MiB)";
  graphs_[B] = std::move(g);
  return OkStatus();
}

StatusOr<bool> CudaGraphRunner::TryForward(const StepPlan& plan, Tensor* logits) {
  const bool had_lookahead = ahead_.pending;
  ahead_.pending = false;  // this plan takes the queued step, or nothing will
  const int n = static_cast<int>(plan.seqs.size());
  if (n == 0 || n > bmax_) return false;
  for (const ScheduledSeq& s : plan.seqs) {
    if (s.tokens.size() != 1 || s.num_logits > 1) return false;
    const int32_t pages = (s.start_pos + 1 + block_size_ - 1) / block_size_;
    if (pages > max_pages_ || static_cast<int32_t>(s.block_table.size()) < pages) return false;
  }
  const int B = *std::lower_bound(batch_sizes_.begin(), batch_sizes_.end(), n);
  if (had_lookahead && IsLookahead(plan, B)) {
    ++lookahead_hits_;  // already queued by ArgmaxAndLookahead: nothing to launch
  } else {
    if (graphs_.find(B) == graphs_.end()) RETURN_IF_ERROR(Capture(B));
    Launch(plan, B);
  }
  ++replays_;
  last_B_ = B;
  // Rows n..B-1 are padding. The caller's argmax / copies go on the same stream after the replay.
  *logits = logits_.Slice(0, n);
  return true;
}

void CudaGraphRunner::Launch(const StepPlan& plan, int B) {
  const cudaStream_t stream = backend_->stream();
  const int64_t count = Stage(plan, B);
  CUDA_CHECK(cudaMemcpyAsync(block_.data(), staging_->data(), static_cast<size_t>(count) * 4,
                             cudaMemcpyHostToDevice, stream));
  staged_->Record(stream);
  CUDA_CHECK(cudaGraphLaunch(graphs_[B]->exec, stream));
}

void CudaGraphRunner::LaunchAdvance(int n) {
  const Layout L(bmax_, max_pages_);
  int32_t* b = block_.data_as<int32_t>();
  const cuda::DecodeInputs in{b + L.tokens,      b + L.positions, b + L.kv_len,
                              b + L.page_indptr, b + L.pages,     b + L.slots};
  cuda::LaunchAdvanceDecodeInputs(ids_.data_as<const int32_t>(), n, in, block_size_,
                                  ids_host_device_, bmax_, backend_->stream(),
                                  backend_->tuning().cuda_pdl);
}

void CudaGraphRunner::LaunchArgmaxAdvance(const Tensor& logits) {
  const Layout L(bmax_, max_pages_);
  int32_t* b = block_.data_as<int32_t>();
  const cuda::DecodeInputs in{b + L.tokens,      b + L.positions, b + L.kv_len,
                              b + L.page_indptr, b + L.pages,     b + L.slots};
  const int64_t vocab = logits.cols();
  const size_t winners = cuda::ArgmaxScratchBytes(1, vocab, backend_->num_sms());
  auto* scratch = static_cast<int32_t*>(tail_scratch_.data());
  CHECK_LE(static_cast<int64_t>(winners / 4 + 1), tail_scratch_.numel()) << "tail scratch";
  cuda::LaunchArgmaxAdvance(logits.data(), logits.dtype(), vocab, backend_->num_sms(), scratch,
                            reinterpret_cast<unsigned*>(scratch + winners / 4),
                            ids_.data_as<int32_t>(), in, block_size_, ids_host_device_, bmax_,
                            backend_->stream(), backend_->tuning().cuda_pdl);
}

bool CudaGraphRunner::ArgmaxAndLookahead(const StepPlan& plan, std::span<int32_t> ids) {
  const int n = static_cast<int>(plan.seqs.size());
  if (n == 0 || n > bmax_ || ids.size() != static_cast<size_t>(n) ||
      graphs_.find(last_B_) == graphs_.end() || last_B_ < n) {
    return false;
  }
  const cudaStream_t stream = backend_->stream();
  // A graph with the tail already argmaxed this step and advanced its inputs (ids on the host).
  const bool tail = graphs_[last_B_]->tail && n == 1;
  if (!tail) backend_->ArgmaxRows(logits_.Slice(0, n), ids_.Slice(0, n));

  // The likely next step: every sequence one token further. Queued only when each one's next
  // position is in the last page this step already has (the input block's page lists stay as
  // they are; at a block boundary the scheduler allocates as it goes, so the engine must choose
  // first), fed with this step's ids straight from the device.
  bool ahead = n <= lookahead_max_rows_;
  for (const ScheduledSeq& s : plan.seqs) {
    ahead &= s.tokens.size() == 1 && !s.last_by_length && (s.start_pos + 1) % block_size_ != 0;
  }
  if (ahead) {
    // The replayed step's inputs (its rows n..B-1 are padding) advanced in place, and the ids
    // written to the host, by one kernel; then the same graph again.
    ahead_ = Lookahead{};
    ahead_.B = last_B_;
    for (const ScheduledSeq& s : plan.seqs) {
      const int32_t pos = s.start_pos + 1;
      ahead_.requests.push_back(s.request_id);
      ahead_.positions.push_back(pos);
      ahead_.pages.emplace_back(s.block_table.begin(),
                                s.block_table.begin() + pos / block_size_ + 1);
    }
    if (!tail) LaunchAdvance(n);
    ids_copied_->Record(stream);
    CUDA_CHECK(cudaGraphLaunch(graphs_[last_B_]->exec, stream));
    ++lookaheads_;
  } else if (tail) {
    ids_copied_->Record(stream);  // the graph's advance wrote the ids to the host
  } else {
    CUDA_CHECK(cudaMemcpyAsync(ids_host_->data(), ids_.data(), static_cast<size_t>(n) * 4,
                               cudaMemcpyDeviceToHost, stream));
    ids_copied_->Record(stream);
  }
  ids_copied_->Synchronize();
  const int32_t* host = static_cast<const int32_t*>(ids_host_->data());
  if (ahead || tail) {  // written by the advance, at the parity of each row's position
    for (int k = 0; k < n; ++k) ids[k] = host[(plan.seqs[k].start_pos & 1) * bmax_ + k];
  } else {
    std::memcpy(ids.data(), host, static_cast<size_t>(n) * 4);
  }
  if (ahead) {
    ahead_.tokens.assign(ids.begin(), ids.end());
    ahead_.pending = true;
  }
  return true;
}

bool CudaGraphRunner::IsLookahead(const StepPlan& plan, int B) const {
  if (B != ahead_.B || plan.seqs.size() != ahead_.requests.size()) return false;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& s = plan.seqs[i];
    const std::vector<BlockId>& pages = ahead_.pages[i];
    if (s.request_id != ahead_.requests[i] || s.tokens.size() != 1 ||
        s.tokens[0] != ahead_.tokens[i] || s.start_pos != ahead_.positions[i] ||
        s.block_table.size() < pages.size() ||
        !std::equal(pages.begin(), pages.end(), s.block_table.begin())) {
      return false;
    }
  }
  return true;
}

}  // namespace loom
