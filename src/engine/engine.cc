#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>

#include "base/check.h"
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

// The hidden rows the scheduler asks for, per pooling (none for generation requests).
HiddenRows HiddenRowsOf(const std::optional<Pooling>& pooling) {
  if (!pooling.has_value()) return HiddenRows::kNone;
  switch (*pooling) {
    case Pooling::kLast:
      return HiddenRows::kLast;
    case Pooling::kMean:
      return HiddenRows::kAll;
    case Pooling::kCls:
      return HiddenRows::kFirst;
  }
  return HiddenRows::kNone;
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
  std::unique_ptr<KvHostTier> host;
  if (cfg.host_cache_bytes > 0) {
    const KvBlockLayout layout = runner->kv_block_layout();
    if (layout.block_bytes <= 0) {
      return FailedPreconditionError(
          "--host-cache: this model runner does not expose its KV cache");
    }
    KvHostTierConfig h;
    h.capacity_bytes = cfg.host_cache_bytes;
    h.block_bytes = layout.block_bytes;
    ModelRunner* r = runner.get();
    h.alloc = [r](size_t bytes) { return r->AllocKvStaging(bytes); };
    StatusOr<std::unique_ptr<KvHostTier>> made = KvHostTier::Create(h);
    if (!made.ok()) return made.status();
    host = std::move(made).value();
  }
  std::unique_ptr<KvSsdTier> ssd;
  if (!cfg.ssd_cache_dir.empty()) {
    const KvBlockLayout layout = runner->kv_block_layout();
    if (layout.block_bytes <= 0) {
      return FailedPreconditionError("--ssd-cache: this model runner does not expose its KV cache");
    }
    KvSsdTierConfig t;
    t.dir = cfg.ssd_cache_dir;
    t.max_bytes = cfg.ssd_cache_max_bytes;
    t.max_pending_bytes = cfg.ssd_spill_queue_bytes;
    t.num_readers = cfg.ssd_readers;
    t.staging_chunk_bytes = cfg.ssd_staging_chunk_bytes;
    t.max_chunk_blocks = cfg.num_blocks;
    ModelRunner* r = runner.get();
    t.alloc_staging = [r](size_t bytes) { return r->AllocKvStaging(bytes); };
    t.format.model_fingerprint = cfg.model_fingerprint;
    t.format.kv_dtype = cfg.kv_dtype;
    t.format.tokenizer_hash = cfg.tokenizer_hash;
    t.format.block_size = cfg.block_size;
    t.format.num_layers = layout.num_layers;
    t.format.num_kv_heads = layout.num_kv_heads;
    t.format.head_dim = layout.head_dim;
    t.format.block_bytes = layout.block_bytes;
    if (t.format.model_fingerprint.empty()) {
      return FailedPreconditionError("--ssd-cache: the model has no fingerprint to key its blocks");
    }
    StatusOr<std::unique_ptr<KvSsdTier>> opened = KvSsdTier::Open(t);
    if (!opened.ok()) return opened.status().WithContext("--ssd-cache " + cfg.ssd_cache_dir);
    ssd = std::move(opened).value();
  }
  auto engine = std::unique_ptr<Engine>(new Engine(cfg, std::move(runner)));
  engine->host_ = std::move(host);
  engine->ssd_ = std::move(ssd);
  engine->PublishStats();
  return engine;
}

Engine::Engine(const EngineConfig& config, std::unique_ptr<ModelRunner> runner)
    : config_(config),
      vocab_size_(runner->vocab_size()),
      hidden_size_(runner->hidden_size()),
      runner_(std::move(runner)),
      sampler_(
          StepSamplerConfig{vocab_size_, config_.num_sampling_threads, config_.device_sampling}) {
  KvCacheConfig kv_cfg;
  kv_cfg.num_blocks = config_.num_blocks;
  kv_cfg.block_size = config_.block_size;
  kv_cfg.enable_prefix_cache = config_.enable_prefix_cache;
  kv_cfg.root_hash =
      RootBlockHash(config_.model_fingerprint, config_.kv_dtype, config_.tokenizer_hash);
  kv_cfg.track_new_cached = !config_.ssd_cache_dir.empty() || config_.host_cache_bytes > 0;
  kv_ = std::make_unique<KvCacheManager>(kv_cfg);
  if (config_.num_grammar_threads > 0) {
    grammar_pool_ = std::make_unique<ThreadPool>(static_cast<size_t>(config_.num_grammar_threads));
  }

  SchedulerConfig s;
  s.max_batched_tokens = config_.max_batched_tokens;
  s.max_num_seqs = config_.max_num_seqs;
  s.max_model_len = config_.max_model_len;
  s.bytes_per_token_kv = config_.bytes_per_token_kv;
  s.kv_budget_bytes = config_.kv_budget_bytes;
  s.memory_budget_bytes = config_.memory_budget_bytes;
  s.model_bytes = config_.model_bytes;
  scheduler_ = std::make_unique<Scheduler>(s, kv_.get());
  if (config_.num_draft_tokens > 0) proposer_ = std::make_unique<NgramProposer>(config_.ngram);

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
  if (restore_ != nullptr) {  // its readers write into the tier's staging slots
    restore_->Cancel();
    restore_->Wait();
  }
  restore_.reset();
  restore_host_.clear();
  restoring_ = false;
  FinishSpill();
  if (ssd_ != nullptr && !ssd_->Flush(std::chrono::milliseconds(config_.ssd_flush_ms))) {
    LOG(WARNING) << "ssd cache: " << ssd_->stats().pending_spills << " blocks still queued after "
                 << config_.ssd_flush_ms << " ms: dropped (a later miss)";
  }
  PublishStats();
}

