// Scheduler: decides which requests advance each step and by how many tokens. One token budget,
// no phases (ARCHITECTURE.md §3): every request has num_tokens (prompt + generated) and
// num_computed_tokens (KV written); a step moves num_computed_tokens toward num_tokens.
//
//   Schedule():  1. running requests, oldest first: all their remaining tokens (1 when decoding,
//                   the next chunk when a prefill was split), capped by the token budget. When a
//                   request cannot get blocks, the newest running request is preempted (blocks
//                   freed, num_computed_tokens = 0, back to the FRONT of the waiting queue) until
//                   it fits, possibly itself.
//                2. if nothing was preempted: waiting requests in FIFO order, while rows
//                   (max_num_seqs), token budget and --kv-budget allow; prefix-cache hits make
//                   num_computed_tokens jump ahead. The first one that does not fit, or is held
//                   for a restore, stops admission (no overtaking). Pins the KV manager holds
//                   for waiting requests (restored prefixes) are released at the end.
//   Update():    after the runner ran the plan: num_computed_tokens += scheduled tokens, newly
//                full blocks enter the prefix cache, sampled tokens are appended.
//
// Speculative decoding: a decoding request given a draft (SetDraft) is scheduled as its pending
// token followed by the draft, with 1 + k logits rows (step_plan.h, "verify"). Update then counts
// as computed only the pending token and the drafts that were accepted (the rows' tokens matched
// them): the KV slots of rejected drafts lie past num_computed_tokens and are overwritten by the
// next step; their blocks stay in the table (never hashed: only computed tokens enter the cache).
//
// A prompt-only request (SchedRequest::hidden != kNone: an embedding) is scheduled like a prompt,
// chunked the same way, but asks for hidden rows instead of logits, generates nothing
// (max_new_tokens 0) and bypasses the prefix cache: it neither reuses cached blocks (mean pooling
// needs every token's hidden state) nor enters its blocks (embedding inputs would evict the
// generation prefixes worth keeping). The caller finishes it after the step that computes its
// last prompt token.
//
// Capacity is separate from the per-step budget: a request that can never fit (context length,
// pool size, --kv-budget, --memory-budget) is refused by CheckAdmission before it is queued.
// Pure CPU bookkeeping, deterministic; not thread-safe (owned by the engine thread).
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kv/kv_cache_manager.h"
#include "sched/step_plan.h"

namespace loom {

struct SchedulerConfig {
  int max_batched_tokens = 2048;    // tokens per step (--max-batched-tokens)
  int max_num_seqs = 8;             // rows per step (--batch)
  int max_model_len = 4096;         // the model's context length, tokens
  int64_t bytes_per_token_kv = 0;   // KV bytes of one token over all layers (K and V)
  int64_t kv_budget_bytes = 0;      // --kv-budget: cap on running requests' projected KV; 0 = off
  int64_t memory_budget_bytes = 0;  // --memory-budget: one request's KV must fit; 0 = off
  int64_t model_bytes = 0;          // weights etc., subtracted from memory_budget_bytes

  Status Validate() const;
};

// One request as the scheduler sees it.
struct SchedRequest {
  RequestId id;
  std::vector<TokenId> tokens;  // prompt followed by the generated tokens
  int num_prompt_tokens = 0;
  int num_computed_tokens = 0;  // tokens whose KV is written
  int max_new_tokens = 0;
  std::string extra_keys;                 // prefix-cache extra keys (adapter, media hashes, salt)
  HiddenRows hidden = HiddenRows::kNone;  // != kNone: prompt-only (see the file comment)
  int64_t projected_kv_bytes = 0;         // (prompt + max_new_tokens) * bytes_per_token_kv
  int num_cached_tokens = -1;             // prefix-cache hit at first admission; -1 until admitted
  int num_preemptions = 0;
  bool running = false;
  // Waiting for a restore from a tier below the pool (Engine): admission stops at it, as at any
  // request that does not fit yet; running requests keep stepping.
  bool held = false;
  // Speculative tokens to verify with the next decode (SetDraft): scheduled after the pending
  // token, as far as budget, max_new_tokens and the context allow; cleared by Schedule().
  std::vector<TokenId> draft;

