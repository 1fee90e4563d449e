#include "sample/step_sampler.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace loom {
namespace {

// A token id chosen on the device (Backend::ArgmaxRows codes) as a row's result.
StatusOr<SampleResult> DeviceResult(int32_t t, int vocab_size) {
  CHECK(t < vocab_size && (t >= 0 || t == Backend::kArgmaxNaN || t == Backend::kArgmaxNone))
      << "the backend returned token " << t;
  if (t == Backend::kArgmaxNaN) return InvalidArgumentError("the model produced NaN logits");
  if (t == Backend::kArgmaxNone) {
    return InvalidArgumentError("no token left to sample: every token is masked");
  }
  SampleResult r;
  r.token = t;
  return r;
}

}  // namespace

StepSampler::StepSampler(const StepSamplerConfig& config) : config_(config) {
  CHECK_GT(config_.vocab_size, 0);
  CHECK_GE(config_.num_threads, 1);
  samplers_.reserve(static_cast<size_t>(config_.num_threads));
  for (int i = 0; i < config_.num_threads; ++i) samplers_.emplace_back(config_.vocab_size);
  if (config_.num_threads > 1) pool_ = std::make_unique<ThreadPool>(config_.num_threads - 1);
}

StepSampler::~StepSampler() = default;

StepSampler::RowPlan StepSampler::Plan(const StepRow& row, const DeviceOps& ops) {
  const SamplingParams& p = *row.ctx.params;
  const int num_output = static_cast<int>(row.ctx.output.size());
  // step: SampleRow's counter, the request's output tokens so far.
  const DrawParams draw{p.temperature, p.top_k,      p.top_p,
                        p.min_p,       row.ctx.seed, static_cast<uint64_t>(num_output)};
  RowPlan plan;
  if (row.ctx.forced >= 0) {
    CHECK_LT(row.ctx.forced, config_.vocab_size) << "forced token out of the vocabulary";
    // Logprobs of a forced token are those of its row: the host Sampler takes them.
    if (p.num_logprobs < 0) plan.where = Where::kForced;
    return plan;
  }
  if (!row.ctx.allowed.empty()) {
    // Logprobs are of the unmasked row: the host Sampler takes them before it masks.
    if (!ops.masks || p.num_logprobs >= 0) return plan;
    plan.masked = true;
  }
  if (IsPlainGreedy(p, num_output)) {
    if (ops.argmax) plan.where = Where::kDeviceGreedy;
    return plan;
  }
  if (IsPlainDraw(p, num_output)) {
    if (ops.draw) plan.where = Where::kDeviceDraw;
    plan.draw = draw;
    return plan;
  }
  const bool greedy = p.greedy();
  if (!ops.edits || !row.last_of_seq || !(greedy ? ops.argmax : ops.draw)) return plan;
  if (!(IsEditableGreedy(p) || IsEditableDraw(p) ||
        (ops.logprobs && LogprobsOnEditedRow(p, num_output)))) {
    return plan;
  }
  // logit_bias, penalties or min_tokens masking: edited where the logits are, then sampled there
  // (and its logprobs taken there, after the edits). A row whose edits outgrow a slice of its
  // logits (the repetition penalty over a long prompt of many distinct ids) is cheaper on the
  // host: the edit list is built on this thread and uploaded, the host rows are sampled by the
  // sampling pool.
  LogitEditCache& cache = edit_caches_[row.request];
  const size_t max_edits = std::max<size_t>(1024, static_cast<size_t>(config_.vocab_size) / 32);
  if (!cache.Build(row.ctx, config_.vocab_size) || cache.edits().size() > max_edits) return plan;
  plan.where = greedy ? Where::kDeviceGreedy : Where::kDeviceDraw;
  plan.draw = draw;
  plan.edits = cache.edits();
  plan.num_logprobs = ops.logprobs ? p.num_logprobs : -1;
  return plan;
}

std::vector<StatusOr<SampleResult>> StepSampler::Sample(const StepPlan& plan,
                                                        std::span<const StepRow> rows,
                                                        StepLogits& logits, ModelRunner& runner) {
  CHECK_EQ(rows.size(), logits.rows.size()) << "one StepRow per logits row";
  std::vector<StatusOr<SampleResult>> results(rows.size(), SampleResult{});
  if (rows.empty()) return results;
  Backend* be = logits.backend;
  CHECK(be != nullptr) << "logits without a backend";
  DeviceOps ops;
  if (config_.device_sampling) {
    ops.argmax = be->has_argmax_rows();
    ops.draw = be->has_sample_rows(config_.vocab_size);
    ops.edits = be->has_edit_logits();
    ops.logprobs = ops.edits && be->has_logprob_rows();
    ops.masks = be->has_mask_logits();
  }
  std::vector<RowPlan> plans(rows.size());
  bool all_plain_greedy = rows.size() == plan.seqs.size();
  for (size_t k = 0; k < rows.size(); ++k) {
    plans[k] = Plan(rows[k], ops);
    all_plain_greedy &= plans[k].where == Where::kDeviceGreedy && plans[k].edits.empty() &&
                        !plans[k].masked && plans[k].num_logprobs < 0;
  }
  if (all_plain_greedy) {  // one row per sequence, every one the plain argmax
    std::vector<int32_t> ids(rows.size());
    if (runner.GreedyIds(plan, ids)) {
      for (size_t k = 0; k < rows.size(); ++k)
        results[k] = DeviceResult(ids[k], config_.vocab_size);
      stats_.rows_on_device += static_cast<int64_t>(rows.size());
      return results;
    }
  }
  for (size_t k = 0; k < rows.size(); ++k) {
    if (plans[k].where == Where::kForced) results[k] = SampleResult{rows[k].ctx.forced, 0.0f, {}};
  }
  SampleOnDevice(logits, rows, plans, results);
  SampleOnHost(logits, rows, plans, results);
  return results;
}

