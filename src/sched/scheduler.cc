#include "sched/scheduler.h"

#include <algorithm>
#include <cstdio>

#include "base/check.h"

namespace loom {
namespace {

// Decimal GB (x 1e9), as the flags take them.
std::string Gb(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

}  // namespace

Status SchedulerConfig::Validate() const {
  if (max_batched_tokens < 1) {
    return InvalidArgumentError("--max-batched-tokens must be >= 1, got " +
                                std::to_string(max_batched_tokens));
  }
  if (max_num_seqs < 1) {
    return InvalidArgumentError("--batch must be >= 1, got " + std::to_string(max_num_seqs));
  }
  if (max_model_len < 1) {
    return InvalidArgumentError("max_model_len must be >= 1, got " + std::to_string(max_model_len));
  }
  if (bytes_per_token_kv < 0 || kv_budget_bytes < 0 || memory_budget_bytes < 0 || model_bytes < 0) {
    return InvalidArgumentError("KV/memory byte sizes must be >= 0");
  }
  if ((kv_budget_bytes > 0 || memory_budget_bytes > 0) && bytes_per_token_kv == 0) {
    return InvalidArgumentError(
        "--kv-budget / --memory-budget need bytes_per_token_kv (the model's KV size per token)");
  }
  if (memory_budget_bytes > 0 && memory_budget_bytes <= model_bytes) {
    return InvalidArgumentError("--memory-budget " + Gb(memory_budget_bytes) +
                                " does not even hold the model (" + Gb(model_bytes) + ")");
  }
  return OkStatus();
}

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager* kv) : config_(config), kv_(kv) {
  CHECK(kv_ != nullptr);
  CHECK_OK(config_.Validate());
}

Status Scheduler::CheckAdmission(int num_prompt_tokens, int max_new_tokens,
                                 bool prompt_only) const {
  if (num_prompt_tokens < 1) return InvalidArgumentError("the prompt is empty (0 tokens)");
  if (prompt_only && max_new_tokens != 0) {
    return InvalidArgumentError("a prompt-only request generates nothing (max_new_tokens " +
                                std::to_string(max_new_tokens) + ")");
  }
  if (!prompt_only && max_new_tokens < 1) {
    return InvalidArgumentError("max_tokens must be >= 1, got " + std::to_string(max_new_tokens));
  }
  const int64_t total = static_cast<int64_t>(num_prompt_tokens) + max_new_tokens;
  const std::string need = prompt_only ? std::to_string(num_prompt_tokens) + " input tokens"
                                       : std::to_string(num_prompt_tokens) + " prompt + " +
                                             std::to_string(max_new_tokens) +
                                             " max_tokens = " + std::to_string(total) + " tokens";
  if (total > config_.max_model_len) {
    return OutOfRangeError("the request needs " + need + ", but the model's context length is " +
                           std::to_string(config_.max_model_len) + " tokens; shorten the " +
                           (prompt_only ? "input" : "prompt or lower max_tokens"));
  }
  const int bs = kv_->block_size();
  const int64_t blocks = (total + bs - 1) / bs;
  if (blocks > kv_->num_blocks()) {
    return ResourceExhaustedError(
        "the request needs " + need + " of KV (" + std::to_string(blocks) + " blocks of " +
        std::to_string(bs) + "), but the KV pool holds only " + std::to_string(kv_->num_blocks()) +
        " blocks (" + std::to_string(static_cast<int64_t>(kv_->num_blocks()) * bs) +
        " tokens); lower max_tokens or enlarge the KV cache (--kv-cache-gb)");
  }
  const int64_t bytes = total * config_.bytes_per_token_kv;
  if (config_.kv_budget_bytes > 0 && bytes > config_.kv_budget_bytes) {
    return ResourceExhaustedError("the request needs " + need + " = " + Gb(bytes) +
                                  " of KV, more than --kv-budget " + Gb(config_.kv_budget_bytes) +
                                  " allows for all requests together; lower max_tokens or raise "
                                  "--kv-budget");
  }
  if (config_.memory_budget_bytes > 0) {
    const int64_t room = config_.memory_budget_bytes - config_.model_bytes;
    if (bytes > room) {
      return ResourceExhaustedError(
          "memory_admission: the request needs " + need + " = " + Gb(bytes) +
          " of KV, but --memory-budget " + Gb(config_.memory_budget_bytes) + " leaves " + Gb(room) +
          " after the model (" + std::to_string(room / config_.bytes_per_token_kv) +
          " tokens); lower max_tokens or raise --memory-budget");
    }
  }
  return OkStatus();
}

Status Scheduler::AddRequest(RequestId id, std::vector<TokenId> prompt, int max_new_tokens,
                             std::string extra_keys, HiddenRows hidden) {
  RETURN_IF_ERROR(
      CheckAdmission(static_cast<int>(prompt.size()), max_new_tokens, hidden != HiddenRows::kNone));
  if (requests_.contains(id)) {
    return InvalidArgumentError("duplicate request id " + std::to_string(id.value));
  }
  SchedRequest req;
  req.id = id;
  req.num_prompt_tokens = static_cast<int>(prompt.size());
  req.tokens = std::move(prompt);
  req.max_new_tokens = max_new_tokens;
  req.extra_keys = std::move(extra_keys);
  req.hidden = hidden;
  req.projected_kv_bytes =
      static_cast<int64_t>(req.num_prompt_tokens + max_new_tokens) * config_.bytes_per_token_kv;
  requests_.emplace(id, std::move(req));
  waiting_.push_back(id);
  return OkStatus();
}

ScheduledSeq Scheduler::MakeSeq(const SchedRequest& req, int num_new_tokens) const {
  ScheduledSeq seq;
  seq.request_id = req.id;
  seq.start_pos = req.num_computed_tokens;
  seq.tokens.assign(req.tokens.begin() + req.num_computed_tokens,
                    req.tokens.begin() + req.num_computed_tokens + num_new_tokens);
  auto table = kv_->block_table(req.id);
  seq.block_table.assign(table.begin(), table.end());
  const bool ends_prompt = req.num_computed_tokens + num_new_tokens == req.num_tokens();
  switch (req.hidden) {
    case HiddenRows::kNone:
      seq.num_logits = ends_prompt ? 1 : 0;
      seq.last_by_length =
          seq.num_logits > 0 && (req.num_output_tokens() + 1 >= req.max_new_tokens ||
                                 req.num_tokens() + 1 >= config_.max_model_len);
      break;
    case HiddenRows::kAll:
      seq.hidden_end = num_new_tokens;
      break;
    case HiddenRows::kLast:
      if (ends_prompt) {
        seq.hidden_begin = num_new_tokens - 1;
        seq.hidden_end = num_new_tokens;
      }
      break;
    case HiddenRows::kFirst:
      if (req.num_computed_tokens == 0) seq.hidden_end = 1;
      break;
  }
  return seq;
}

RequestId Scheduler::PreemptNewest() {
  CHECK(!running_.empty());
  RequestId victim = running_.back();
  running_.pop_back();
  SchedRequest& req = requests_.at(victim);
  kv_->Free(victim);
  req.num_computed_tokens = 0;
  req.draft.clear();
  req.running = false;
  ++req.num_preemptions;
  running_projected_kv_bytes_ -= req.projected_kv_bytes;
  waiting_.push_front(victim);
  ++num_preemptions_;
  return victim;
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  plan.block_size = kv_->block_size();
  plan.finished = std::move(finished_since_plan_);
  finished_since_plan_.clear();
  int budget = config_.max_batched_tokens;

  // 1. Running requests, oldest first.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    SchedRequest& req = requests_.at(running_[i]);
    const int remaining = req.num_tokens() - req.num_computed_tokens;
    CHECK_GT(remaining, 0) << req.id << " is running with nothing to compute";
    // A decode with a draft verifies as much of it as the budget, max_new_tokens (every draft and
    // the token after them must fit) and the context allow.
    int drafts = 0;
    if (remaining == 1 && !req.draft.empty()) {
      drafts = std::min({static_cast<int>(req.draft.size()), budget - 1,
                         req.max_new_tokens - req.num_output_tokens() - 1,
                         config_.max_model_len - req.num_tokens() - 1});
      drafts = std::max(drafts, 0);
    }
    int num_new = std::min(remaining, budget) + drafts;
    // Drafts never preempt anyone: without room for them the decode goes alone.
    if (drafts > 0 && !kv_->AllocateSlots(req.id, req.num_computed_tokens, num_new)) {
      num_new -= drafts;
      drafts = 0;
    }
    bool self_preempted = false;
    while (!kv_->AllocateSlots(req.id, req.num_computed_tokens, num_new)) {
      // A held request's pinned restore gives way before any running row does: its blocks stay
      // cached, merely evictable (it re-prefills what gets evicted).
      if (kv_->num_pinned_blocks() > 0) {
        kv_->ReleaseAllPins();
        continue;
      }
      RequestId victim = PreemptNewest();
      plan.preempted.push_back(victim);
      if (victim == req.id) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;  // it was the newest: nothing after it is running
    ScheduledSeq seq = MakeSeq(req, num_new - drafts);
    seq.tokens.insert(seq.tokens.end(), req.draft.begin(), req.draft.begin() + drafts);
    seq.num_logits += drafts;
    if (drafts > 0) seq.last_by_length = false;  // several tokens may come: no step ahead
    req.draft.clear();
    plan.seqs.push_back(std::move(seq));
    budget -= num_new;
  }

  // 2. Waiting requests, FIFO, unless this step already had to preempt (no room to grow).
  while (plan.preempted.empty() && !waiting_.empty() && budget > 0 &&
         num_running() < config_.max_num_seqs) {
    SchedRequest& req = requests_.at(waiting_.front());
    CHECK_EQ(req.num_computed_tokens, 0);
    if (req.held) break;  // its restore is still being read
    if (config_.kv_budget_bytes > 0 &&
        running_projected_kv_bytes_ + req.projected_kv_bytes > config_.kv_budget_bytes) {
      break;  // over-budget joiners wait for running requests to finish
    }
    // Prompt-only requests bypass the prefix cache (see the file comment).
    const bool cached = req.hidden == HiddenRows::kNone;
    const PrefixHit hit = cached ? kv_->ComputedPrefix(req.tokens, req.extra_keys) : PrefixHit{};
    const int num_new = std::min(req.num_tokens() - hit.num_tokens, budget);
    if (!kv_->AllocateSlots(req.id, 0, num_new, hit, /*record_prefix_query=*/cached)) break;
    waiting_.pop_front();
    req.num_computed_tokens = hit.num_tokens;
    if (req.num_cached_tokens < 0) req.num_cached_tokens = hit.num_tokens;
    req.running = true;
    running_.push_back(req.id);
    running_projected_kv_bytes_ += req.projected_kv_bytes;
    plan.seqs.push_back(MakeSeq(req, num_new));
    budget -= num_new;
  }

  // A pinned prefix not admitted now stays cached but evictable — unless its request is held
  // (its restore still lands, over several steps): pins never block a later step's admissions.
  for (RequestId id : kv_->pinned_requests()) {
    auto it = requests_.find(id);
    if (it == requests_.end() || !it->second.held) kv_->ReleasePins(id);
  }
  for (const ScheduledSeq& seq : plan.seqs) {
    plan.num_tokens += static_cast<int>(seq.tokens.size());
    plan.num_logits += seq.num_logits;
    plan.num_hidden += seq.num_hidden();
  }
  return plan;
}

void Scheduler::Update(const StepPlan& plan, std::span<const std::span<const TokenId>> accepted) {
  CHECK_EQ(accepted.size(), plan.seqs.size());
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& seq = plan.seqs[i];
    CHECK_LE(accepted[i].size(), static_cast<size_t>(seq.num_logits)) << seq.request_id;
    auto it = requests_.find(seq.request_id);
    if (it == requests_.end()) continue;  // finished while the step ran
    SchedRequest& req = it->second;
    CHECK(req.running) << req.id << " updated while not running";
    CHECK_EQ(req.num_computed_tokens, seq.start_pos) << req.id;
    if (seq.num_logits > 1) {  // drafts verified: the pending token and the accepted drafts
      CHECK(!accepted[i].empty()) << req.id << ": a verified seq accepts at least one token";
      req.num_computed_tokens += static_cast<int>(seq.tokens.size()) - seq.num_logits +
                                 static_cast<int>(accepted[i].size());
    } else {
      req.num_computed_tokens += static_cast<int>(seq.tokens.size());
    }
    // (Accepted drafts are computed tokens: they join the request's tokens before the commit.)
    req.tokens.insert(req.tokens.end(), accepted[i].begin(), accepted[i].end());
    if (req.hidden == HiddenRows::kNone) {  // prompt-only blocks stay out of the prefix cache
      kv_->CommitComputed(req.id, req.tokens, req.num_computed_tokens, req.extra_keys);
    }
  }
}

