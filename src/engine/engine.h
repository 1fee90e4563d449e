// Engine: one thread owns the scheduler, the KV cache manager, the runner and the step sampler,
// and loops (ARCHITECTURE §1)
//
//   drain inbox -> plan = scheduler.Schedule() -> logits = runner.Execute(plan)
//               -> results = sampler.Sample(plan, rows, logits) -> Commit: scheduler.Update,
//                  emit tokens, finish on EOS / stop ids / length
//
// How each row is sampled (on the device or the host, with which edits) is the StepSampler's
// choice (sample/step_sampler.h); the engine only hands it each row's request context.
// Other threads talk to it only through Submit / Abort / stats and each request's OutputStream.
//
// Embedding requests (Request::pooling) ride the same steps: their prompt chunks ask the runner
// for final hidden rows instead of logits (step_plan.h), which PoolEmbeddings folds into the
// request's pooled vector as each chunk lands (a sum for mean pooling, in position order, so the
// result does not depend on how the prompt was chunked or batched); the step that computes the
// last prompt token finishes the request with its vector.
//
// With a host-RAM tier (EngineConfig::host_cache_bytes, kv/kv_host_tier.h) and/or an SSD tier
// (EngineConfig::ssd_cache_dir, kv/kv_ssd_tier.h) every block entering the prefix cache is copied
// out after its step: into a host slot (held there while the SSD writer writes it behind), or,
// without a host tier, into a buffer the SSD writer frees. When the request at the front of the
// waiting queue has a prefix that continues past the pool's — in the host tier, then on disk — it
// is held while those blocks come up: host blocks are copied into fresh pool blocks at once (a
// bounded amount per step while other rows run), disk blocks once the reader threads fetched them
// (running rows keep stepping; with none running the engine just waits for them). Landed blocks
// are cached and pinned until the Schedule that admits the request, so its admission hits them
// like any cached prefix.
//
// Failures are contained: a request's own problem (bad parameter at Submit, NaN logits, every
// token masked) finishes that request with kError; a runner error fails the requests of that
// step; the loop keeps serving the rest. `n > 1` is n submissions sharing their prompt through
// the prefix cache.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/engine_config.h"
#include "engine/output_stream.h"
#include "engine/request.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_host_tier.h"
#include "kv/kv_ssd_tier.h"
#include "runtime/model_runner.h"
#include "sample/step_sampler.h"
#include "sched/scheduler.h"
#include "spec/draft_length.h"
#include "spec/draft_proposer.h"