void StepSampler::SampleOnDevice(StepLogits& logits, std::span<const StepRow> rows,
                                 std::span<const RowPlan> plans,
                                 std::vector<StatusOr<SampleResult>>& results) {
  Backend* be = logits.backend;
  const std::vector<int32_t>& lrows = logits.rows;
  const size_t n = plans.size();
  // One i32 per row sampled here comes back, all in one copy of
  //   ids = [ argmax of logits rows 0 .. argmax_rows | the draws, in plan order ].
  int64_t argmax_rows = 0;  // rows [0, argmax_rows) of the logits cover every greedy row
  std::vector<int32_t> draw_rows;
  std::vector<DrawParams> draws;
  edits_.clear();
  mask_rows_.clear();
  masks_.clear();
  for (size_t k = 0; k < n; ++k) {
    if (plans[k].where == Where::kHost || plans[k].where == Where::kForced) continue;
    if (plans[k].masked) {
      mask_rows_.push_back(lrows[k]);
      masks_.push_back(rows[k].ctx.allowed);
    }
    if (plans[k].where == Where::kDeviceGreedy) {
      argmax_rows = std::max<int64_t>(argmax_rows, lrows[k] + 1);
    } else {
      draw_rows.push_back(lrows[k]);
      draws.push_back(plans[k].draw);
    }
    for (LogitEdit e : plans[k].edits) {
      e.row = lrows[k];
      edits_.push_back(e);
    }
  }
  const int64_t num_draws = static_cast<int64_t>(draws.size());
  if (argmax_rows + num_draws == 0) return;
  // The edits of the rows sampled here (bias, penalties, min_tokens masking), then their grammar
  // masks, one launch each, before the argmax and the draws.
  const Tensor& x = logits.logits;
  if (!edits_.empty()) be->EditLogits(x, edits_);
  if (!mask_rows_.empty()) {
    be->MaskLogits(x, mask_rows_, masks_);
    stats_.masked_rows_on_device += static_cast<int64_t>(mask_rows_.size());
  }
  Tensor ids = be->Alloc(DType::kI32, Shape{argmax_rows + num_draws});
  if (argmax_rows > 0) be->ArgmaxRows(x.Slice(0, argmax_rows), ids.Slice(0, argmax_rows));
  if (num_draws > 0) be->SampleRows(x, draw_rows, draws, ids.Slice(argmax_rows, num_draws));
  // The index in `ids` of each device row's token.
  std::vector<int64_t> id_index(n, -1);
  int64_t next_draw = argmax_rows;
  for (size_t k = 0; k < n; ++k) {
    if (plans[k].where == Where::kDeviceGreedy) id_index[k] = lrows[k];
    if (plans[k].where == Where::kDeviceDraw) id_index[k] = next_draw++;
  }
  // The logprobs of the rows that ask (after their edits, from the ids just taken): one launch,
  // ~40 floats a row back instead of the row.
  std::vector<Backend::LogprobRow> lp_rows;
  std::vector<size_t> lp_of;  // the row of each lp_rows entry
  int top_k = 0;
  // The top logprobs row k returns: what it asked for, within the kernel's and the vocab's.
  auto wanted = [&](size_t k) {
    return std::min({plans[k].num_logprobs, Backend::kMaxTopLogprobs, config_.vocab_size});
  };
  for (size_t k = 0; k < n; ++k) {
    if (id_index[k] < 0 || plans[k].num_logprobs < 0) continue;
    lp_rows.push_back({lrows[k], static_cast<int32_t>(id_index[k])});
    lp_of.push_back(k);
    top_k = std::max(top_k, wanted(k));
  }
  std::vector<float> host_lp;
  if (!lp_rows.empty()) {
    const auto m = static_cast<int64_t>(lp_rows.size());
    Tensor lp = be->Alloc(DType::kF32, Shape{m, Backend::kLogprobStride});
    be->LogprobRows(x, lp_rows, ids, top_k, lp);
    host_lp.resize(static_cast<size_t>(m * Backend::kLogprobStride));
    be->CopyToHost(lp, host_lp.data());
  }
  std::vector<int32_t> host_ids(static_cast<size_t>(argmax_rows + num_draws));
  be->CopyToHost(ids, host_ids.data());
  for (size_t k = 0; k < n; ++k) {
    if (id_index[k] < 0) continue;
    results[k] = DeviceResult(host_ids[static_cast<size_t>(id_index[k])], config_.vocab_size);
    ++stats_.rows_on_device;
  }
  for (size_t j = 0; j < lp_rows.size(); ++j) {
    const size_t k = lp_of[j];
    if (!results[k].ok()) continue;
    const float* v = host_lp.data() + j * Backend::kLogprobStride;
    results[k]->logprob = v[0];
    for (int i = 0; i < wanted(k); ++i) {
      results[k]->top_logprobs.push_back({static_cast<TokenId>(v[1 + 2 * i]), v[2 + 2 * i]});
    }
  }
}