StatusOr<RequestHandle> Engine::Submit(Request request) {
  const bool embedding = request.pooling.has_value();
  if (embedding) {
    if (hidden_size_ <= 0) {
      return FailedPreconditionError(
          "this model runner returns no hidden states: embeddings "
          "are not available");
    }
    if (request.grammar != nullptr || request.reasoning_budget.has_value()) {
      return InvalidArgumentError("an embedding request takes no grammar or reasoning budget");
    }
  } else {
    RETURN_IF_ERROR(request.params.Validate(vocab_size_));
  }
  if (request.prompt.empty()) return InvalidArgumentError("the prompt is empty (0 tokens)");
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    const TokenId t = request.prompt[i];
    if (t < 0 || t >= vocab_size_) {
      return InvalidArgumentError("prompt token id " + std::to_string(t) + " at position " +
                                  std::to_string(i) + " is out of the vocabulary [0, " +
                                  std::to_string(vocab_size_) + ")");
    }
  }
  if (request.reasoning_budget.has_value()) {
    RETURN_IF_ERROR(request.reasoning_budget->Validate(vocab_size_));
  }
  // Reads only immutable limits: safe from any thread.
  RETURN_IF_ERROR(scheduler_->CheckAdmission(static_cast<int>(request.prompt.size()),
                                             embedding ? 0 : request.params.max_tokens, embedding));
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
      const auto ready = [this] {
        return stop_ || !inbox_.empty() || !aborts_.empty() || scheduler_->HasWork();
      };
      if (const auto wake = IdleWake()) {
        cv_.wait_until(lock, *wake, ready);
      } else {
        cv_.wait(lock, ready);
      }
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
    draining_ = subs.size();
  }
  for (Submission& sub : subs) {
    const SamplingParams& params = sub.request.params;
    const std::optional<Pooling> pooling = sub.request.pooling;
    Status added = scheduler_->AddRequest(sub.id, std::move(sub.request.prompt),
                                          pooling.has_value() ? 0 : params.max_tokens,
                                          sub.request.cache_extra_keys, HiddenRowsOf(pooling));
    if (!added.ok()) {  // Submit checked the same limits; kept for robustness
      sub.stream->Finish(FinishReason::kError, added);
      ++finished_;
      continue;
    }
    Live live;
    live.stream = std::move(sub.stream);
    live.params = std::move(sub.request.params);
    live.seed = live.params.seed.value_or(Mix(seed_base_ ^ Mix(sub.id.value)));
    live.grammar = std::move(sub.request.grammar);
    live.pooling = pooling;
    if (pooling.has_value()) live.pooled.assign(static_cast<size_t>(hidden_size_), 0.0);
    if (config_.num_draft_tokens > 0 && !pooling.has_value()) live.stream->SetSpeculation({});
    if (sub.request.reasoning_budget.has_value()) {
      live.budget.emplace(*std::move(sub.request.reasoning_budget));
    }
    auto [it, fresh] = live_.emplace(sub.id, std::move(live));
    // A reply may begin with forced text (a JSON schema's `{"`): it joins the prompt's step.
    if (config_.jump_forward && it->second.grammar != nullptr) JumpForward(sub.id, it->second);
  }
  for (RequestId id : aborts) FinishRequest(id, FinishReason::kAbort);
  if (!subs.empty()) PublishStats(/*drained=*/true);
}

void Engine::FinishRequest(RequestId id, FinishReason reason, Status error,
                           std::optional<TokenId> stop_token) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  scheduler_->Finish(id);
  it->second.stream->Finish(reason, std::move(error), stop_token);
  live_.erase(it);
  sampler_.Release(id);
  ++finished_;
}