namespace loom {

struct RequestHandle {
  RequestId id;
  std::shared_ptr<OutputStream> stream;
};

// A snapshot for /stats and /metrics.
struct EngineStats {
  int active_rows = 0;          // running requests
  int pending_rows = 0;         // queued: waiting for rows, blocks or --kv-budget
  uint64_t submitted_rows = 0;  // accepted by Submit since start
  uint64_t finished_rows = 0;   // finished for any reason
  int kv_blocks_total = 0;
  int kv_blocks_used = 0;          // referenced by running requests
  int kv_blocks_cached = 0;        // hashed (prefix cache), used or free
  int kv_blocks_free = 0;          // allocatable (includes cached-but-free)
  int64_t kv_bytes = 0;            // used blocks x block_size x bytes_per_token_kv
  int64_t kv_projected_bytes = 0;  // running requests' (prompt + max_tokens) KV: what
                                   // --kv-budget caps
  int64_t kv_budget_bytes = 0;
  uint64_t prefix_cache_hits = 0;  // admissions that reused >= 1 block
  uint64_t prefix_cache_misses = 0;
  uint64_t prefix_cache_hit_tokens = 0;
  uint64_t prefix_cache_query_tokens = 0;
  uint64_t prefix_cache_evictions = 0;
  uint64_t preemptions = 0;
  uint64_t steps = 0;
  uint64_t computed_tokens = 0;        // tokens whose KV the runner wrote
  uint64_t generated_tokens = 0;       // tokens sampled and emitted (jump-forward's too)
  uint64_t jump_forward_tokens = 0;    // of those, appended by jump-forward without sampling
  uint64_t draft_tokens = 0;           // speculative tokens verified (--draft-kind)
  uint64_t accepted_draft_tokens = 0;  // of those, accepted
  // The token cost drafts are judged by (--draft-token-cost, or measured); -1: not measured yet.
  double draft_token_cost = -1;
  uint64_t parallel_sample_steps = 0;  // steps whose host rows were sampled on > 1 thread
  uint64_t idle_checks = 0;            // integrity walks run on going idle (CheckIfIdle)
  bool host_cache = false;             // --host-cache is on: the fields below are live
  KvHostTierStats host;
  uint64_t host_restore_tokens = 0;  // prompt tokens whose KV came back from the host tier
  bool ssd_cache = false;            // --ssd-cache is on: the fields below are live
  KvSsdTierStats ssd;
  uint64_t ssd_restore_tokens = 0;  // prompt tokens whose KV came back from the SSD tier
  uint64_t ssd_demoted_blocks = 0;  // pool blocks queued for the disk by idle demotion
};

class Engine {
 public:
  // Validates `config` against the runner (vocab, context length). The loop thread is not
  // started: call Start() to serve, or drive it with Step() from one thread (tests, offline).
  static StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config,
                                                  std::unique_ptr<ModelRunner> runner);
  ~Engine();  // Shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts the loop thread. Precondition: not started, not shut down.
  void Start();
  // Stops the loop (after its current step), then finishes every unfinished request with
  // kAbort. Idempotent; Submit fails afterwards.
  void Shutdown();

  // Queues a request. Thread-safe; never waits for the engine. Errors (nothing is queued):
  // InvalidArgument for bad parameters or an empty prompt, OutOfRange when prompt + max_tokens
  // exceeds the context, ResourceExhausted when it can never fit the KV pool / --kv-budget /
  // --memory-budget (the message says what to change), FailedPrecondition after Shutdown or for
  // an embedding request when the runner returns no hidden states (hidden_size() == 0).
  StatusOr<RequestHandle> Submit(Request request);

  // Where drafts come from (config.num_draft_tokens > 0; an NgramProposer over config.ngram
  // unless replaced); null: no drafts. Precondition: the loop thread is not running (offline
  // drivers and benchmarks swap it between runs).
  void SetDraftProposer(std::unique_ptr<DraftProposer> proposer) {
    proposer_ = std::move(proposer);
  }

  // Finishes the request with kAbort at the next step boundary and frees its blocks. Thread-safe;
  // a no-op for unknown or finished requests.
  void Abort(RequestId id);

  // Runs one iteration on the calling thread: takes in submissions and aborts, schedules,
  // executes, samples, emits. Returns false when there was nothing to run. Precondition: the
  // loop thread is not running.
  bool Step();

  EngineStats stats() const;  // thread-safe snapshot
  const EngineConfig& config() const { return config_; }
  int vocab_size() const { return vocab_size_; }
  int max_model_len() const { return config_.max_model_len; }
  // Width of the embeddings this engine returns (the model's hidden size); 0: none.
  int hidden_size() const { return hidden_size_; }