void StepSampler::SampleOnHost(StepLogits& logits, std::span<const StepRow> rows,
                               std::span<const RowPlan> plans,
                               std::vector<StatusOr<SampleResult>>& results) {
  const size_t vocab = static_cast<size_t>(config_.vocab_size);
  std::vector<size_t> host;  // the logits rows sampled here
  for (size_t k = 0; k < plans.size(); ++k) {
    if (plans[k].where == Where::kHost) host.push_back(k);
  }
  if (host.empty()) return;
  Backend* be = logits.backend;
  const Tensor& x = logits.logits;
  const std::vector<int32_t>& lrows = logits.rows;
  // Where row j of `host` is on the host: in place for host memory (the sampler's scratch may
  // overwrite it: the logits are the sampler's until the next step), else one transfer into
  // staging, straight from the logits when the rows are consecutive there (always, unless device
  // and host rows alternate), else gathered on the device first.
  std::vector<std::span<float>> spans(host.size());
  if (x.device() == Device::kCpu) {
    for (size_t j = 0; j < host.size(); ++j) {
      spans[j] =
          std::span<float>(x.data_as<float>() + static_cast<size_t>(lrows[host[j]]) * vocab, vocab);
    }
  } else {
    const int64_t h = static_cast<int64_t>(host.size());
    float* dst = Staging(be, host.size() * vocab);
    bool consecutive = true;
    for (int64_t j = 0; j < h; ++j) consecutive &= lrows[host[j]] == lrows[host[0]] + j;
    if (consecutive) {
      be->CopyToHost(x.Slice(lrows[host[0]], h), dst);
    } else {
      Tensor idx = HostTensor(DType::kI32, Shape{h});
      for (int64_t j = 0; j < h; ++j) idx.data_as<int32_t>()[j] = lrows[host[j]];
      Tensor packed = be->AllocScratch(DType::kF32, Shape{h, config_.vocab_size});
      be->GatherRows(x, be->Upload(idx), packed);
      be->CopyToHost(packed, dst);
    }
    for (size_t j = 0; j < host.size(); ++j) spans[j] = std::span<float>(dst + j * vocab, vocab);
  }
  std::vector<HostRow> host_rows(host.size());
  int64_t work_logits = 0;  // what the host rows cost, in logits of a sampled row
  for (size_t j = 0; j < host.size(); ++j) {
    const StepRow& r = rows[host[j]];
    host_rows[j] = HostRow{host[j], &r.ctx, spans[j]};
    // A greedy row without logprobs is one argmax pass, several times cheaper than a draw.
    const bool argmax_only = r.ctx.params->greedy() && r.ctx.params->num_logprobs < 0;
    work_logits += argmax_only ? config_.vocab_size / 8 : config_.vocab_size;
  }
  SampleHostRows(host_rows, work_logits, results);
  stats_.rows_on_host += static_cast<int64_t>(host.size());
}

size_t StepSampler::NumSamplingWorkers(size_t num_rows, int64_t work_logits) const {
  const auto by_work = static_cast<size_t>(work_logits / kMinSampleLogitsPerWorker);
  return std::max<size_t>(1, std::min({samplers_.size(), num_rows, by_work}));
}

void StepSampler::SampleHostRows(std::span<const HostRow> rows, int64_t work_logits,
                                 std::vector<StatusOr<SampleResult>>& results) {
  auto sample = [&](size_t i, size_t worker) {
    const HostRow& h = rows[i];
    results[h.row_idx] = samplers_[worker].sampler.SampleRow(h.logits, *h.ctx);
  };
  const size_t num_workers = NumSamplingWorkers(rows.size(), work_logits);
  if (num_workers <= 1) {
    for (size_t i = 0; i < rows.size(); ++i) sample(i, 0);
    return;
  }
  ++stats_.parallel_sample_steps;
  pool_->ParallelFor(rows.size(), num_workers, sample);
}

float* StepSampler::Staging(Backend* backend, size_t floats) {
  const size_t bytes = floats * sizeof(float);
  if (staging_ == nullptr || staging_->size_bytes() < bytes) {
    staging_.reset();  // free the old one first: page-locked memory is precious
    staging_ = backend->AllocHostStaging(bytes);
  }
  return static_cast<float*>(staging_->data());
}

}  // namespace loom