bool Engine::Step() {
  DrainInbox();
  AdvanceRestore();
  if (!scheduler_->HasWork()) {
    const auto now = std::chrono::steady_clock::now();
    if (!idle_) {
      idle_ = true;
      idle_since_ = now;
      demote_due_ = ssd_ != nullptr && config_.ssd_demote_idle_ms > 0;
      demote_missing_ = -1;
      demote_listed_ = false;
    }
    // The last step's blocks reach the host tier (and the disk) while idle too, once their copy
    // has landed: Loop polls until then.
    FinishSpill(/*wait=*/false);
    if (demote_due_ && now >= idle_since_ + std::chrono::milliseconds(config_.ssd_demote_idle_ms)) {
      DemoteIdle();
    }
    CheckIfIdle();
    PublishStats();
    return false;
  }
  idle_checked_ = false;
  idle_ = false;
  const StepPlan plan = scheduler_->Schedule();
  CHECK(!plan.empty()) << "requests are queued but none can run: admission let in a request "
                          "that can never fit";
  ReportCachedTokens(plan);
  if (grammar_pool_ != nullptr) StartGrammarMasks(plan);  // overlapping the step
  const auto t_start = std::chrono::steady_clock::now();
  StatusOr<StepLogits> logits = Execute(plan);
  const auto t_exec = std::chrono::steady_clock::now();
  if (grammar_pool_ != nullptr) WaitGrammarMasks();
  if (!logits.ok()) {
    FailStep(plan, logits.status());
  } else {
    if (grammar_pool_ == nullptr) StartGrammarMasks(plan);
    const auto t_masks = std::chrono::steady_clock::now();
    const std::vector<StepRow> rows = Rows(plan);
    std::vector<StatusOr<SampleResult>> sampled = sampler_.Sample(plan, rows, *logits, *runner_);
    const auto t_sample = std::chrono::steady_clock::now();
    if (config_.num_draft_tokens > 0) {  // the step's forward and sampling, not the masks' wait
      step_cost_.Observe(
          plan.num_tokens,
          std::chrono::duration<double>((t_exec - t_start) + (t_sample - t_masks)).count());
    }
    Commit(plan, sampled);
    if (plan.num_hidden > 0) PoolEmbeddings(plan, HiddenToHost(*logits, plan.num_hidden));
    if (config_.step_trace) {  // after exec: waiting for masks, sampling (its sync), commit
      const auto us = [](auto a, auto b) {
        return static_cast<long long>(
            std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
      };
      std::fprintf(stderr, "step %llu masks_us %lld sample_us %lld commit_us %lld\n",
                   static_cast<unsigned long long>(steps_ - 1), us(t_exec, t_masks),
                   us(t_masks, t_sample), us(t_sample, std::chrono::steady_clock::now()));
    }
  }
  if (config_.check_integrity_every_step) scheduler_->CheckIntegrity();
  // Just became idle: the idle integrity check (CheckIfIdle) comes after this step, once its
  // outputs are out — it walks the whole block pool, 6 ms for the H200's 248k blocks, which
  // here would hold up the finishing request's last outputs for a caller driving Step().
  PublishStats();
  return true;
}

void Engine::AdvanceRestore() {
  if (ssd_ == nullptr && host_ == nullptr) return;
  if (restoring_) {
    PumpRestore();
    if (restoring_) return;  // still landing: its request stays held
  }
  const SchedRequest* front = scheduler_->FrontWaiting();
  if (front == nullptr || front->hidden != HiddenRows::kNone) return;
  Live& live = live_.at(front->id);
  if (live.restore_probed) return;
  live.restore_probed = true;
  // A copy still in flight is of blocks still in the pool: the lookup below finds them there.
  FinishSpill(/*wait=*/false);
  const std::vector<BlockHash> hashes = kv_->PrefixHashes(front->tokens, front->extra_keys);
  std::vector<BlockId> pool_part;
  while (pool_part.size() < hashes.size()) {
    std::optional<BlockId> cached = kv_->LookupCached(hashes[pool_part.size()]);
    if (!cached.has_value()) break;
    pool_part.push_back(*cached);
  }
  // The chain goes on in the host tier, then on disk. Host slots are held from here until they
  // land (no spill evicts them meanwhile).
  size_t end = pool_part.size();
  std::vector<std::shared_ptr<const uint8_t>> held;
  while (host_ != nullptr && end < hashes.size()) {
    std::optional<int> slot = host_->Find(hashes[end]);
    if (!slot.has_value()) break;
    held.push_back(host_->Hold(*slot));
    ++end;
  }
  const size_t host_end = end;
  while (ssd_ != nullptr && end < hashes.size() && ssd_->Discover(hashes[end])) ++end;
  if (end == pool_part.size()) return;
  // The pool's part of the prefix stays pinned (as the restored blocks will be) until the
  // request's admission, so that the chain the restore extends is still there then; so do the
  // blocks of the chain past a gap that are still in the pool (the restore's allocations must not
  // evict them).
  const size_t head = pool_part.size();
  for (size_t i = head; i < end; ++i) {
    if (std::optional<BlockId> cached = kv_->LookupCached(hashes[i])) pool_part.push_back(*cached);
  }
  kv_->Pin(front->id, pool_part);
  restoring_ = true;
  restore_id_ = front->id;
  restore_first_ = static_cast<int>(head);
  restore_hashes_.assign(hashes.begin() + static_cast<ptrdiff_t>(head),
                         hashes.begin() + static_cast<ptrdiff_t>(end));
  restore_parent_ = head == 0 ? kv_->root_hash() : hashes[head - 1];
  restore_host_ = std::move(held);
  restore_host_next_ = 0;
  restore_host_landed_ = 0;
  restore_landed_ = 0;
  if (end > host_end) {  // read while the host part lands
    restore_ =
        ssd_->StartRestore(std::vector<BlockHash>(hashes.begin() + static_cast<ptrdiff_t>(host_end),
                                                  hashes.begin() + static_cast<ptrdiff_t>(end)));
  }
  scheduler_->SetHeld(front->id, true);
  PumpRestore();
}

void Engine::PumpRestore() {
  const SchedRequest* req = scheduler_->Find(restore_id_);
  bool go_on = req != nullptr && !req->running;  // else it finished while its blocks came up
  // Nothing runs: landing everything now stalls no one. Otherwise a bounded batch of host blocks
  // a step (a copy of ~64 MiB, a few ms), and only the disk chunks already read.
  const bool wait = scheduler_->num_running() == 0;
  const size_t num_host = restore_host_.size();
  if (go_on && restore_host_next_ < num_host) {
    size_t n = num_host - restore_host_next_;
    if (!wait) {
      constexpr int64_t kHostBytesPerStep = int64_t{64} << 20;
      n = std::min<size_t>(
          n, static_cast<size_t>(std::max<int64_t>(1, kHostBytesPerStep / host_->block_bytes())));
    }
    std::vector<const uint8_t*> hosts(n);
    for (size_t i = 0; i < n; ++i) hosts[i] = restore_host_[restore_host_next_ + i].get();
    const int before = restore_host_landed_;
    go_on = LandRestored(*req, static_cast<int>(restore_host_next_), hosts, &restore_host_landed_);
    host_restore_tokens_ += static_cast<uint64_t>(restore_host_landed_ - before) *
                            static_cast<uint64_t>(config_.block_size);
    for (size_t i = 0; i < n; ++i) restore_host_[restore_host_next_ + i].reset();
    restore_host_next_ += n;
    if (go_on && restore_host_next_ < num_host) return;  // more next step
  }
  if (go_on && restore_ != nullptr) {
    const auto block_bytes = static_cast<size_t>(ssd_->block_bytes());
    while (go_on) {
      std::optional<KvRestoreJob::Chunk> chunk = restore_->Next(wait);
      if (!chunk.has_value()) break;
      std::vector<const uint8_t*> hosts(static_cast<size_t>(chunk->count));
      for (size_t i = 0; i < hosts.size(); ++i) hosts[i] = chunk->bytes.data() + i * block_bytes;
      const int before = restore_landed_;
      go_on =
          LandRestored(*req, static_cast<int>(num_host) + chunk->first, hosts, &restore_landed_);
      restore_tokens_ += static_cast<uint64_t>(restore_landed_ - before) *
                         static_cast<uint64_t>(config_.block_size);
    }
    if (go_on && !restore_->ended()) return;
  }
  if (restore_ != nullptr) {
    restore_->Cancel();
    restore_->Wait();  // the reads in flight (at most the job's staging slots) write the slots
    restore_.reset();
    ssd_->RecordRestore(restore_landed_);
  }
  if (host_ != nullptr) host_->RecordRestore(restore_host_landed_);
  restore_host_.clear();  // the holds of blocks that did not land
  restoring_ = false;
  if (req != nullptr && !req->running) scheduler_->SetHeld(restore_id_, false);
}

bool Engine::LandRestored(const SchedRequest& req, int first, std::span<const uint8_t* const> hosts,
                          int* landed) {
  const RequestId id = req.id;
  const int count = static_cast<int>(hosts.size());
  // Leave room for the running rows' next tokens and the rest of this request's prompt: a restore
  // must never make the running batch preempt.
  const int bs = config_.block_size;
  const int rest = req.num_tokens() - (restore_first_ + first + count) * bs;
  const int reserve = scheduler_->num_running() + (rest + bs - 1) / bs;
  // Blocks to fill, and which of the given blocks go there (not those computed meanwhile).
  std::vector<BlockId> fill;
  std::vector<const uint8_t*> from;
  std::vector<int> index;  // of each filled block in hosts
  bool all = true;
  for (int i = 0; i < count; ++i) {
    const BlockHash& hash = restore_hashes_[static_cast<size_t>(first + i)];
    if (std::optional<BlockId> cached = kv_->LookupCached(hash)) {  // computed meanwhile
      kv_->Pin(id, std::span<const BlockId>(&*cached, 1));
      continue;
    }
    std::optional<BlockId> block;
    if (kv_->num_free_blocks() > reserve) block = kv_->AllocateForRestore(id);
    if (!block.has_value()) {
      all = false;
      break;
    }
    fill.push_back(*block);
    from.push_back(hosts[static_cast<size_t>(i)]);
    index.push_back(i);
  }
  if (fill.empty()) return all;
  const Status written = runner_->WriteKvBlocks(fill, from);
  if (!written.ok()) {  // the blocks stay unhashed (plain blocks once unpinned)
    LOG(ERROR) << "kv tiers: restoring blocks failed: " << written.ToString();
    return false;
  }
  for (size_t k = 0; k < fill.size(); ++k) {
    const size_t at = static_cast<size_t>(first + index[k]);
    const BlockHash& parent = at == 0 ? restore_parent_ : restore_hashes_[at - 1];
    CHECK(kv_->CacheRestored(fill[k], restore_hashes_[at], parent))
        << "restored block " << restore_hashes_[at].ToHex() << " cached twice";
  }
  *landed += static_cast<int>(fill.size());
  return all;
}

void Engine::SpillNewBlocks() {
  FinishSpill();  // the previous step's copy: done by now, it overlapped this step
  std::vector<NewCachedBlock> fresh = kv_->TakeNewCached();
  if (fresh.empty()) return;
  if (host_ != nullptr) {
    SpillToHost(fresh);
  } else if (ssd_ != nullptr) {
    SpillToSsd(fresh);
  }
}

void Engine::SpillToHost(const std::vector<NewCachedBlock>& fresh) {
  PendingSpill p;
  std::vector<BlockId> ids;
  std::vector<uint8_t*> at;
  for (const NewCachedBlock& b : fresh) {
    if (host_->Contains(b.hash)) continue;
    std::optional<int> slot = host_->Reserve();
    if (!slot.has_value()) {  // every slot held (the SSD writer lags): straight down
      p.refused.push_back(b);
      continue;
    }
    ids.push_back(b.block);
    at.push_back(host_->data(*slot));
    p.slots.push_back(*slot);
    p.blocks.push_back(b);
  }
  // One copy out of the pool for the step's blocks, into the slots (page-locked on CUDA: the
  // copy engine fills them while the next step runs).
  if (!ids.empty()) {
    StatusOr<uint64_t> ticket = runner_->StartKvBlockReads(ids, at);
    if (!ticket.ok()) {
      for (int slot : p.slots) host_->Unreserve(slot);
      if (!spill_warned_) {
        LOG(ERROR) << "kv tiers: cannot copy blocks out: " << ticket.status().ToString();
      }
      spill_warned_ = true;
      return;
    }
    p.ticket = *ticket;
  }
  pending_spill_ = std::move(p);
}

bool Engine::FinishSpill(bool wait) {
  if (!pending_spill_.has_value()) return true;
  if (!wait && !pending_spill_->slots.empty() &&
      !runner_->KvBlockReadsDone(pending_spill_->ticket)) {
    return false;
  }
  PendingSpill p = std::move(*pending_spill_);
  pending_spill_.reset();
  if (!p.slots.empty()) runner_->WaitKvBlockReads(p.ticket);
  std::vector<KvSsdTier::SpillBlock> down;
  for (size_t k = 0; k < p.slots.size(); ++k) {
    if (!host_->Publish(p.slots[k], p.blocks[k].hash)) continue;
    if (ssd_ != nullptr && !ssd_->Has(p.blocks[k].hash)) {
      down.push_back({p.blocks[k].hash, p.blocks[k].parent, host_->Hold(p.slots[k])});
    }
  }
  if (!down.empty()) ssd_->Spill(down);
  // After their parents (queued just above): the SSD tier refuses a block whose parent it lacks.
  if (ssd_ != nullptr && !p.refused.empty()) SpillToSsd(p.refused);
  return true;
}

std::optional<std::chrono::steady_clock::time_point> Engine::IdleWake() const {
  if (!idle_) return std::nullopt;  // Step has not seen the engine idle yet: it runs first
  const auto now = std::chrono::steady_clock::now();
  if (pending_spill_.has_value()) return now + std::chrono::milliseconds(1);
  if (!demote_due_) return std::nullopt;
  const auto due = idle_since_ + std::chrono::milliseconds(config_.ssd_demote_idle_ms);
  return due > now ? due : now + std::chrono::milliseconds(10);  // past due: the writer drains
}

void Engine::DemoteIdle() {
  if (!FinishSpill(/*wait=*/false)) return;  // the last copy out first
  // The pool's blocks are walked once an idle spell (nothing allocates while idle: the list
  // stays true); the retries while the writer drains only drop what has gone down since.
  if (!demote_listed_) {
    demote_list_ = kv_->CachedFreeBlocks();
    demote_listed_ = true;
  }
  std::erase_if(demote_list_, [&](const NewCachedBlock& b) { return ssd_->Has(b.hash); });
  const auto missing = static_cast<int64_t>(demote_list_.size());
  // Done when nothing is missing, or when the last call's blocks did not reach the disk or its
  // queue (the disk is full, their parents are gone): no retrying those all idle spell long.
  if (missing == 0 || (demote_missing_ >= 0 && missing >= demote_missing_)) {
    demote_due_ = false;
    demote_list_.clear();
    return;
  }
  const auto room = static_cast<size_t>(std::max<int64_t>(ssd_->QueueRoom(), 0));
  if (room == 0) return;  // the writer is behind: again in a moment
  std::vector<NewCachedBlock> down(
      demote_list_.begin(),
      demote_list_.begin() + static_cast<ptrdiff_t>(std::min(room, demote_list_.size())));
  if (down.size() < demote_list_.size()) {
    demote_missing_ = missing;  // the rest at a later call
  } else {
    demote_due_ = false;
    demote_list_.clear();
  }
  SpillToSsd(down);
  demoted_blocks_ += down.size();
}

void Engine::SpillToSsd(const std::vector<NewCachedBlock>& fresh) {
  std::vector<BlockId> ids;
  std::vector<KvSsdTier::SpillBlock> blocks;
  for (const NewCachedBlock& b : fresh) {
    if (ssd_->Has(b.hash)) continue;
    ids.push_back(b.block);
    blocks.push_back({b.hash, b.parent, nullptr});
  }
  // Copy out no more than the queue takes: the newest are refused (a chain is usable from its
  // head), without a pointless copy.
  const auto room = static_cast<size_t>(ssd_->QueueRoom());
  if (ids.size() > room) {
    ssd_->Refused(static_cast<int64_t>(ids.size() - room));
    ids.resize(room);
    blocks.resize(room);
  }
  if (ids.empty()) return;
  // One copy out of the pool for the step's blocks into one buffer; each block's bytes alias it,
  // so the writer frees it after the last.
  const auto block_bytes = static_cast<size_t>(ssd_->block_bytes());
  auto bytes = std::make_shared<std::vector<uint8_t>>(ids.size() * block_bytes);
  std::vector<uint8_t*> at(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) at[i] = bytes->data() + i * block_bytes;
  const Status read = runner_->ReadKvBlocks(ids, at);
  if (!read.ok()) {
    if (!spill_warned_) {
      LOG(ERROR) << "kv tiers: cannot copy blocks out: " << read.ToString();
    }
    spill_warned_ = true;
    return;
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    blocks[i].bytes = std::shared_ptr<const uint8_t>(bytes, at[i]);
  }
  ssd_->Spill(blocks);
}

void Engine::ReportCachedTokens(const StepPlan& plan) {
  for (const ScheduledSeq& seq : plan.seqs) {
    Live& live = live_.at(seq.request_id);
    if (!live.cached_reported) {
      // Jump-forward's tokens at admission follow the prompt and may be cached too: only the
      // prompt's count.
      const SchedRequest* req = scheduler_->Find(seq.request_id);
      live.stream->SetCachedTokens(std::min(req->num_cached_tokens, req->num_prompt_tokens));
      live.cached_reported = true;
    }
  }
}

StatusOr<StepLogits> Engine::Execute(const StepPlan& plan) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<StepLogits> logits = runner_->Execute(plan);
  CHECK(!logits.ok() || logits->rows.size() == static_cast<size_t>(plan.num_logits))
      << "the runner returned " << logits->rows.size() << " logits rows for " << plan.num_logits;
  if (config_.step_trace) {  // the host's view of a step: what exceeds exec is the engine's work
    const auto us = [](auto a, auto b) {
      return static_cast<long long>(
          std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
    };
    std::fprintf(stderr, "step %llu seqs %zu tokens %d pos %d exec_us %lld since_prev_us %lld\n",
                 static_cast<unsigned long long>(steps_), plan.seqs.size(), plan.num_tokens,
                 plan.seqs.empty() ? -1 : plan.seqs[0].start_pos,
                 us(start, std::chrono::steady_clock::now()),
                 steps_ == 0 ? 0 : us(prev_exec_start_, start));
  }
  prev_exec_start_ = start;
  ++steps_;
  if (logits.ok()) computed_tokens_ += static_cast<uint64_t>(plan.num_tokens);
  return logits;
}

void Engine::FailStep(const StepPlan& plan, const Status& error) {
  LOG(ERROR) << "model step failed: " << error.ToString();
  for (const ScheduledSeq& seq : plan.seqs) {
    FinishRequest(seq.request_id, FinishReason::kError, error.WithContext("model step failed"));
  }
}

std::vector<StepRow> Engine::Rows(const StepPlan& plan) {
  std::vector<StepRow> rows;
  rows.reserve(static_cast<size_t>(plan.num_logits));
  verify_tokens_.clear();
  for (const ScheduledSeq& seq : plan.seqs)
    if (seq.num_logits > 1) verify_tokens_.emplace_back();
  size_t verify = 0;
  for (const ScheduledSeq& seq : plan.seqs) {
    const SchedRequest* req = scheduler_->Find(seq.request_id);
    const Live& live = live_.at(seq.request_id);
    std::span<const TokenId> tokens = req->tokens;
    if (seq.num_logits > 1) {  // draft row j follows the pending token and drafts [0, j)
      std::vector<TokenId>& t = verify_tokens_[verify++];
      t.assign(req->tokens.begin(), req->tokens.end());
      t.insert(t.end(), seq.tokens.begin() + 1, seq.tokens.end());
      tokens = t;
    }
    const int end = seq.start_pos + static_cast<int>(seq.tokens.size());  // after the last token
    for (int j = 0; j < seq.num_logits; ++j) {
      // The row of the token at end - num_logits + j: what it samples follows tokens[0, upto).
      const int upto = end - seq.num_logits + j + 1;
      const int num_prompt = std::min(upto, req->num_prompt_tokens);
      StepRow& r = rows.emplace_back();
      r.request = seq.request_id;
      r.ctx = SampleContext{
          &live.params, tokens.first(static_cast<size_t>(num_prompt)),
          tokens.subspan(static_cast<size_t>(num_prompt), static_cast<size_t>(upto - num_prompt)),
          live.seed, config_.eos_token_ids};
      r.last_of_seq = j + 1 == seq.num_logits;
      if (live.budget.has_value()) {
        if (const std::optional<TokenId> forced = live.budget->forced()) {
          CHECK_EQ(seq.num_logits, 1) << "reasoning budgets for draft rows are not implemented";
          r.ctx.forced = *forced;
          continue;  // no mask: the token is decided (the grammar still takes it at Commit)
        }
      }
      if (live.grammar == nullptr) continue;
      r.ctx.allowed = live.mask;
      if (seq.num_logits > 1 && !live.mask.empty()) {
        r.ctx.allowed = std::span<const uint32_t>(live.draft_masks)
                            .subspan(static_cast<size_t>(j) * live.mask.size(), live.mask.size());
      }
    }
  }
  return rows;
}

void Engine::StartGrammarMasks(const StepPlan& plan) {
  mask_rows_.clear();
  for (const ScheduledSeq& seq : plan.seqs) {
    if (seq.num_logits == 0) continue;  // a pending token waits for the seq's next sampled row
    Live& live = live_.at(seq.request_id);
    if (live.grammar == nullptr) continue;
    // The first row's token follows every token accepted so far; a verify seq's draft rows
    // follow its drafts. A forced row (reasoning budget; never drafted) needs no mask, but its
    // grammar still takes the previous tokens.
    live.mask_needed = !(live.budget.has_value() && live.budget->forced().has_value());
    live.drafts = std::span<const TokenId>(seq.tokens).subspan(1, seq.num_logits - 1);
    if (grammar_pool_ == nullptr) {
      AdvanceGrammar(live);
    } else {
      mask_rows_.push_back(&live);  // live_ is not modified before WaitGrammarMasks
    }
  }
  if (mask_rows_.empty()) return;
  // Each wake-up of a worker costs the engine thread a few microseconds before the step starts
  // (64 of them cost ~0.25 ms a step on the H200 machine), while a row's usual work (a token, a
  // cached mask) is ~1-3 us and all of it overlaps the device step. So a worker for each
  // kRowsPerWorker rows, taking rows from a shared counter: a row whose mask is cold (a new
  // string, ~0.1-2 ms) holds up only its worker, the others take the rest.
  constexpr size_t kRowsPerWorker = 16;
  const size_t tasks = std::min((mask_rows_.size() + kRowsPerWorker - 1) / kRowsPerWorker,
                                static_cast<size_t>(config_.num_grammar_threads));
  next_mask_row_.store(0, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(masks_mu_);
    masks_pending_ += tasks;
  }
  for (size_t t = 0; t < tasks; ++t) {
    grammar_pool_->Submit([this] {
      for (size_t i;
           (i = next_mask_row_.fetch_add(1, std::memory_order_relaxed)) < mask_rows_.size();) {
        AdvanceGrammar(*mask_rows_[i]);
      }
      std::lock_guard<std::mutex> lock(masks_mu_);
      if (--masks_pending_ == 0) masks_cv_.notify_one();
    });
  }
}

void Engine::AdvanceGrammar(Live& live) {
  for (const TokenId t : live.grammar_pending) {
    if (!live.grammar_error.ok()) break;
    if (!live.grammar->AcceptToken(t)) {
      live.grammar_error = InternalError("token " + std::to_string(t) +
                                         " was sampled outside the request's grammar");
    }
  }
  live.grammar_pending.clear();
  live.mask = {};
  if (!live.mask_needed || !live.grammar_error.ok()) return;
  if (live.drafts.empty()) {
    live.mask = live.grammar->Mask();
    return;
  }
  // Row j's mask is the grammar's after drafts [0, j); the grammar takes the drafts to compute
  // them and gives them back (the accepted ones come back as pending tokens after the commit).
  GrammarState& g = *live.grammar;
  const size_t words = g.mask_words();
  const size_t rows = live.drafts.size() + 1;
  live.draft_masks.resize(rows * words);
  g.FillMask(live.draft_masks.data());
  size_t taken = 0;
  for (size_t j = 1; j < rows; ++j) {
    uint32_t* m = live.draft_masks.data() + j * words;
    const bool took = taken + 1 == j && !g.IsTerminated() && g.AcceptToken(live.drafts[j - 1]);
    if (took) ++taken;
    if (took && !g.IsTerminated()) {
      g.FillMask(m);
    } else {  // after a refused draft (or the end): the rows' tokens are never accepted
      std::copy_n(m - words, words, m);
    }
  }
  g.RollbackTokens(taken);
  live.mask = std::span<const uint32_t>(live.draft_masks.data(), words);
}

void Engine::WaitGrammarMasks() {
  std::unique_lock<std::mutex> lock(masks_mu_);
  masks_cv_.wait(lock, [this] { return masks_pending_ == 0; });
}

void Engine::Commit(const StepPlan& plan, std::vector<StatusOr<SampleResult>>& sampled) {
  // A seq accepts its last row's token; a seq verifying drafts (num_logits = 1 + k) accepts its
  // rows' tokens while each equals the draft it scores, then the first that does not (or the
  // token after the last draft). A failed row fails its request.
  std::vector<std::vector<TokenId>> tokens(plan.seqs.size());
  std::vector<std::span<const TokenId>> accepted(plan.seqs.size());
  std::vector<std::vector<SampleResult*>> results(plan.seqs.size());
  size_t row = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& seq = plan.seqs[i];
    if (seq.num_logits == 0) continue;
    const size_t first = row;
    row += static_cast<size_t>(seq.num_logits);
    const int drafts = seq.num_logits - 1;
    const TokenId* draft = seq.tokens.data() + seq.tokens.size() - static_cast<size_t>(drafts);
    Status failed;
    for (int j = 0; j <= drafts; ++j) {
      StatusOr<SampleResult>& r = sampled[first + static_cast<size_t>(j)];
      if (!r.ok()) {
        failed = r.status();
        break;
      }
      tokens[i].push_back(r->token);
      results[i].push_back(&*r);
      if (j < drafts && r->token != draft[j]) break;
    }
    if (!failed.ok()) {
      FinishRequest(seq.request_id, FinishReason::kError, failed.WithContext("sampling failed"));
      results[i].clear();
      continue;
    }
    Live& live = live_.at(seq.request_id);
    if (!live.grammar_error.ok()) {
      FinishRequest(seq.request_id, FinishReason::kError, live.grammar_error);
      results[i].clear();
      continue;
    }
    if (drafts > 0) {
      live.acceptance.Round(drafts, static_cast<int>(tokens[i].size()) - 1);
      draft_tokens_ += static_cast<uint64_t>(drafts);
      accepted_draft_tokens_ += tokens[i].size() - 1;
      live.speculation.drafted += drafts;
      live.speculation.accepted += static_cast<int>(tokens[i].size()) - 1;
      live.stream->SetSpeculation(live.speculation);
      if (tokens[i].size() == 1) {  // nothing accepted: back off
        live.spec_backoff = std::clamp(2 * live.spec_backoff, 1, kMaxSpecBackoff);
        live.spec_skip = live.spec_backoff;
      } else if (!live.spec_probing) {
        live.spec_backoff = 0;
      }
      live.spec_probing = false;
    }
    // The grammar takes the tokens with the next mask (AdvanceGrammar), off this thread: up to a
    // stop token, which ends the request (a verify round may accept drafts past it).
    if (live.grammar != nullptr) {
      const auto stop = std::find_if(tokens[i].begin(), tokens[i].end(), [&](TokenId t) {
        return Contains(live.params.stop_token_ids, t) ||
               (!live.params.ignore_eos && Contains(config_.eos_token_ids, t));
      });
      live.grammar_pending.assign(tokens[i].begin(),
                                  stop == tokens[i].end() ? stop : std::next(stop));
    }
    accepted[i] = tokens[i];
  }
  scheduler_->Update(plan, accepted);

  // Emit and check the stop conditions, token by token.
  const double draft_cost = config_.num_draft_tokens > 0 ? DraftCost(plan) : 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    if (results[i].empty()) continue;
    const RequestId id = plan.seqs[i].request_id;
    Live& live = live_.at(id);
    const int outputs_before =
        scheduler_->Find(id)->num_output_tokens() - static_cast<int>(results[i].size());
    bool finished = false;
    for (size_t m = 0; m < results[i].size() && !finished; ++m) {
      finished = EmitToken(id, live, *results[i][m], outputs_before + static_cast<int>(m) + 1);
    }
    if (finished) continue;
    if (config_.jump_forward && live.grammar != nullptr) JumpForward(id, live);
    if (config_.num_draft_tokens > 0) ProposeDraft(id, live, draft_cost);
  }
  // After the tokens are out (the copy out is not on their way). A finished request's blocks are
  // free now but keep their bytes: nothing is allocated before the copy is queued.
  SpillNewBlocks();
}

