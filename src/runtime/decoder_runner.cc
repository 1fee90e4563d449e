#include "runtime/decoder_runner.h"

#include <algorithm>
#include <cstring>

#include "runtime/forward_batch.h"

namespace loom {
namespace {

// A device-sampled id as StepOutput::tokens holds it (Backend::ArgmaxRows codes -> kToken*).
int32_t TokenOfArgmax(int32_t t) {
  return t >= 0 ? t : t == Backend::kArgmaxNaN ? kTokenNaN : kTokenNone;
}

}  // namespace

DecoderRunner::DecoderRunner(std::unique_ptr<Model> model, int num_blocks, int block_size,
                             DType kv_dtype)
    : model_(std::move(model)), num_blocks_(num_blocks), block_size_(block_size) {
  CHECK_GT(num_blocks, 0);
  CHECK_GT(block_size, 0);
  kv_ = model_->AllocateKv(num_blocks, block_size, kv_dtype);
}

StatusOr<std::vector<float>> DecoderRunner::Execute(const StepPlan& plan) {
  size_t num_sampled = 0;
  for (const ScheduledSeq& s : plan.seqs) num_sampled += s.sample && !s.tokens.empty() ? 1 : 0;
  const std::vector<RowSpec> rows(num_sampled);  // every row kLogits
  ASSIGN_OR_RETURN(StepOutput out, ExecuteAndSample(plan, rows));
  return std::vector<float>(out.logits.begin(), out.logits.end());
}

StatusOr<StepOutput> DecoderRunner::ExecuteAndSample(const StepPlan& plan,
                                                     std::span<const RowSpec> rows) {
  ASSIGN_OR_RETURN(std::vector<SeqSlice> slices, PlanSlices(plan, num_blocks_, block_size_));
  std::vector<int32_t> seq_of_sampled;  // plan.seqs index of each sampled row
  for (size_t i = 0; i < slices.size(); ++i) {
    if (slices[i].sample && !slices[i].tokens.empty()) {
      seq_of_sampled.push_back(static_cast<int32_t>(i));
    }
  }
  if (rows.size() != seq_of_sampled.size()) {
    return InternalError("ExecuteAndSample: " + std::to_string(rows.size()) + " row modes for " +
                         std::to_string(seq_of_sampled.size()) + " sampled rows");
  }
  if (accelerator_ != nullptr && sink_ != nullptr) accelerator_->DropLookahead();
  if (accelerator_ != nullptr && sink_ == nullptr) {
    Tensor logits;
    ASSIGN_OR_RETURN(bool done, accelerator_->TryForward(plan, &logits));
    if (done && AllGreedyHere(rows) && rows.size() == plan.seqs.size()) {
      // Every sequence samples greedily (row i = plan.seqs[i]): the accelerator may queue the
      // next step while the ids come back.
      std::vector<int32_t> ids(rows.size());
      if (accelerator_->ArgmaxAndLookahead(plan, ids)) return GreedyOutput(ids);
    }
    if (done) return Emit(logits, seq_of_sampled, rows);  // row i of `logits` = plan.seqs[i]
  }
  HostForwardBatch hb = BuildHostForwardBatch(slices, block_size_);
  if (hb.token_ids.empty()) return StepOutput{};
  Backend* be = model_->backend();
  ForwardInput in = UploadForwardBatch(hb, block_size_, be);
  const int64_t num_rows = static_cast<int64_t>(hb.sample_rows.size());
  Tensor logits =
      be->AllocScratch(DType::kF32, Shape{std::max<int64_t>(num_rows, 1), vocab_size()});
  RETURN_IF_ERROR(model_->Forward(in, kv_, logits, sink_));
  std::vector<int32_t> logits_rows(static_cast<size_t>(num_rows));
  for (int32_t k = 0; k < static_cast<int32_t>(num_rows); ++k) logits_rows[k] = k;
  return Emit(logits, logits_rows, rows);
}

bool DecoderRunner::edits_rows_on_device() const {
  return device_sampling_ && model_->backend()->has_edit_logits();
}

bool DecoderRunner::logprobs_on_device() const {
  return edits_rows_on_device() && model_->backend()->has_logprob_rows();
}

bool DecoderRunner::AllGreedyHere(std::span<const RowSpec> rows) const {
  if (!device_sampling_ || !model_->backend()->has_argmax_rows() || rows.empty()) return false;
  return std::all_of(rows.begin(), rows.end(), [](const RowSpec& r) {
    return r.mode == RowSampling::kGreedy && r.edits.empty() && r.num_logprobs < 0;
  });
}

StepOutput DecoderRunner::GreedyOutput(std::span<const int32_t> ids) {
  StepOutput out;
  out.tokens.reserve(ids.size());
  for (int32_t t : ids) {
    out.tokens.push_back(TokenOfArgmax(t));
  }
  rows_sampled_on_device_ += static_cast<int64_t>(ids.size());
  return out;
}

StepOutput DecoderRunner::Emit(const Tensor& logits, const std::vector<int32_t>& logits_rows,
                               std::span<const RowSpec> rows) {
  Backend* be = model_->backend();
  const int64_t vocab = vocab_size();
  const size_t n = logits_rows.size();
  StepOutput out;
  out.tokens.assign(n, kTokenOnHost);
  if (n == 0) return out;

  // Rows sampled where the logits are: one i32 each comes back, all in one copy of
  //   ids = [ argmax of logits rows 0 .. argmax_rows | the draws, in plan order ].
  // (Rows come with logit edits only when edits_rows_on_device(): the backend applies them.)
  auto greedy_here = [&](size_t k) {
    return device_sampling_ && rows[k].mode == RowSampling::kGreedy && be->has_argmax_rows();
  };
  auto draw_here = [&](size_t k) {
    return device_sampling_ && rows[k].mode == RowSampling::kDraw && be->has_sample_rows(vocab);
  };
  int64_t argmax_rows = 0;  // rows [0, argmax_rows) of `logits` cover every greedy row
  std::vector<int32_t> draw_rows;
  std::vector<DrawParams> draws;
  for (size_t k = 0; k < n; ++k) {
    if (greedy_here(k)) argmax_rows = std::max<int64_t>(argmax_rows, logits_rows[k] + 1);
    if (draw_here(k)) {
      draw_rows.push_back(logits_rows[k]);
      draws.push_back(rows[k].draw);
    }
  }
  const int64_t num_draws = static_cast<int64_t>(draws.size());
  // The edits of the rows sampled here (bias, penalties, min_tokens masking), in one launch
  // before the argmax and the draws.
  std::vector<LogitEdit>& edits = edits_;
  edits.clear();
  for (size_t k = 0; k < n; ++k) {
    if (rows[k].edits.empty() || !(greedy_here(k) || draw_here(k))) continue;
    for (LogitEdit e : rows[k].edits) {
      e.row = logits_rows[k];
      edits.push_back(e);
    }
  }
  if (!edits.empty()) be->EditLogits(logits, edits);
  if (argmax_rows + num_draws > 0) {
    Tensor ids = be->Alloc(DType::kI32, Shape{argmax_rows + num_draws});
    if (argmax_rows > 0) be->ArgmaxRows(logits.Slice(0, argmax_rows), ids.Slice(0, argmax_rows));
    if (num_draws > 0) be->SampleRows(logits, draw_rows, draws, ids.Slice(argmax_rows, num_draws));
    // The logprobs of the rows that ask (after their edits, from the ids just taken): one
    // launch, ~40 floats a row back instead of the row.
    std::vector<Backend::LogprobRow> lp_rows;
    std::vector<size_t> lp_of;  // sampled row k of each lp_rows entry
    int top_k = 0;
    // The top logprobs row k returns: what it asked for, within the kernel's and the vocab's.
    auto wanted = [&](size_t k) {
      return std::min({rows[k].num_logprobs, Backend::kMaxTopLogprobs, static_cast<int>(vocab)});
    };
    int64_t next = argmax_rows;  // ids' index of the next draw
    for (size_t k = 0; k < n; ++k) {
      if (!greedy_here(k) && !draw_here(k)) continue;
      const int32_t id_index = greedy_here(k) ? logits_rows[k] : static_cast<int32_t>(next++);
      if (rows[k].num_logprobs < 0 || !be->has_logprob_rows()) continue;
      lp_rows.push_back({logits_rows[k], id_index});
      lp_of.push_back(k);
      top_k = std::max(top_k, wanted(k));
    }
    std::vector<float> host_lp;
    if (!lp_rows.empty()) {
      const auto m = static_cast<int64_t>(lp_rows.size());
      Tensor lp = be->Alloc(DType::kF32, Shape{m, Backend::kLogprobStride});
      be->LogprobRows(logits, lp_rows, ids, top_k, lp);
      host_lp.resize(static_cast<size_t>(m * Backend::kLogprobStride));
      be->CopyToHost(lp, host_lp.data());
    }
    std::vector<int32_t> host_ids(static_cast<size_t>(argmax_rows + num_draws));
    be->CopyToHost(ids, host_ids.data());
    if (!lp_rows.empty()) {
      out.logprobs.resize(n);
      for (size_t j = 0; j < lp_rows.size(); ++j) {
        const size_t k = lp_of[j];
        const float* v = host_lp.data() + j * Backend::kLogprobStride;
        RowLogprobs& r = out.logprobs[k];
        r.logprob = v[0];
        for (int i = 0; i < wanted(k); ++i) {
          r.top.emplace_back(static_cast<int32_t>(v[1 + 2 * i]), v[2 + 2 * i]);
        }
      }
    }
    int64_t next_draw = argmax_rows;
    for (size_t k = 0; k < n; ++k) {
      int32_t t;
      if (greedy_here(k)) {
        t = host_ids[static_cast<size_t>(logits_rows[k])];
      } else if (draw_here(k)) {
        t = host_ids[static_cast<size_t>(next_draw++)];
      } else {
        continue;
      }
      out.tokens[k] = TokenOfArgmax(t);
      ++rows_sampled_on_device_;
    }
  }

  // The other rows' logits in one transfer: straight from `logits` when they are consecutive
  // rows of it (always, unless greedy and host rows alternate), else gathered on the device.
  std::vector<int32_t> host_rows;
  for (size_t k = 0; k < n; ++k) {
    if (out.tokens[k] == kTokenOnHost) host_rows.push_back(logits_rows[k]);
  }
  if (host_rows.empty()) return out;
  const int64_t h = static_cast<int64_t>(host_rows.size());
  float* dst = Staging(static_cast<size_t>(h * vocab));
  bool consecutive = true;
  for (int64_t j = 0; j < h; ++j) consecutive &= host_rows[j] == host_rows[0] + j;
  if (consecutive) {
    be->CopyToHost(logits.Slice(host_rows[0], h), dst);
  } else {
    Tensor idx = HostTensor(DType::kI32, Shape{h});
    std::memcpy(idx.data(), host_rows.data(), host_rows.size() * sizeof(int32_t));
    Tensor packed = be->AllocScratch(DType::kF32, Shape{h, vocab});
    be->GatherRows(logits, be->Upload(idx), packed);
    be->CopyToHost(packed, dst);
  }
  out.logits = std::span<float>(dst, static_cast<size_t>(h * vocab));
  return out;
}

float* DecoderRunner::Staging(size_t floats) {
  const size_t bytes = floats * sizeof(float);
  if (staging_ == nullptr || staging_->size_bytes() < bytes) {
    staging_.reset();  // free the old one first: page-locked memory is precious
    staging_ = model_->backend()->AllocHostStaging(bytes);
  }
  return static_cast<float*>(staging_->data());
}

}  // namespace loom
