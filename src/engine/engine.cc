#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <utility>

#include "base/check.h"
#include "base/env.h"
#include "base/logging.h"
#include "kv/block_hash.h"

namespace loom {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool Contains(const std::vector<TokenId>& ids, TokenId id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config,
                                                 std::unique_ptr<ModelRunner> runner) {
  RETURN_IF_ERROR(config.Validate());
  if (runner == nullptr) return InvalidArgumentError("Engine::Create needs a ModelRunner");
  if (runner->vocab_size() < 1) return InvalidArgumentError("the model has an empty vocabulary");
  EngineConfig cfg = config;
  if (cfg.max_model_len == 0) cfg.max_model_len = runner->max_model_len();
  if (cfg.max_model_len > runner->max_model_len()) {
    return InvalidArgumentError("max_model_len " + std::to_string(cfg.max_model_len) +
                                " exceeds the model's context length " +
                                std::to_string(runner->max_model_len()));
  }
  for (TokenId id : cfg.eos_token_ids) {
    if (id >= runner->vocab_size()) {
      return InvalidArgumentError("eos token id " + std::to_string(id) +
                                  " is out of the vocabulary [0, " +
                                  std::to_string(runner->vocab_size()) + ")");
    }
  }
  return std::unique_ptr<Engine>(new Engine(cfg, std::move(runner)));
}

Engine::Engine(const EngineConfig& config, std::unique_ptr<ModelRunner> runner)
    : config_(config), vocab_size_(runner->vocab_size()), runner_(std::move(runner)) {
  samplers_.reserve(static_cast<size_t>(config_.num_sampling_threads));
  for (int i = 0; i < config_.num_sampling_threads; ++i) samplers_.emplace_back(vocab_size_);
  if (config_.num_sampling_threads > 1) {
    sample_pool_ = std::make_unique<ThreadPool>(config_.num_sampling_threads - 1);
  }
  KvCacheConfig kv_cfg;
  kv_cfg.num_blocks = config_.num_blocks;
  kv_cfg.block_size = config_.block_size;
  kv_cfg.enable_prefix_cache = config_.enable_prefix_cache;
  kv_cfg.root_hash =
      RootBlockHash(config_.model_fingerprint, config_.kv_dtype, config_.tokenizer_hash);
  kv_ = std::make_unique<KvCacheManager>(kv_cfg);

  SchedulerConfig s;
  s.max_batched_tokens = config_.max_batched_tokens;
  s.max_num_seqs = config_.max_num_seqs;
  s.max_model_len = config_.max_model_len;
  s.bytes_per_token_kv = config_.bytes_per_token_kv;
  s.kv_budget_bytes = config_.kv_budget_bytes;
  s.memory_budget_bytes = config_.memory_budget_bytes;
  s.model_bytes = config_.model_bytes;
  scheduler_ = std::make_unique<Scheduler>(s, kv_.get());

  seed_base_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  PublishStats();
}

Engine::~Engine() { Shutdown(); }

void Engine::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  CHECK(!thread_.joinable()) << "Engine::Start called twice";
  CHECK(!shut_down_) << "Engine::Start after Shutdown";
  thread_ = std::thread([this] { Loop(); });
}

void Engine::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The loop is gone: this thread owns the engine state now.
  DrainInbox();
  std::vector<RequestId> ids;
  for (const auto& [id, live] : live_) ids.push_back(id);
  for (RequestId id : ids) FinishRequest(id, FinishReason::kAbort);
  PublishStats();
}