// One accepted token of `id`: the stop conditions, the stream, the length limits (the request
// then has num_output_tokens outputs up to this one). Returns whether it finished the request.
bool Engine::EmitToken(RequestId id, Live& live, SampleResult& result, int num_output_tokens) {
  const SamplingParams& p = live.params;
  const TokenId t = result.token;
  if (live.budget.has_value() && !live.budget->done()) {
    const SchedRequest* req = scheduler_->Find(id);
    live.budget->Accept(
        std::span<const TokenId>(req->tokens).subspan(static_cast<size_t>(req->num_prompt_tokens)));
  }
  if ((!p.ignore_eos && Contains(config_.eos_token_ids, t)) || Contains(p.stop_token_ids, t)) {
    if (live.grammar != nullptr) {  // the grammar takes the last token too: is the end valid?
      live.mask_needed = false;
      AdvanceGrammar(live);
    }
    if (!live.grammar_error.ok()) {
      FinishRequest(id, FinishReason::kError, live.grammar_error);
    } else {
      FinishRequest(id, FinishReason::kStop, OkStatus(), t);
    }
    return true;
  }
  TokenOutput out;
  out.token = t;
  out.logprob = result.logprob;
  out.top_logprobs = std::move(result.top_logprobs);
  live.stream->Push(std::move(out));
  ++generated_tokens_;
  const SchedRequest* req = scheduler_->Find(id);
  if (num_output_tokens >= p.max_tokens ||
      req->num_prompt_tokens + num_output_tokens >= config_.max_model_len) {
    FinishRequest(id, FinishReason::kLength);
    return true;
  }
  return false;
}