 private:
  struct Live {  // engine-thread state of one request
    std::shared_ptr<OutputStream> stream;
    SamplingParams params;
    uint64_t seed = 0;
    bool cached_reported = false;
    bool restore_probed = false;            // the SSD tier was asked for this request's prefix
    std::shared_ptr<GrammarState> grammar;  // null: unconstrained
    std::span<const uint32_t> mask;         // the grammar's mask for this step's row (its storage)
    // The tokens committed last (one, or a verify round's accepted drafts and the token after
    // them), which the grammar takes just before its next mask (on the grammar workers, while the
    // device runs the step: not on the engine thread's commit).
    std::vector<TokenId> grammar_pending;
    // A verify step's drafts (views into the plan until the step commits) and the masks of its
    // 1 + k rows, mask_words() each: row j's is the grammar's after drafts [0, j). After a draft
    // the grammar refuses, the rows repeat the last mask (their tokens cannot be accepted: the
    // refused draft is masked out of the row before them).
    std::span<const TokenId> drafts;
    std::vector<uint32_t> draft_masks;
    bool mask_needed = false;  // this step's row is sampled (not forced): it needs its mask
    Status grammar_error;      // the grammar refused a committed token: the request fails
    std::optional<ReasoningBudgetTracker> budget;  // none: no reasoning budget
    // Speculation back-off: after a round whose drafts were all rejected the row skips drafting
    // for spec_backoff decode steps, doubling (up to kMaxSpecBackoff) while rounds keep failing;
    // a round with an accepted draft resets it. Bounds what useless drafts cost a row.
    int spec_backoff = 0;
    int spec_skip = 0;
    bool spec_probe = false;    // the skip ends with at least one draft, to measure again
    bool spec_probing = false;  // the round being verified is such a probe
    AcceptanceRate acceptance;
    SpeculationUsage speculation;  // this request's totals (usage.speculation)
    // Embedding requests: how to pool, and the pool so far (the sum of the rows seen for mean,
    // the row itself for last / cls), in double for the mean's sum.
    std::optional<Pooling> pooling;
    std::vector<double> pooled;
    int num_pooled = 0;  // rows folded into `pooled`
  };
  struct Submission {
    RequestId id;
    Request request;
    std::shared_ptr<OutputStream> stream;
  };

  Engine(const EngineConfig& config, std::unique_ptr<ModelRunner> runner);
  void Loop();
  // Once the engine is idle: Scheduler::CheckIntegrity (every block free or cached, the queues
  // consistent), at most once per idle period; true when it ran. The serving loop runs it after
  // the step that emptied the engine; a caller driving Step() gets it from its next Step() while
  // idle.
  bool CheckIfIdle();
  void DrainInbox();
  // Finishes `id` everywhere (scheduler, live map, stream). No-op if not live.
  void FinishRequest(RequestId id, FinishReason reason, Status error = OkStatus(),
                     std::optional<TokenId> stop_token = std::nullopt);
  // `drained`: the inbox's last drain is in the scheduler now (in the snapshot): it stops
  // counting as pending at the same moment.
  void PublishStats(bool drained = false);
  // Each grammar-constrained seq of `plan` that samples this step: AdvanceGrammar (the pending
  // token, then its row's mask into Live::mask). With a grammar pool the rows are queued there
  // and WaitGrammarMasks waits for them (the runner executes the step meanwhile: nothing touches
  // a Live's grammar, mask or pending token until the wait); without, done here.
  void StartGrammarMasks(const StepPlan& plan);
  void WaitGrammarMasks();
  // The grammar takes `live`'s pending tokens (grammar_error when it refuses one), then computes
  // the mask when mask_needed (and the draft rows' masks, live.drafts). Touches only `live`: the
  // grammar workers run it.
  static void AdvanceGrammar(Live& live);
  // config.jump_forward, at admission and after `live`'s sampled token was emitted: the grammar
  // takes that token here (not on the workers: the forced tokens must join the request before
  // the next Schedule), then the tokens it forces are appended to the request and emitted,
  // leaving room for one more sampled token within max_tokens and the context.
  void JumpForward(RequestId id, Live& live);