void Scheduler::AppendTokens(RequestId id, std::span<const TokenId> tokens) {
  auto it = requests_.find(id);
  CHECK(it != requests_.end()) << id;
  SchedRequest& req = it->second;
  CHECK_LE(req.num_output_tokens() + static_cast<int>(tokens.size()), req.max_new_tokens) << id;
  req.tokens.insert(req.tokens.end(), tokens.begin(), tokens.end());
}

void Scheduler::SetDraft(RequestId id, std::vector<TokenId> draft) {
  auto it = requests_.find(id);
  if (it != requests_.end()) it->second.draft = std::move(draft);
}

bool Scheduler::Finish(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  SchedRequest& req = it->second;
  if (req.running) {
    running_.erase(std::find(running_.begin(), running_.end(), id));
    running_projected_kv_bytes_ -= req.projected_kv_bytes;
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), id));
  }
  kv_->Free(id);
  requests_.erase(it);
  finished_since_plan_.push_back(id);
  return true;
}

void Scheduler::SetHeld(RequestId id, bool held) {
  SchedRequest& req = requests_.at(id);
  CHECK(!req.running) << id << " is running: only a waiting request can be held";
  req.held = held;
}

const SchedRequest* Scheduler::FrontWaiting() const {
  return waiting_.empty() ? nullptr : &requests_.at(waiting_.front());
}

const SchedRequest* Scheduler::Find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

void Scheduler::CheckIntegrity() const {
  kv_->CheckIntegrity();
  CHECK_EQ(running_.size() + waiting_.size(), requests_.size()) << "request lost from the queues";
  CHECK_LE(num_running(), config_.max_num_seqs);
  int64_t projected = 0;
  for (RequestId id : running_) {
    const SchedRequest& req = requests_.at(id);
    CHECK(req.running) << id;
    CHECK(!req.held) << id << " is running while held";
    CHECK_LT(req.num_computed_tokens, req.num_tokens()) << id << " fully computed but running";
    const int blocks = static_cast<int>(kv_->block_table(id).size());
    CHECK_GE(blocks * kv_->block_size(), req.num_computed_tokens) << id << ": table too short";
    projected += req.projected_kv_bytes;
  }
  CHECK_EQ(projected, running_projected_kv_bytes_);
  for (RequestId id : waiting_) {
    const SchedRequest& req = requests_.at(id);
    CHECK(!req.running) << id;
    CHECK_EQ(req.num_computed_tokens, 0) << id;
    CHECK(!kv_->HasRequest(id)) << id << " waits while holding blocks";
  }
}

}  // namespace loom