void Engine::ProposeDraft(RequestId id, Live& live, double cost) {
  // Rows whose next token a reasoning budget may force take no drafts. (Rows under a grammar
  // do: each draft row is sampled under the grammar's mask after the drafts before it.)
  if (proposer_ == nullptr || (live.budget.has_value() && !live.budget->done())) return;
  const SchedRequest* req = scheduler_->Find(id);
  if (req == nullptr || req->num_tokens() - req->num_computed_tokens != 1) return;
  if (live.spec_skip > 0) {
    --live.spec_skip;
    return;
  }
  int k = DraftLength(live.acceptance.alpha(), cost, config_.num_draft_tokens);
  const bool probe = k == 0;
  if (probe) {
    // Not worth a draft now: back off as after a rejected round (a probe's success does not
    // reset it), then try one draft, so that the row's acceptance rate is measured again.
    if (!live.spec_probe) {
      live.spec_backoff = std::clamp(2 * live.spec_backoff, 1, kMaxSpecBackoff);
      live.spec_skip = live.spec_backoff;
      live.spec_probe = true;
      return;
    }
    k = 1;
  }
  live.spec_probe = false;
  std::vector<TokenId> draft = proposer_->Propose(req->tokens, req->num_prompt_tokens, k);
  live.spec_probing = probe && !draft.empty();
  scheduler_->SetDraft(id, std::move(draft));
}