StatusOr<RequestHandle> Engine::Submit(Request request) {
  RETURN_IF_ERROR(request.params.Validate(vocab_size_));
  if (request.prompt.empty()) return InvalidArgumentError("the prompt is empty (0 tokens)");
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    const TokenId t = request.prompt[i];
    if (t < 0 || t >= vocab_size_) {
      return InvalidArgumentError("prompt token id " + std::to_string(t) + " at position " +
                                  std::to_string(i) + " is out of the vocabulary [0, " +
                                  std::to_string(vocab_size_) + ")");
    }
  }
  // Reads only immutable limits: safe from any thread.
  RETURN_IF_ERROR(scheduler_->CheckAdmission(static_cast<int>(request.prompt.size()),
                                             request.params.max_tokens));
  RequestHandle handle;
  handle.id = RequestId{next_id_.fetch_add(1)};
  handle.stream = std::make_shared<OutputStream>(static_cast<int>(request.prompt.size()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return FailedPreconditionError("the engine is shut down");
    inbox_.push_back(Submission{handle.id, std::move(request), handle.stream});
    ++submitted_;
  }
  cv_.notify_all();
  return handle;
}

void Engine::Abort(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(id);
  }
  cv_.notify_all();
}

void Engine::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] {
        return stop_ || !inbox_.empty() || !aborts_.empty() || scheduler_->HasWork();
      });
      if (stop_) return;
    }
    Step();
    if (CheckIfIdle()) PublishStats();
  }
}

bool Engine::CheckIfIdle() {
  if (idle_checked_ || scheduler_->HasWork()) return false;
  scheduler_->CheckIntegrity();
  idle_checked_ = true;
  ++idle_checks_;
  return true;
}

void Engine::DrainInbox() {
  std::vector<Submission> subs;
  std::vector<RequestId> aborts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    subs.swap(inbox_);
    aborts.swap(aborts_);
  }
  for (Submission& sub : subs) {
    const SamplingParams& params = sub.request.params;
    Status added = scheduler_->AddRequest(sub.id, std::move(sub.request.prompt), params.max_tokens,
                                          sub.request.cache_extra_keys);
    if (!added.ok()) {  // Submit checked the same limits; kept for robustness
      sub.stream->Finish(FinishReason::kError, added);
      ++finished_;
      continue;
    }
    Live live;
    live.stream = std::move(sub.stream);
    live.params = std::move(sub.request.params);
    live.seed = live.params.seed.value_or(Mix(seed_base_ ^ Mix(sub.id.value)));
    live_.emplace(sub.id, std::move(live));
  }
  for (RequestId id : aborts) FinishRequest(id, FinishReason::kAbort);
}

void Engine::FinishRequest(RequestId id, FinishReason reason, Status error,
                           std::optional<TokenId> stop_token) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  scheduler_->Finish(id);
  it->second.stream->Finish(reason, std::move(error), stop_token);
  live_.erase(it);
  ++finished_;
}