  // The tiers' two paths (no-ops without one). AdvanceRestore, before Schedule: lands what the
  // restore in flight can (PumpRestore), then probes the front waiting request and starts its
  // restore. SpillNewBlocks, after the scheduler's Update: copies the blocks that just entered the
  // prefix cache out of the pool into the host tier and/or the SSD tier's write-behind queue.
  void AdvanceRestore();
  // Lands the restore's host blocks (all when nothing runs, else a bounded batch a step), then
  // the disk chunks already read (or waits for each when nothing runs); ends the restore once the
  // chain is in, broke, or no longer fits, and releases its request.
  void PumpRestore();
  // Copies blocks restore_hashes_[first, first + hosts.size()) from host memory (block i at
  // hosts[i]) into freshly allocated pool blocks pinned for `req` and caches them; adds the blocks
  // copied to *landed. False when they could not all land (no room left beside the running rows,
  // or the copy failed).
  bool LandRestored(const SchedRequest& req, int first, std::span<const uint8_t* const> hosts,
                    int* landed);
  void SpillNewBlocks();
  // SpillNewBlocks' two ways: through host-tier slots (held while the SSD writer writes them),
  // or, without a host tier, through a buffer the SSD writer frees.
  void SpillToHost(const std::vector<NewCachedBlock>& fresh);
  void SpillToSsd(const std::vector<NewCachedBlock>& fresh);
  // Waits for the host-tier copy in flight (pending_spill_), then publishes its slots and queues
  // them (and the blocks the host tier refused) for the SSD writer. Called at the next spill and
  // at shutdown; on going idle and before a restore probe with `wait` false: only a copy already
  // landed is finished (a request arriving just after a long prefill does not wait for that
  // prefill's copy out: its blocks are still in the pool). Returns whether none is in flight.
  bool FinishSpill(bool wait = true);
  // Idle demotion (config.ssd_demote_idle_ms): once the engine has been idle that long, the
  // prefix cache's blocks in the pool that are not on disk (their spill was dropped: a full
  // queue, a refused parent) are queued for the SSD writer, parents first, as much as its queue
  // takes; called again while some are left and the last call made progress.
  void DemoteIdle();
  // When Loop must wake while idle with nothing submitted (a copy out to poll, a demotion due);
  // nullopt: only a submission wakes it.
  std::optional<std::chrono::steady_clock::time_point> IdleWake() const;

  // The parts of Step, in order.
  // Tells each request's stream, on its first step, how many prompt tokens came from the cache.
  void ReportCachedTokens(const StepPlan& plan);
  // runner.Execute(plan), counted (and traced with config.step_trace).
  StatusOr<StepLogits> Execute(const StepPlan& plan);
  // Finishes every request of a step the runner failed with kError.
  void FailStep(const StepPlan& plan, const Status& error);
  // The StepSampler's view of each logits row of `plan` (views into live_ and the scheduler's
  // token lists: valid until Commit).
  std::vector<StepRow> Rows(const StepPlan& plan);
  // --draft-kind: the draft of a row that just emitted `live`'s tokens and decodes next, at most
  // as long as pays when a draft token costs `cost` output tokens (spec/draft_length.h).
  void ProposeDraft(RequestId id, Live& live, double cost);
  // What one draft token costs the next step, in output tokens, judged by `plan`'s shape.
  double DraftCost(const StepPlan& plan) const;
  bool EmitToken(RequestId id, Live& live, SampleResult& result, int num_output_tokens);
  // Records the step's results: failed rows finish their requests, accepted tokens go to the
  // scheduler and the streams, EOS / stop ids / length finish requests.
  void Commit(const StepPlan& plan, std::vector<StatusOr<SampleResult>>& sampled);
  // After Commit: folds the step's hidden rows (f32 [plan.num_hidden, hidden_size], plan order)
  // into each embedding request's pool, and finishes those whose prompt is now computed.
  void PoolEmbeddings(const StepPlan& plan, const std::vector<float>& hidden);