double Engine::DraftCost(const StepPlan& plan) const {
  double r = config_.draft_token_cost;
  if (r < 0) r = step_cost_.TokenCost().value_or(0.0);  // optimistic until measured
  if (r == 0) return 0;
  // The step's shape without its drafts: rows sampled and tokens.
  int rows = 0;
  int tokens = plan.num_tokens;
  for (const ScheduledSeq& seq : plan.seqs) {
    if (seq.num_logits == 0) continue;
    ++rows;
    tokens -= seq.num_logits - 1;
  }
  return DraftTokenCost(r, rows, tokens);
}

void Engine::JumpForward(RequestId id, Live& live) {
  // Forced tokens have no distribution to report, and a reasoning budget counts what is sampled.
  if (live.params.num_logprobs >= 0 || (live.budget.has_value() && !live.budget->done())) return;
  live.mask_needed = false;
  AdvanceGrammar(live);  // the sampled token, now; the next step only computes the mask
  if (!live.grammar_error.ok()) return;  // fails the request at its next commit
  const SchedRequest* req = scheduler_->Find(id);
  const int room = std::min(live.params.max_tokens - req->num_output_tokens(),
                            config_.max_model_len - req->num_tokens()) -
                   1;
  if (room <= 0) return;
  std::vector<TokenId> forced = live.grammar->JumpForward(static_cast<size_t>(room));
  // A stop id among them is left to be sampled, so that it stops the request the usual way.
  const auto stop = std::find_if(forced.begin(), forced.end(), [&](TokenId t) {
    return Contains(live.params.stop_token_ids, t) ||
           (!live.params.ignore_eos && Contains(config_.eos_token_ids, t));
  });
  live.grammar->RollbackTokens(static_cast<size_t>(forced.end() - stop));
  forced.erase(stop, forced.end());
  if (forced.empty()) return;
  scheduler_->AppendTokens(id, forced);
  for (TokenId t : forced) {
    TokenOutput out;
    out.token = t;
    live.stream->Push(std::move(out));
  }
  generated_tokens_ += forced.size();
  jump_forward_tokens_ += forced.size();
}