  int num_tokens() const { return static_cast<int>(tokens.size()); }
  int num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
};

class Scheduler {
 public:
  // `kv` must outlive the scheduler; its block size is the plan's. Precondition: config.Validate().
  Scheduler(const SchedulerConfig& config, KvCacheManager* kv);

  // Whether a request of this size can ever run, judged against the static limits only (context
  // length, pool size, --kv-budget, --memory-budget). Thread-safe (reads constants only).
  // Errors: OutOfRange for the context length, ResourceExhausted for the memory limits (the
  // server maps it to 400 memory_admission); each message names the number and the flag.
  // max_new_tokens must be >= 1, or 0 for a prompt-only request (`prompt_only`).
  Status CheckAdmission(int num_prompt_tokens, int max_new_tokens, bool prompt_only = false) const;

  // Queues a request at the back of the waiting queue; `hidden` != kNone makes it prompt-only
  // (max_new_tokens must then be 0). Errors: CheckAdmission's, and InvalidArgument for an empty
  // prompt or a duplicate id.
  Status AddRequest(RequestId id, std::vector<TokenId> prompt, int max_new_tokens,
                    std::string extra_keys = "", HiddenRows hidden = HiddenRows::kNone);

  // Builds the next step (see the file comment). Mutates block tables, queues and preemption
  // state. An empty plan means nothing can run now (nothing queued, or nothing fits).
  StepPlan Schedule();

  // Records that `plan` was executed: every scheduled token's KV is computed, and accepted[i]
  // (at most plan.seqs[i].num_logits tokens) is appended to plan.seqs[i]'s request. For a seq with
  // k drafts (num_logits = 1 + k), accepted[i] is the drafts that matched followed by one more
  // token (the first mismatch's, or the token after the last draft): only the pending token and
  // those drafts count as computed. Seqs of
  // requests finished since Schedule() are skipped. A prompt-only request whose prompt is now
  // computed stays running until the caller Finish()es it (before CheckIntegrity).
  // Precondition: accepted.size() == plan.seqs.size().
  void Update(const StepPlan& plan, std::span<const std::span<const TokenId>> accepted);

  // Appends `tokens` to a request's output without sampling them (jump-forward: text its grammar
  // forces): Schedule() gives the request all its uncomputed tokens, as it does a prompt chunk,
  // and the last one's logits. Precondition: the request is known and its output stays within
  // max_new_tokens.
  void AppendTokens(RequestId id, std::span<const TokenId> tokens);

  // Sets the draft a running request's next decode verifies (see SchedRequest::draft); an empty
  // draft clears it. No-op for an unknown id.
  void SetDraft(RequestId id, std::vector<TokenId> draft);

  // Removes a request (completed, aborted or failed) wherever it is, freeing its blocks.
  // Returns false for an unknown id.
  bool Finish(RequestId id);

  // Holds (or releases) a waiting request: see SchedRequest::held. Precondition: it is waiting.
  void SetHeld(RequestId id, bool held);
  // The request admission considers next (the front of the waiting queue); null when none waits.
  const SchedRequest* FrontWaiting() const;

  const SchedRequest* Find(RequestId id) const;
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  bool HasWork() const { return !running_.empty() || !waiting_.empty(); }
  uint64_t num_preemptions() const { return num_preemptions_; }
  // Sum of the running requests' projected KV (what --kv-budget caps).
  int64_t running_projected_kv_bytes() const { return running_projected_kv_bytes_; }
  const SchedulerConfig& config() const { return config_; }
  const KvCacheManager& kv() const { return *kv_; }

  // CHECKs the queue/KV invariants and KvCacheManager::CheckIntegrity().
  void CheckIntegrity() const;

 private:
  // Frees the newest running request and puts it at the front of the waiting queue.
  RequestId PreemptNewest();
  ScheduledSeq MakeSeq(const SchedRequest& req, int num_new_tokens) const;

  SchedulerConfig config_;
  KvCacheManager* kv_;
  std::unordered_map<RequestId, SchedRequest> requests_;
  std::deque<RequestId> waiting_;   // FIFO; preempted requests re-enter at the front
  std::vector<RequestId> running_;  // admission order: oldest first, newest preempted first
  std::vector<RequestId> finished_since_plan_;
  int64_t running_projected_kv_bytes_ = 0;
  uint64_t num_preemptions_ = 0;
};

}  // namespace loom