  EngineConfig config_;
  int vocab_size_ = 0;
  int hidden_size_ = 0;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  StepSampler sampler_;
  std::unordered_map<RequestId, Live> live_;  // engine thread only
  // config.num_grammar_threads workers (null for 0) and the count of this step's masks not done.
  std::unique_ptr<ThreadPool> grammar_pool_;
  std::mutex masks_mu_;
  std::condition_variable masks_cv_;
  size_t masks_pending_ = 0;
  std::vector<Live*> mask_rows_;          // this step's rows whose masks the workers compute
  std::atomic<size_t> next_mask_row_{0};  // the next of mask_rows_ a worker takes
  // The tiers (null: off). host_ is declared first so that it outlives the SSD writer's queue,
  // which holds host slots.
  std::unique_ptr<KvHostTier> host_;
  std::unique_ptr<KvSsdTier> ssd_;
  // The last step's blocks on their way into host slots (ModelRunner::StartKvBlockReads: the copy
  // overlaps the next step); the slots stay reserved, unpublished, until FinishSpill.
  struct PendingSpill {
    uint64_t ticket = 0;
    std::vector<int> slots;
    std::vector<NewCachedBlock> blocks;   // slots[i] holds blocks[i]
    std::vector<NewCachedBlock> refused;  // no slot: straight to the SSD tier after the others
  };
  std::optional<PendingSpill> pending_spill_;
  // Idle since idle_since_ (engine thread); demote_due_: DemoteIdle still to run in this idle
  // spell; demote_missing_: the blocks missing from the disk at its last call, which left some
  // for a later one (-1: none yet).
  bool idle_ = false;
  std::chrono::steady_clock::time_point idle_since_;
  bool demote_due_ = false;
  int64_t demote_missing_ = -1;
  bool demote_listed_ = false;               // demote_list_ is this idle spell's
  std::vector<NewCachedBlock> demote_list_;  // the pool's cached blocks not yet seen on disk
  uint64_t demoted_blocks_ = 0;
  // The restore in flight, for restore_id_ (restoring_): the blocks of its prefix past the pool's
  // part, the first restore_host_.size() held in the host tier, the rest read by restore_.
  bool restoring_ = false;
  RequestId restore_id_{0};
  int restore_first_ = 0;  // the prompt's block index of restore_hashes_[0]
  std::vector<BlockHash> restore_hashes_;
  BlockHash restore_parent_;  // the chain's hash before restore_hashes_[0]
  std::vector<std::shared_ptr<const uint8_t>> restore_host_;  // held; released as they land
  size_t restore_host_next_ = 0;                              // the first of them not landed yet
  std::shared_ptr<KvRestoreJob> restore_;                     // the disk part (null: none)
  int restore_host_landed_ = 0;  // blocks copied up from each tier so far
  int restore_landed_ = 0;
  uint64_t host_restore_tokens_ = 0;
  uint64_t restore_tokens_ = 0;
  bool spill_warned_ = false;
  uint64_t seed_base_ = 0;     // draws the seeds of unseeded requests
  bool idle_checked_ = false;  // CheckIntegrity ran since the engine became idle
  uint64_t finished_ = 0;      // stats counters, engine thread
  uint64_t steps_ = 0;
  uint64_t idle_checks_ = 0;
  uint64_t computed_tokens_ = 0;
  uint64_t generated_tokens_ = 0;
  uint64_t jump_forward_tokens_ = 0;
  uint64_t draft_tokens_ = 0, accepted_draft_tokens_ = 0;
  StepCost step_cost_;  // the steps' time against their size (--draft-token-cost auto)
  std::unique_ptr<DraftProposer> proposer_;
  static constexpr int kMaxSpecBackoff = 64;
  // Rows(): per verify seq of the step, its request's tokens followed by its drafts (what the
  // draft rows' sampling contexts point into), valid until the next Rows().
  std::vector<std::vector<TokenId>> verify_tokens_;
  // When the previous step's Execute started (config.step_trace).
  std::chrono::steady_clock::time_point prev_exec_start_;

  // Shared with submitting threads.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Submission> inbox_;
  std::vector<RequestId> aborts_;
  bool stop_ = false;
  bool shut_down_ = false;
  std::atomic<uint64_t> next_id_{1};
  std::thread thread_;

  mutable std::mutex stats_mu_;
  EngineStats stats_;
  uint64_t submitted_ = 0;  // under mu_
  // Rows taken from the inbox and not yet in the published snapshot (under mu_): stats() counts
  // them as pending, so a burst being admitted never reads as an empty queue.
  size_t draining_ = 0;
};

}  // namespace loom