void Engine::PoolEmbeddings(const StepPlan& plan, const std::vector<float>& hidden) {
  const size_t width = static_cast<size_t>(hidden_size_);
  CHECK_EQ(hidden.size(), static_cast<size_t>(plan.num_hidden) * width);
  size_t row = 0;  // this seq's first hidden row
  for (const ScheduledSeq& seq : plan.seqs) {
    const size_t num_rows = static_cast<size_t>(seq.num_hidden());
    const size_t first = row;
    row += num_rows;
    auto it = live_.find(seq.request_id);
    if (it == live_.end() || !it->second.pooling.has_value()) continue;
    Live& live = it->second;
    // Embeddings never start from the prefix cache, so start_pos 0 is the prompt's first chunk,
    // the first ever or the first after a preemption: the pool starts over. (A step without
    // hidden rows does not get here; a last-token request's chunks before its last have none,
    // and it pools nothing until then.)
    if (seq.start_pos == 0) {
      live.pooled.assign(width, 0.0);
      live.num_pooled = 0;
    }
    for (size_t r = first; r < first + num_rows; ++r) {
      const float* h = hidden.data() + r * width;
      if (*live.pooling == Pooling::kMean) {
        for (size_t i = 0; i < width; ++i) live.pooled[i] += h[i];
      } else {
        std::copy(h, h + width, live.pooled.begin());
      }
      ++live.num_pooled;
    }
    const SchedRequest* req = scheduler_->Find(seq.request_id);
    if (seq.start_pos + static_cast<int>(seq.tokens.size()) < req->num_tokens()) continue;
    // The prompt is computed: the embedding is done.
    CHECK_EQ(live.num_pooled, *live.pooling == Pooling::kMean ? req->num_tokens() : 1)
        << seq.request_id << ": hidden rows pooled for " << PoolingName(*live.pooling);
    std::vector<float> embedding(width);
    for (size_t i = 0; i < width; ++i) {
      embedding[i] = static_cast<float>(live.pooled[i] / live.num_pooled);
    }
    live.stream->FinishWithEmbedding(std::move(embedding));
    FinishRequest(seq.request_id, FinishReason::kStop);
  }
  CHECK_EQ(row, static_cast<size_t>(plan.num_hidden));
}