bool Engine::Step() {
  DrainInbox();
  if (!scheduler_->HasWork()) {
    CheckIfIdle();
    PublishStats();
    return false;
  }
  idle_checked_ = false;

  StepPlan plan = scheduler_->Schedule();
  CHECK(!plan.empty()) << "requests are queued but none can run: admission let in a request "
                          "that can never fit";
  for (const ScheduledSeq& seq : plan.seqs) {
    Live& live = live_.at(seq.request_id);
    if (!live.cached_reported) {
      live.stream->SetCachedTokens(scheduler_->Find(seq.request_id)->num_cached_tokens);
      live.cached_reported = true;
    }
  }

  // Plain greedy rows need only their argmax and plain draws only their token: a device runner
  // returns those as token ids and copies only the other rows' logits (IsPlainGreedy and
  // IsPlainDraw say when that equals SampleRow's choice).
  std::vector<RowSpec> modes;
  modes.reserve(static_cast<size_t>(plan.num_sampled));
  const bool edits_on_device = runner_->edits_rows_on_device();
  const bool logprobs_on_device = edits_on_device && runner_->logprobs_on_device();
  for (const ScheduledSeq& seq : plan.seqs) {
    if (!seq.sample) continue;
    const SchedRequest* req = scheduler_->Find(seq.request_id);
    const int num_output = req->num_output_tokens();
    Live& live = live_.at(seq.request_id);
    const SamplingParams& p = live.params;
    RowSpec& r = modes.emplace_back();
    // step: SampleRow's counter, the request's output tokens so far.
    const DrawParams draw{p.temperature, p.top_k,   p.top_p,
                          p.min_p,       live.seed, static_cast<uint64_t>(num_output)};
    if (IsPlainGreedy(p, num_output)) {
      r.mode = RowSampling::kGreedy;
    } else if (IsPlainDraw(p, num_output)) {
      r.mode = RowSampling::kDraw;
      r.draw = draw;
    } else if (edits_on_device && (IsEditableGreedy(p) || IsEditableDraw(p) ||
                                   (logprobs_on_device && LogprobsOnEditedRow(p, num_output)))) {
      // logit_bias, penalties or min_tokens masking: edited on the device, then sampled there
      // (and its logprobs taken there, after the edits).
      const std::span<const TokenId> tokens = req->tokens;
      const SampleContext ctx{&p, tokens.first(req->num_prompt_tokens),
                              tokens.subspan(req->num_prompt_tokens), live.seed,
                              config_.eos_token_ids};
      // A row whose edits outgrow a slice of its logits (the repetition penalty over a long
      // prompt of many distinct ids) is cheaper on the host: the edit list is built on this
      // thread and uploaded, the host rows are sampled by the sampling pool.
      const size_t max_edits = std::max<size_t>(1024, static_cast<size_t>(vocab_size_) / 32);
      if (live.edit_cache.Build(ctx, vocab_size_) && live.edit_cache.edits().size() <= max_edits) {
        r.edits = live.edit_cache.edits();
        r.mode = p.greedy() ? RowSampling::kGreedy : RowSampling::kDraw;
        if (r.mode == RowSampling::kDraw) r.draw = draw;
        r.num_logprobs = p.num_logprobs;
      }
    }
  }
  // LOOM_STEP_TRACE=1: one stderr line per step with the host's view of it (diagnostic: how long
  // ExecuteAndSample took, and the time since the previous step's start — what exceeds the
  // former is the engine's own work).
  static const bool step_trace = EnvInt("LOOM_STEP_TRACE", 0) != 0;
  const auto exec_start =
      step_trace ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  StatusOr<StepOutput> executed = runner_->ExecuteAndSample(plan, modes);
  if (step_trace) {
    const auto us = [](auto a, auto b) {
      return static_cast<long long>(
          std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
    };
    int64_t tokens = 0;
    for (const ScheduledSeq& seq : plan.seqs) tokens += static_cast<int64_t>(seq.tokens.size());
    std::fprintf(stderr, "step %llu seqs %zu tokens %lld pos %d exec_us %lld since_prev_us %lld\n",
                 static_cast<unsigned long long>(steps_), plan.seqs.size(),
                 static_cast<long long>(tokens), plan.seqs.empty() ? -1 : plan.seqs[0].start_pos,
                 us(exec_start, std::chrono::steady_clock::now()),
                 steps_ == 0 ? 0 : us(prev_exec_start_, exec_start));
  }
  prev_exec_start_ = exec_start;
  ++steps_;
  if (!executed.ok()) {
    LOG(ERROR) << "model step failed: " << executed.status().ToString();
    for (const ScheduledSeq& seq : plan.seqs) {
      FinishRequest(seq.request_id, FinishReason::kError,
                    executed.status().WithContext("model step failed"));
    }
    PublishStats();
    return true;
  }
  CHECK_EQ(executed->tokens.size(), static_cast<size_t>(plan.num_sampled))
      << "the runner returned a wrong number of rows";
  const size_t num_host_rows = static_cast<size_t>(
      std::count(executed->tokens.begin(), executed->tokens.end(), kTokenOnHost));
  CHECK_EQ(executed->logits.size(), num_host_rows * vocab_size_)
      << "the runner returned a wrong number of logits";
  CHECK(executed->logprobs.empty() ||
        executed->logprobs.size() == static_cast<size_t>(plan.num_sampled))
      << "the runner returned a wrong number of logprob rows";
  computed_tokens_ += plan.num_tokens;

  // Sample every row; a row's failure belongs to its request only. Host rows go to the sampling
  // workers first (SampleHostRows), then every row is read back in plan order.
  std::vector<StatusOr<SampleResult>> row_results(plan.num_sampled, SampleResult{});
  std::vector<HostRow> host_rows;
  host_rows.reserve(num_host_rows);
  int64_t host_work_logits = 0;  // what the host rows cost, in logits of a sampled row
  int row = 0;
  for (const ScheduledSeq& seq : plan.seqs) {
    if (!seq.sample) continue;
    const int32_t t = executed->tokens[row];
    if (t == kTokenOnHost) {
      const SchedRequest* req = scheduler_->Find(seq.request_id);
      const Live& live = live_.at(seq.request_id);
      std::span<const TokenId> tokens = req->tokens;
      HostRow& h = host_rows.emplace_back();
      h.row_idx = row;
      h.ctx.params = &live.params;
      h.ctx.prompt = tokens.first(req->num_prompt_tokens);
      h.ctx.output = tokens.subspan(req->num_prompt_tokens);
      h.ctx.seed = live.seed;
      h.ctx.eos_token_ids = config_.eos_token_ids;
      h.logits = executed->logits.subspan((host_rows.size() - 1) * vocab_size_, vocab_size_);
      // A greedy row without logprobs is one argmax pass, several times cheaper than a draw.
      const bool argmax_only = live.params.greedy() && live.params.num_logprobs < 0;
      host_work_logits += argmax_only ? vocab_size_ / 8 : vocab_size_;
    } else {  // sampled by the runner: SampleRow's choice, or its error for the row
      CHECK(modes[row].mode != RowSampling::kLogits && t < vocab_size_ &&
            (t >= 0 || t == kTokenNaN || t == kTokenNone))
          << "the runner returned token " << t << " for row " << row;
      if (t == kTokenNaN) {
        row_results[row] = InvalidArgumentError("the model produced NaN logits");
      } else if (t == kTokenNone) {
        row_results[row] = InvalidArgumentError("no token left to sample: every token is masked");
      } else {
        row_results[row]->token = t;
        if (modes[row].num_logprobs >= 0) {
          CHECK(!executed->logprobs.empty()) << "the runner returned no logprobs for row " << row;
          const RowLogprobs& lp = executed->logprobs[static_cast<size_t>(row)];
          row_results[row]->logprob = lp.logprob;
          for (const auto& [id, logprob] : lp.top) {
            row_results[row]->top_logprobs.push_back({id, logprob});
          }
        }
      }
    }
    ++row;
  }
  SampleHostRows(host_rows, host_work_logits, row_results);

  std::vector<TokenId> sampled(plan.num_sampled, 0);
  std::vector<std::optional<SampleResult>> results(plan.num_sampled);
  std::vector<std::pair<RequestId, Status>> failed;
  row = 0;
  for (const ScheduledSeq& seq : plan.seqs) {
    if (!seq.sample) continue;
    StatusOr<SampleResult>& r = row_results[row];
    if (r.ok()) {
      sampled[row] = r->token;
      results[row] = std::move(r).value();
    } else {
      failed.emplace_back(seq.request_id, r.status().WithContext("sampling failed"));
    }
    ++row;
  }
  for (auto& [id, status] : failed) FinishRequest(id, FinishReason::kError, status);
  scheduler_->Update(plan, sampled);

  // Emit and check the stop conditions.
  row = 0;
  for (const ScheduledSeq& seq : plan.seqs) {
    if (!seq.sample) continue;
    const int k = row++;
    if (!results[k].has_value()) continue;
    const RequestId id = seq.request_id;
    Live& live = live_.at(id);
    const SamplingParams& p = live.params;
    const TokenId t = results[k]->token;
    if ((!p.ignore_eos && Contains(config_.eos_token_ids, t)) || Contains(p.stop_token_ids, t)) {
      FinishRequest(id, FinishReason::kStop, OkStatus(), t);
      continue;
    }
    TokenOutput out;
    out.token = t;
    out.logprob = results[k]->logprob;
    out.top_logprobs = std::move(results[k]->top_logprobs);
    live.stream->Push(std::move(out));
    ++generated_tokens_;
    const SchedRequest* req = scheduler_->Find(id);
    if (req->num_output_tokens() >= p.max_tokens || req->num_tokens() >= config_.max_model_len) {
      FinishRequest(id, FinishReason::kLength);
    }
  }
  if (config_.check_integrity_every_step) scheduler_->CheckIntegrity();
  // Just became idle: the idle integrity check (CheckIfIdle) comes after this step, once its
  // outputs are out — it walks the whole block pool, 6 ms for the H200's 248k blocks, which
  // here would hold up the finishing request's last outputs for a caller driving Step().
  PublishStats();
  return true;
}

size_t Engine::NumSamplingWorkers(size_t num_rows, int64_t work_logits) const {
  const auto by_work = static_cast<size_t>(work_logits / kMinSampleLogitsPerWorker);
  return std::max<size_t>(1, std::min({samplers_.size(), num_rows, by_work}));
}

void Engine::SampleHostRows(std::span<const HostRow> rows, int64_t work_logits,
                            std::vector<StatusOr<SampleResult>>& results) {
  // Each row reads only its own logits and request state and draws from its own counter-based
  // RNG (seed, output index); a worker's Sampler holds only scratch. So which worker samples a
  // row, and in what order, cannot change its result.
  auto sample = [&](size_t i, size_t worker) {
    const HostRow& h = rows[i];
    results[h.row_idx] = samplers_[worker].sampler.SampleRow(h.logits, h.ctx);
  };
  const size_t num_workers = NumSamplingWorkers(rows.size(), work_logits);
  if (num_workers <= 1) {
    for (size_t i = 0; i < rows.size(); ++i) sample(i, 0);
    return;
  }
  ++parallel_sample_steps_;
  sample_pool_->ParallelFor(rows.size(), num_workers, sample);
}

void Engine::PublishStats() {
  const KvCacheStats kv = kv_->stats();
  EngineStats s;
  s.active_rows = scheduler_->num_running();
  s.pending_rows = scheduler_->num_waiting();
  s.finished_rows = finished_;
  s.kv_blocks_total = kv.num_blocks;
  s.kv_blocks_used = kv.num_used_blocks;
  s.kv_blocks_cached = kv.num_cached_blocks;
  s.kv_blocks_free = kv.num_free_blocks;
  s.kv_bytes =
      static_cast<int64_t>(kv.num_used_blocks) * config_.block_size * config_.bytes_per_token_kv;
  s.kv_projected_bytes = scheduler_->running_projected_kv_bytes();
  s.kv_budget_bytes = config_.kv_budget_bytes;
  s.prefix_cache_hits = kv.prefix_hits;
  s.prefix_cache_misses = kv.prefix_queries - kv.prefix_hits;
  s.prefix_cache_hit_tokens = kv.prefix_hit_tokens;
  s.prefix_cache_query_tokens = kv.prefix_query_tokens;
  s.prefix_cache_evictions = kv.evictions;
  s.preemptions = scheduler_->num_preemptions();
  s.steps = steps_;
  s.computed_tokens = computed_tokens_;
  s.generated_tokens = generated_tokens_;
  s.parallel_sample_steps = parallel_sample_steps_;
  s.idle_checks = idle_checks_;
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_ = s;
}

EngineStats Engine::stats() const {
  EngineStats s;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    s = stats_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  s.pending_rows += static_cast<int>(inbox_.size());
  s.submitted_rows = submitted_;
  return s;
}

}  // namespace loom