void Engine::PublishStats(bool drained) {
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
  s.jump_forward_tokens = jump_forward_tokens_;
  s.draft_tokens = draft_tokens_;
  s.accepted_draft_tokens = accepted_draft_tokens_;
  s.draft_token_cost = config_.draft_token_cost >= 0 ? config_.draft_token_cost
                                                     : step_cost_.TokenCost().value_or(-1.0);
  s.parallel_sample_steps = sampler_.stats().parallel_sample_steps;
  s.idle_checks = idle_checks_;
  if (host_ != nullptr) {
    s.host_cache = true;
    s.host = host_->stats();
    s.host_restore_tokens = host_restore_tokens_;
  }
  if (ssd_ != nullptr) {
    s.ssd_cache = true;
    s.ssd = ssd_->stats();
    s.ssd_restore_tokens = restore_tokens_;
    s.ssd_demoted_blocks = demoted_blocks_;
  }
  if (drained) {  // mu_ before stats_mu_, as in stats()
    std::lock_guard<std::mutex> lock(mu_);
    std::lock_guard<std::mutex> stats_lock(stats_mu_);
    stats_ = s;
    draining_ = 0;
    return;
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_ = s;
}

EngineStats Engine::stats() const {
  EngineStats s;
  // Under mu_ throughout: the snapshot, the inbox and the rows between them are read at once.
  std::lock_guard<std::mutex> lock(mu_);
  {
    std::lock_guard<std::mutex> stats_lock(stats_mu_);
    s = stats_;
  }
  s.pending_rows += static_cast<int>(inbox_.size() + draining_);
  s.submitted_rows = submitted_;
  // The tier's counters move on its own threads (write-behind, readers) after the last step:
  // read them now, not from the step-end snapshot, so an idle server reports its spills landing.
  if (ssd_ != nullptr) s.ssd = ssd_->stats();
  if (host_ != nullptr) s.host = host_->stats();  // holds drop as the writer goes
  return s;
}

}  // namespace loom
