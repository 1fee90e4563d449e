// Engine tests against a fake ModelRunner whose logits are a pure function of the token history
// it reads back through the block table from its own "KV" (a token id per slot). A wrong block
// table, a block shared when it should not be, or a slot read before it was written changes the
// history and therefore the tokens, so "same output alone, batched, preempted and cached" is a
// real check of the scheduler and the KV manager.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_compose.h"
#include "grammar/mask_cache.h"
#include "grammar/matcher.h"
#include "kv/block_hash.h"
#include "sample/fake_device_backend.h"

namespace loom {
namespace {

using namespace std::chrono_literals;
using Tokens = std::vector<TokenId>;

constexpr int kVocab = 32;
constexpr TokenId kPoison = 31;  // a prompt starting with it gets NaN logits

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class FakeRunner : public ModelRunner {
 public:
  std::function<void()> on_execute_;  // called at the start of each step's Execute
  // `backend` holds the logits (a CpuBackend when null: every row sampled on the host).
  FakeRunner(int num_blocks, int block_size, int max_len, int vocab = kVocab,
             std::unique_ptr<CpuBackend> backend = nullptr)
      : block_size_(block_size),
        max_len_(max_len),
        vocab_(vocab),
        kv_(num_blocks * block_size, -1),
        backend_(backend != nullptr ? std::move(backend) : std::make_unique<CpuBackend>(1)) {}

  StatusOr<StepLogits> Execute(const StepPlan& plan) override {
    if (on_execute_) on_execute_();
    ASSIGN_OR_RETURN(std::vector<float> host, HostLogits(plan));
    StepLogits out;
    out.backend = backend_.get();
    const auto rows = static_cast<int64_t>(host.size() / static_cast<size_t>(vocab_));
    out.logits = HostTensor(DType::kF32, Shape{std::max<int64_t>(rows, 1), vocab_});
    std::copy(host.begin(), host.end(), out.logits.data_as<float>());
    for (int32_t k = 0; k < rows; ++k) out.rows.push_back(k);
    return out;
  }

  // The logits rows of `plan` (one per seq with num_logits 1), after writing its tokens' "KV".
  StatusOr<std::vector<float>> HostLogits(const StepPlan& plan) {
    CHECK_EQ(plan.block_size, block_size_);
    ++num_steps_;
    max_rows_ = std::max(max_rows_, static_cast<int>(plan.seqs.size()));
    max_step_tokens_ = std::max(max_step_tokens_, plan.num_tokens);
    if (fail_steps_ > 0) {
      --fail_steps_;
      return InternalError("injected runner failure");
    }
    // Write every scheduled token at its slot; two requests writing one slot is a sharing bug.
    std::map<int, RequestId> written;
    for (const ScheduledSeq& seq : plan.seqs) {
      for (size_t j = 0; j < seq.tokens.size(); ++j) {
        const int pos = seq.start_pos + static_cast<int>(j);
        const size_t b = pos / block_size_;
        if (b >= seq.block_table.size()) return InternalError("block table too short");
        const int slot = seq.block_table[b] * block_size_ + pos % block_size_;
        auto [it, fresh] = written.emplace(slot, seq.request_id);
        if (!fresh && it->second != seq.request_id) return InternalError("slot written twice");
        kv_[slot] = seq.tokens[j];
      }
    }
    std::vector<float> logits;
    for (const ScheduledSeq& seq : plan.seqs) {
      // Row r scores what follows the history up to its token (drafts: step_plan.h).
      for (int r = 0; r < seq.num_logits; ++r) {
        const int len =
            seq.start_pos + static_cast<int>(seq.tokens.size()) - seq.num_logits + r + 1;
        uint64_t h = 0x1234;
        TokenId first = -1;
        std::vector<TokenId> history;
        for (int pos = 0; pos < len; ++pos) {
          const int t = kv_[seq.block_table[pos / block_size_] * block_size_ + pos % block_size_];
          if (t < 0) return InternalError("read an unwritten KV slot");
          if (pos == 0) first = t;
          h = Mix(h ^ static_cast<uint64_t>(t));
          history.push_back(t);
        }
        // copy_bias_: an "induction head" favouring the token that followed the last earlier
        // occurrence of the current one, so that outputs repeat their context (drafts pay).
        TokenId copied = -1;
        for (int pos = len - 2; copy_bias_ > 0 && pos >= 0 && copied < 0; --pos) {
          if (history[pos] == history.back()) copied = history[pos + 1];
        }
        for (int v = 0; v < vocab_; ++v) {
          const double u = static_cast<double>(Mix(h ^ (v * 0x51ED27ull)) >> 11) * 0x1.0p-53;
          const float bias = v == copied ? copy_bias_ : 0.f;
          logits.push_back(first == kPoison ? NAN : static_cast<float>(u * 8.0 - 4.0) + bias);
        }
      }
    }
    return logits;
  }
  int vocab_size() const override { return vocab_; }
  int max_model_len() const override { return max_len_; }

  // The "KV" of a block as bytes: its slots' token ids (int32, little-endian on x86).
  KvBlockLayout kv_block_layout() const override {
    return {1, 1, 1, static_cast<int64_t>(block_size_ * sizeof(int))};
  }
  Status ReadKvBlocks(std::span<const BlockId> blocks, std::span<uint8_t* const> hosts) override {
    const size_t bb = block_size_ * sizeof(int);
    CHECK_EQ(hosts.size(), blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i) {
      std::memcpy(hosts[i], &kv_[blocks[i] * block_size_], bb);
    }
    ++kv_reads_;
    return OkStatus();
  }
  // With async_reads_, as a GPU's copy engine: the blocks are read now, but their bytes land in
  // host memory only at WaitKvBlockReads (until then the host blocks hold garbage).
  StatusOr<uint64_t> StartKvBlockReads(std::span<const BlockId> blocks,
                                       std::span<uint8_t* const> hosts) override {
    if (!async_reads_) return ModelRunner::StartKvBlockReads(blocks, hosts);
    const size_t bb = block_size_ * sizeof(int);
    PendingRead& p = pending_reads_[++read_tickets_];
    p.step = num_steps_;
    for (size_t i = 0; i < blocks.size(); ++i) {
      p.hosts.push_back(hosts[i]);
      p.bytes.emplace_back(bb);
      std::memcpy(p.bytes.back().data(), &kv_[blocks[i] * block_size_], bb);
      std::memset(hosts[i], 0x5A, bb);
    }
    ++kv_reads_;
    return read_tickets_;
  }
  // A copy has landed once a step ran after it started (it overlapped that step) or after
  // `read_polls_` polls; a wait before then counts as an early one.
  bool KvBlockReadsDone(uint64_t ticket) override {
    auto it = pending_reads_.find(ticket);
    return it == pending_reads_.end() || num_steps_ > it->second.step ||
           ++it->second.polls >= read_polls_;
  }
  void WaitKvBlockReads(uint64_t ticket) override {
    auto it = pending_reads_.find(ticket);
    if (it == pending_reads_.end()) return;
    if (num_steps_ == it->second.step && it->second.polls < read_polls_) ++early_waits_;
    for (size_t i = 0; i < it->second.hosts.size(); ++i) {
      std::memcpy(it->second.hosts[i], it->second.bytes[i].data(), it->second.bytes[i].size());
    }
    pending_reads_.erase(it);
  }
  Status WriteKvBlocks(std::span<const BlockId> blocks,
                       std::span<const uint8_t* const> hosts) override {
    const size_t bb = block_size_ * sizeof(int);
    CHECK_EQ(hosts.size(), blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i) {
      std::memcpy(&kv_[blocks[i] * block_size_], hosts[i], bb);
    }
    kv_writes_ += static_cast<int>(blocks.size());
    return OkStatus();
  }

  float copy_bias_ = 0.f;
  int block_size_;
  int max_len_;
  int vocab_;
  std::vector<int> kv_;  // [num_blocks * block_size] token written at each slot, -1 = never
  int num_steps_ = 0;
  int max_rows_ = 0;
  int max_step_tokens_ = 0;
  int fail_steps_ = 0;
  struct PendingRead {
    std::vector<uint8_t*> hosts;
    std::vector<std::vector<uint8_t>> bytes;
    int step = 0;  // num_steps_ when started
    int polls = 0;
  };
  bool async_reads_ = false;
  int read_polls_ = 2;
  int early_waits_ = 0;  // WaitKvBlockReads before the copy would have landed
  uint64_t read_tickets_ = 0;
  std::map<uint64_t, PendingRead> pending_reads_;
  int kv_reads_ = 0;   // ReadKvBlocks calls (spills)
  int kv_writes_ = 0;  // blocks written by WriteKvBlocks (restores)
  std::unique_ptr<CpuBackend> backend_;
};

struct Result {
  Tokens tokens;
  std::vector<float> logprobs;
  std::vector<std::pair<TokenId, float>> top_logprobs;  // every token's, in order
  std::optional<FinishReason> finish;
  std::optional<TokenId> stop_token;
  Status error;
  int cached_tokens = 0;
};

void Drain(OutputStream& s, Result& r) {
  while (std::optional<StreamChunk> c = s.TryPop()) {
    for (const TokenOutput& t : c->tokens) {
      r.tokens.push_back(t.token);
      r.logprobs.push_back(t.logprob);
      for (const TokenLogprob& lp : t.top_logprobs) {
        r.top_logprobs.emplace_back(lp.token, lp.logprob);
      }
    }
    r.cached_tokens = c->num_cached_tokens;
    if (c->finish_reason) {
      r.finish = c->finish_reason;
      r.stop_token = c->stop_token;
      r.error = c->error;
    }
  }
}

EngineConfig BaseConfig(int num_blocks) {
  EngineConfig cfg;
  cfg.num_blocks = num_blocks;
  cfg.block_size = 4;
  cfg.max_batched_tokens = 64;
  cfg.max_num_seqs = 8;
  cfg.eos_token_ids = {0};
  cfg.check_integrity_every_step = true;
  cfg.model_fingerprint = "fake";
  return cfg;
}

struct Made {
  std::unique_ptr<Engine> engine;
  FakeRunner* runner;
};

Made Make(const EngineConfig& cfg, int max_len = 256) {
  auto runner = std::make_unique<FakeRunner>(cfg.num_blocks, cfg.block_size, max_len);
  FakeRunner* raw = runner.get();
  auto engine = Engine::Create(cfg, std::move(runner));
  CHECK(engine.ok()) << engine.status().ToString();
  return {std::move(engine).value(), raw};
}

// Submits all requests at once, steps until idle, returns the results in order.
std::vector<Result> RunAll(Engine& engine, const std::vector<Request>& requests) {
  std::vector<RequestHandle> handles;
  for (const Request& r : requests) {
    auto h = engine.Submit(r);
    CHECK(h.ok()) << h.status().ToString();
    handles.push_back(*h);
  }
  std::vector<Result> results(requests.size());
  while (engine.Step()) {
    for (size_t i = 0; i < handles.size(); ++i) Drain(*handles[i].stream, results[i]);
  }
  for (size_t i = 0; i < handles.size(); ++i) Drain(*handles[i].stream, results[i]);
  return results;
}

Result RunSolo(const Request& r, int num_blocks = 64) {
  Made m = Make(BaseConfig(num_blocks));
  return RunAll(*m.engine, {r})[0];
}

Tokens Prompt(int shared, int distinct, int salt) {
  Tokens t;
  for (int i = 0; i < shared; ++i) t.push_back(1 + (i * 7) % 29);
  for (int i = 0; i < distinct; ++i) t.push_back(1 + (salt * 13 + i * 5) % 29);
  return t;
}

// A mix of sampling settings; every sampled request is seeded so runs are comparable.
std::vector<Request> Workload() {
  std::vector<Request> rs;
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.prompt = Prompt(/*shared=*/i % 2 == 0 ? 13 : 5, /*distinct=*/3 + 2 * i, i);
    r.params.max_tokens = 10 + i;
    r.params.seed = 100 + i;
    r.params.num_logprobs = 2;
    switch (i) {
      case 0:
        r.params.temperature = 0;
        break;
      case 1:
        r.params.top_k = 5;
        r.params.temperature = 0.8f;
        break;
      case 2:
        r.params.top_p = 0.9f;
        r.params.repetition_penalty = 1.3f;
        break;
      case 3:
        r.params.min_p = 0.1f;
        r.params.presence_penalty = 0.5f;
        r.params.frequency_penalty = 0.3f;
        break;
      case 4:
        r.params.xtc_probability = 0.5f;
        r.params.xtc_threshold = 0.05f;
        break;
      case 5:
        r.params.temperature = 1.5f;
        r.params.logit_bias = {{3, 2.0f}};
        break;
    }
    rs.push_back(r);
  }
  return rs;
}

void ExpectSame(const Result& got, const Result& want, size_t i) {
  EXPECT_EQ(got.tokens, want.tokens) << "request " << i;
  EXPECT_EQ(got.logprobs, want.logprobs) << "request " << i;
  EXPECT_EQ(got.finish, want.finish) << "request " << i;
  EXPECT_EQ(got.stop_token, want.stop_token) << "request " << i;
  EXPECT_TRUE(got.error.ok()) << got.error.ToString();
}

TEST(EngineTest, OutputsAreTheSameAloneBatchedPreemptedAndCached) {
  const std::vector<Request> work = Workload();
  std::vector<Result> solo;
  for (const Request& r : work) {
    solo.push_back(RunSolo(r));
    EXPECT_TRUE(solo.back().finish.has_value());
    EXPECT_FALSE(solo.back().tokens.empty());
  }

  // Batched in a tight pool with a small token budget: chunked prefill, preemption, recompute.
  EngineConfig tight = BaseConfig(/*num_blocks=*/12);
  tight.max_batched_tokens = 7;
  tight.max_num_seqs = 4;
  Made m = Make(tight);
  std::vector<Result> batched = RunAll(*m.engine, work);
  for (size_t i = 0; i < work.size(); ++i) ExpectSame(batched[i], solo[i], i);
  const EngineStats s = m.engine->stats();
  EXPECT_GT(s.preemptions, 0u);
  EXPECT_GT(s.prefix_cache_hits, 0u);  // preempted requests find their own blocks again
  EXPECT_EQ(m.runner->max_rows_, 4);
  EXPECT_LE(m.runner->max_step_tokens_, 7);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.active_rows, 0);
  EXPECT_EQ(s.finished_rows, work.size());

  // One after another through one engine: later requests hit earlier prompts' blocks.
  Made seq = Make(BaseConfig(64));
  for (size_t i = 0; i < work.size(); ++i) {
    Result r = RunAll(*seq.engine, {work[i]})[0];
    ExpectSame(r, solo[i], i);
    if (i >= 2) {
      EXPECT_GE(r.cached_tokens, 4) << i;  // the shared 13- or 5-token prefix
    }
  }
  EXPECT_GE(seq.engine->stats().prefix_cache_hits, 4u);
}

// Speculative decoding (n-gram drafts) changes nothing in the output: every sampling setting
// of the workload, alone and in a tight batch with chunked prefill and preemption, gives the
// tokens, logprobs and finish of the run without drafts, while drafts are both accepted and
// rejected (the fake model copies its context, so n-grams match).
// What stats() says while a step runs: the rows just taken from the inbox into the scheduler
// are pending from the moment Submit returned (a queue cap reads this: a burst being admitted
// must not look like an empty queue until the step ends).
TEST(EngineTest, RowsBeingAdmittedCountAsPendingDuringTheStep) {
  EngineConfig cfg = BaseConfig(64);
  cfg.max_num_seqs = 1;
  Made m = Make(cfg);
  std::vector<int> seen;
  m.runner->on_execute_ = [&] { seen.push_back(m.engine->stats().pending_rows); };
  std::vector<Request> work(6);
  for (size_t i = 0; i < work.size(); ++i) {
    work[i].prompt = Prompt(/*shared=*/4, /*distinct=*/4, static_cast<int>(i));
    work[i].params.max_tokens = 2;
  }
  RunAll(*m.engine, work);
  ASSERT_FALSE(seen.empty());
  // Six waiting as of the drain (the snapshot before the step scheduled one of them), or five;
  // before the drain published its rows this read 0: neither in the inbox nor in the snapshot.
  EXPECT_GE(seen[0], 5);
  EXPECT_LE(seen[0], 6);
}

TEST(EngineTest, NgramSpeculationIsLossless) {
  std::vector<Request> work = Workload();
  for (int i = 0; i < 3; ++i) {  // greedy rows with long outputs over repetitive prompts
    Request r;
    r.prompt = Prompt(/*shared=*/9, /*distinct=*/6, 20 + i);
    r.prompt.insert(r.prompt.end(), r.prompt.begin(), r.prompt.end());
    r.params.temperature = 0;
    r.params.max_tokens = 40;
    r.params.num_logprobs = i == 0 ? 1 : -1;
    work.push_back(r);
  }
  for (Request& r : work) r.params.max_tokens += 20;
  auto run = [&](EngineConfig cfg) {
    Made m = Make(cfg);
    m.runner->copy_bias_ = 6.f;
    std::vector<Result> out = RunAll(*m.engine, work);
    const EngineStats s = m.engine->stats();
    EXPECT_EQ(s.kv_blocks_used, 0);
    return std::make_pair(out, s);
  };
  EngineConfig plain = BaseConfig(64);
  EngineConfig spec = plain;
  spec.num_draft_tokens = 4;
  spec.draft_token_cost = 0;  // drafts are free: every row drafts 4
  const auto [want, plain_stats] = run(plain);
  EXPECT_EQ(plain_stats.draft_tokens, 0u);
  const auto [got, s] = run(spec);
  for (size_t i = 0; i < work.size(); ++i) ExpectSame(got[i], want[i], i);
  EXPECT_GT(s.accepted_draft_tokens, 20u);
  EXPECT_LT(s.accepted_draft_tokens, s.draft_tokens);
  EXPECT_LT(s.steps, plain_stats.steps);  // accepted drafts saved steps

  EngineConfig tight = spec;
  tight.num_blocks = 28;
  tight.max_batched_tokens = 9;
  tight.max_num_seqs = 4;
  const auto [batched, ts] = run(tight);
  for (size_t i = 0; i < work.size(); ++i) ExpectSame(batched[i], want[i], i);
  EXPECT_GT(ts.preemptions, 0u);
  EXPECT_GT(ts.accepted_draft_tokens, 0u);
}

// Drafts of a model that never follows them (no copy bias: a row's next token is unrelated to
// its n-grams) cost a row ever less: after each round with nothing accepted it waits twice as
// many steps before drafting again. The output is unchanged.
TEST(EngineTest, RejectedDraftsBackOff) {
  std::vector<Request> work;
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.prompt = Prompt(/*shared=*/9, /*distinct=*/6, 40 + i);
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    r.params.max_tokens = 120;
    work.push_back(r);
  }
  EngineConfig spec = BaseConfig(256);
  spec.num_draft_tokens = 4;
  spec.draft_token_cost = 0;
  Made plain = Make(BaseConfig(256));
  Made m = Make(spec);
  const std::vector<Result> want = RunAll(*plain.engine, work);
  const std::vector<Result> got = RunAll(*m.engine, work);
  for (size_t i = 0; i < work.size(); ++i) ExpectSame(got[i], want[i], i);
  const EngineStats s = m.engine->stats();
  EXPECT_GT(s.draft_tokens, 0u);
  // Without the back-off nearly every one of the 480 decodes would verify 4 drafts (1-gram
  // matches abound in a 32-token vocabulary).
  EXPECT_LT(s.draft_tokens, 480u / 2) << s.accepted_draft_tokens << " accepted";
}

// The draft length follows what a draft costs (--draft-token-cost pinned here; measured by
// default): free drafts are all made, drafts that cost a whole output token (a compute-bound
// step) only as the back-off's probes, and in between a row drafts fewer, surer tokens. The
// output never changes.
TEST(EngineTest, RowsDraftOnlyWhatPays) {
  std::vector<Request> work;
  for (int i = 0; i < 3; ++i) {
    Request r;
    r.prompt = Prompt(/*shared=*/9, /*distinct=*/6, 60 + i);
    r.prompt.insert(r.prompt.end(), r.prompt.begin(), r.prompt.end());
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    r.params.max_tokens = 100;
    work.push_back(r);
  }
  auto run = [&](double cost) {
    EngineConfig cfg = BaseConfig(256);
    cfg.num_draft_tokens = 8;
    cfg.draft_token_cost = cost;
    Made m = Make(cfg);
    m.runner->copy_bias_ = 6.f;  // the model follows its n-grams often, not always
    std::vector<Result> out = RunAll(*m.engine, work);
    const EngineStats s = m.engine->stats();
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.draft_token_cost, cost);
    return std::make_pair(out, s);
  };
  const auto [want, free_stats] = run(0);
  const auto [mid, mid_stats] = run(0.1);
  const auto [dear, dear_stats] = run(1e3);
  for (size_t i = 0; i < work.size(); ++i) {
    ExpectSame(mid[i], want[i], i);
    ExpectSame(dear[i], want[i], i);
  }
  const auto rate = [](const EngineStats& s) {
    return static_cast<double>(s.accepted_draft_tokens) / static_cast<double>(s.draft_tokens);
  };
  std::printf("drafted / accepted: free %llu / %llu, 0.1 %llu / %llu, 1e3 %llu / %llu\n",
              static_cast<unsigned long long>(free_stats.draft_tokens),
              static_cast<unsigned long long>(free_stats.accepted_draft_tokens),
              static_cast<unsigned long long>(mid_stats.draft_tokens),
              static_cast<unsigned long long>(mid_stats.accepted_draft_tokens),
              static_cast<unsigned long long>(dear_stats.draft_tokens),
              static_cast<unsigned long long>(dear_stats.accepted_draft_tokens));
  EXPECT_GT(free_stats.accepted_draft_tokens, 0u);
  EXPECT_LT(mid_stats.draft_tokens, free_stats.draft_tokens);
  EXPECT_GT(mid_stats.accepted_draft_tokens, 0u);
  EXPECT_GT(rate(mid_stats), rate(free_stats));
  // c = rows / tokens = 1: no draft is worth it; one-draft probes after 1, 2, 4 ... 64 steps.
  EXPECT_LT(dear_stats.draft_tokens, 3u * 12);
}

// The replay proposer (benchmarks) drafts the recorded output: at acceptance 1 every draft is
// accepted and a row decodes 1 + k tokens a step; at 0 none is; the output is the same.
TEST(EngineTest, ReplayedDraftsAreAcceptedAtTheChosenRate) {
  std::vector<Request> work;
  for (int i = 0; i < 3; ++i) {
    Request r;
    r.prompt = Prompt(/*shared=*/5, /*distinct=*/5, 80 + i);
    r.params.temperature = i == 2 ? 0.9f : 0.f;  // a seeded sampled row replays too
    r.params.seed = 11;
    r.params.ignore_eos = true;
    r.params.max_tokens = 41;
    work.push_back(r);
  }
  Made plain = Make(BaseConfig(256));
  const std::vector<Result> want = RunAll(*plain.engine, work);
  const uint64_t plain_steps = plain.engine->stats().steps;
  for (const double accept : {1.0, 0.0}) {
    EngineConfig cfg = BaseConfig(256);
    cfg.num_draft_tokens = 4;
    cfg.draft_token_cost = 0;
    Made m = Make(cfg);
    auto replay = std::make_unique<ReplayProposer>(accept, kVocab);
    for (size_t i = 0; i < work.size(); ++i) replay->Record(work[i].prompt, want[i].tokens);
    m.engine->SetDraftProposer(std::move(replay));
    const std::vector<Result> got = RunAll(*m.engine, work);
    for (size_t i = 0; i < work.size(); ++i) ExpectSame(got[i], want[i], i);
    const EngineStats s = m.engine->stats();
    EXPECT_GT(s.draft_tokens, 0u) << accept;
    if (accept == 1.0) {
      EXPECT_EQ(s.accepted_draft_tokens, s.draft_tokens);
      // 40 decodes a row in 8 steps of 1 + 4 tokens, plus the prefill.
      EXPECT_LE(s.steps, 10u) << plain_steps;
    } else {
      EXPECT_EQ(s.accepted_draft_tokens, 0u);
    }
  }
  // No proposer: no drafts.
  EngineConfig cfg = BaseConfig(256);
  cfg.num_draft_tokens = 4;
  Made none = Make(cfg);
  none.engine->SetDraftProposer(nullptr);
  RunAll(*none.engine, work);
  EXPECT_EQ(none.engine->stats().draft_tokens, 0u);
}

// A grammar over the fake model's 32 tokens: 0 is EOS, 1-10 the digits, 11-26 a-p, and a few
// multi-byte tokens, so that a token can cross a grammar boundary ("0," ends the number).
struct GrammarFixture {
  std::shared_ptr<const CompiledGrammar> grammar;
  std::unique_ptr<TokenVocabulary> vocab;
  static std::vector<std::string> Bytes() {
    std::vector<std::string> b(kVocab);
    for (int d = 0; d < 10; ++d) b[1 + d] = std::string(1, static_cast<char>('0' + d));
    for (int c = 0; c < 16; ++c) b[11 + c] = std::string(1, static_cast<char>('a' + c));
    b[27] = "12";
    b[28] = "ab";
    b[29] = "0,";
    b[30] = ",b";
    b[31] = "?";
    return b;
  }
  GrammarFixture() {
    auto g = CompileGbnf(R"(root ::= [0-9]+ "," [a-p] [a-p])");
    CHECK(g.ok()) << g.status().ToString();
    grammar = *CompiledGrammar::Compile(*g);
    vocab =
        std::make_unique<TokenVocabulary>(Bytes(), std::vector<TokenId>{}, std::vector<TokenId>{0});
  }
  std::string Text(const Tokens& t) const {
    std::string s;
    for (TokenId id : t) s += vocab->token_bytes(id);
    return s;
  }
  bool Matches(const std::string& s) const {
    GrammarMatcher m(grammar);
    return m.AcceptBytes(s) && m.IsAccepting();
  }
};

// Constrained and free rows in one batch (with chunked prefill and preemption): the free rows give
// exactly their solo output, the constrained rows a document of their grammar ended by EOS, the
// same one alone and batched (the grammar state lives with the request, so recomputing its KV
// after a preemption does not touch it).
// Drafts compose with grammars: each draft row is sampled under the grammar's mask after the
// drafts before it, a draft the grammar refuses is rejected by its row's mask, and the accepted
// tokens reach the grammar at the next step: the output equals the one without drafts, greedy
// and sampled, documents that end (EOS inside a verify round) and documents cut by max_tokens,
// masks on the engine thread and on a pool.
TEST(EngineTest, DraftsUnderAGrammarAreCheckedAgainstItsMasks) {
  const GrammarFixture fx;
  // A long document (letters and digits, then ",xy") and the fixture's short one.
  auto long_doc = CompileGbnf(R"(root ::= [a-p0-9]+ "," [a-p] [a-p])");
  ASSERT_TRUE(long_doc.ok());
  const std::shared_ptr<const CompiledGrammar> grammars[] = {*CompiledGrammar::Compile(*long_doc),
                                                             fx.grammar};
  auto work = [&] {
    std::vector<Request> w;
    for (int i = 0; i < 6; ++i) {
      Request r;
      r.prompt = Prompt(/*shared=*/9, /*distinct=*/6, 90 + i);
      r.prompt.insert(r.prompt.end(), r.prompt.begin(), r.prompt.end());
      r.params.max_tokens = 48;
      r.params.seed = 5 + i;
      r.params.temperature = i % 3 == 0 ? 0.0f : 0.8f;
      r.grammar = std::make_shared<GrammarState>(grammars[i % 2], fx.vocab.get());
      w.push_back(r);
    }
    return w;
  };
  auto run = [&](int num_draft_tokens, int grammar_threads) {
    EngineConfig cfg = BaseConfig(256);
    cfg.num_draft_tokens = num_draft_tokens;
    cfg.draft_token_cost = 0;
    cfg.num_grammar_threads = grammar_threads;
    Made m = Make(cfg);
    m.runner->copy_bias_ = 6.f;
    std::vector<Result> out = RunAll(*m.engine, work());
    const EngineStats st = m.engine->stats();
    EXPECT_EQ(st.kv_blocks_used, 0);
    return std::make_pair(out, st);
  };
  const auto [want, plain] = run(0, 0);
  int ended = 0;
  for (const Result& r : want) ended += r.finish == FinishReason::kStop;
  EXPECT_GT(ended, 0);  // some documents end, so EOS meets the drafts
  for (const int threads : {0, 2}) {
    SCOPED_TRACE("num_grammar_threads " + std::to_string(threads));
    const auto [got, st] = run(4, threads);
    for (size_t i = 0; i < got.size(); ++i) {
      ExpectSame(got[i], want[i], i);
      EXPECT_TRUE(got[i].error.ok()) << i << ": " << got[i].error.ToString();
    }
    EXPECT_GT(st.accepted_draft_tokens, 10u);
    EXPECT_LT(st.accepted_draft_tokens, st.draft_tokens);  // some drafts were refused
    EXPECT_LT(st.steps, plain.steps);
  }
}

TEST(EngineTest, GrammarRowsAreValidAndFreeRowsUnchangedInAMixedBatch) {
  const GrammarFixture fx;
  MaskCache* shared = nullptr;  // set for the arms whose constrained rows share masks
  auto constrained = [&](int i) {
    Request r;
    r.prompt = Prompt(9, 4 + i, 40 + i);
    r.params.max_tokens = 30;
    r.params.seed = 7 + i;
    r.params.temperature = i == 0 ? 0.0f : 1.0f;
    r.params.num_logprobs = i == 2 ? 3 : -1;
    r.grammar = std::make_shared<GrammarState>(fx.grammar, fx.vocab.get(),
                                               GrammarState::kDefaultMaskCacheEntries,
                                               GrammarState::kDefaultMaxDfaStates, shared);
    return r;
  };
  auto work = [&] {
    std::vector<Request> w = Workload();
    for (int i = 0; i < 3; ++i) w.insert(w.begin() + 2 * i, constrained(i));
    return w;
  };
  std::vector<Result> solo;
  for (const Request& r : work()) solo.push_back(RunSolo(r));  // fresh grammar states each
  // Masks on the engine thread after each step, and on a pool of two during it; each request's
  // own masks, and masks shared through one cache (rows in one state get one mask's storage).
  MaskCache cache(/*capacity=*/8);
  for (int arm = 0; arm < 4; ++arm) {
    const int grammar_threads = arm % 2 == 0 ? 0 : 2;
    shared = arm >= 2 ? &cache : nullptr;
    SCOPED_TRACE("num_grammar_threads " + std::to_string(grammar_threads) +
                 (shared != nullptr ? ", shared masks" : ""));
    EngineConfig tight = BaseConfig(/*num_blocks=*/16);
    tight.max_batched_tokens = 7;
    tight.max_num_seqs = 5;
    tight.num_grammar_threads = grammar_threads;
    Made m = Make(tight);
    std::vector<Request> batch = work();
    std::vector<Result> batched = RunAll(*m.engine, batch);
    int num_constrained = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      ExpectSame(batched[i], solo[i], i);
      if (batch[i].grammar == nullptr) continue;
      ++num_constrained;
      EXPECT_EQ(batched[i].finish, FinishReason::kStop) << i;
      EXPECT_EQ(batched[i].stop_token, 0) << i;
      const std::string text = fx.Text(batched[i].tokens);
      EXPECT_TRUE(fx.Matches(text)) << i << ": \"" << text << "\"";
      EXPECT_TRUE(batch[i].grammar->IsTerminated()) << i;
    }
    EXPECT_EQ(num_constrained, 3);
    if (shared != nullptr) {
      EXPECT_GT(cache.hits(), 0u);
    }
    EXPECT_GT(m.engine->stats().preemptions, 0u);
    EXPECT_EQ(m.engine->stats().kv_blocks_used, 0);
  }
  // Unconstrained, the same prompts do not give such documents: the mask is what made them.
  Request free = constrained(1);
  free.grammar = nullptr;
  EXPECT_FALSE(fx.Matches(fx.Text(RunSolo(free).tokens)));
}

// Jump-forward: the text a grammar forces is appended without sampling (longest token first, its
// last token sampled), computed with the next token. The rows' documents are valid and end by
// EOS, the same alone and batched (with chunked prefill and preemption), take fewer steps than
// sampling every token, and the free rows of the batch keep exactly their solo output; a
// max_tokens that cuts a forced run still ends at exactly max_tokens.
TEST(EngineTest, JumpForwardAppendsForcedTextAndKeepsFreeRowsUnchanged) {
  const GrammarFixture fx;
  // "abcd" forced at the start ("ab" "c" appended at admission, the model samples "d"), "abcdef"
  // after the comma.
  auto g = CompileGbnf(R"(root ::= "abcd" [0-9]+ ",abcdef" [a-p])");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const auto grammar = *CompiledGrammar::Compile(*g);
  auto matches = [&](const std::string& text) {
    GrammarMatcher m(grammar);
    return m.AcceptBytes(text) && m.IsAccepting();
  };
  auto constrained = [&](int i, int max_tokens) {
    Request r;
    r.prompt = Prompt(9, 4 + i, 70 + i);
    r.params.max_tokens = max_tokens;
    r.params.seed = 17 + i;
    r.params.temperature = i == 0 ? 0.0f : 1.0f;
    r.grammar = std::make_shared<GrammarState>(grammar, fx.vocab.get());
    return r;
  };
  auto work = [&] {
    std::vector<Request> w = Workload();
    for (int i = 0; i < 3; ++i) w.insert(w.begin() + 2 * i, constrained(i, 40));
    return w;
  };
  EngineConfig jf = BaseConfig(/*num_blocks=*/64);
  jf.jump_forward = true;
  std::vector<Result> solo, solo_jf;
  for (const Request& r : work()) {
    Request fresh = r;  // a grammar state of its own
    if (r.grammar != nullptr)
      fresh.grammar = std::make_shared<GrammarState>(grammar, fx.vocab.get());
    solo.push_back(RunSolo(r));
    Made m = Make(jf);
    solo_jf.push_back(RunAll(*m.engine, {fresh})[0]);
    if (r.grammar == nullptr) continue;
    // A step samples one token; forced tokens take none: steps = sampled tokens (the EOS among
    // them, which is not emitted) = emitted + 1 - forced. The prompt (with the tokens forced at
    // admission) fits one step.
    const auto forced = static_cast<int>(m.engine->stats().jump_forward_tokens);
    EXPECT_GE(forced, 6);  // "ab" "c" at admission, "ab" "c" "d" "e" after the comma
    EXPECT_EQ(m.runner->num_steps_, static_cast<int>(solo_jf.back().tokens.size()) + 1 - forced);
  }
  for (int arm = 0; arm < 2; ++arm) {
    SCOPED_TRACE(arm == 0 ? "masks on the engine thread" : "two grammar threads");
    EngineConfig tight = BaseConfig(/*num_blocks=*/16);
    tight.max_batched_tokens = 7;
    tight.max_num_seqs = 5;
    tight.num_grammar_threads = arm == 0 ? 0 : 2;
    tight.jump_forward = true;
    Made m = Make(tight);
    std::vector<Request> batch = work();
    std::vector<Result> batched = RunAll(*m.engine, batch);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].grammar == nullptr) {
        ExpectSame(batched[i], solo[i], i);  // free rows: as without jump-forward
        continue;
      }
      ExpectSame(batched[i], solo_jf[i], i);
      EXPECT_EQ(batched[i].finish, FinishReason::kStop) << i;
      const std::string text = fx.Text(batched[i].tokens);
      EXPECT_TRUE(matches(text)) << i << ": \"" << text << "\"";
    }
    const EngineStats stats = m.engine->stats();
    EXPECT_GE(stats.jump_forward_tokens, 3u * 6u);  // "ab" "c" and "ab" "c" "d" "e" per row
    EXPECT_GT(stats.preemptions, 0u);
    EXPECT_EQ(stats.kv_blocks_used, 0);
  }
  // max_tokens inside a forced run: the run is cut so that the reply ends at exactly max_tokens.
  for (int max_tokens = 1; max_tokens <= 8; ++max_tokens) {
    Made m = Make(jf);
    const Result r = RunAll(*m.engine, {constrained(1, max_tokens)})[0];
    EXPECT_EQ(r.finish, FinishReason::kLength) << max_tokens;
    EXPECT_EQ(static_cast<int>(r.tokens.size()), max_tokens);
  }
}

// Reasoning budgets. The fake model's tokens 28-30 play the markers: the close marker is {29, 30}
// and the forced close {28, 29, 30} (as "\n</think>\n\n" ends a Qwen3 section).
ReasoningBudget Budget(int max_tokens, bool starts_open = true, Tokens open = {}) {
  ReasoningBudget b;
  b.max_tokens = max_tokens;
  b.starts_open = starts_open;
  b.open = std::move(open);
  b.close = {29, 30};
  b.forced = {28, 29, 30};
  return b;
}

Request Budgeted(int salt, int max_tokens, std::optional<ReasoningBudget> budget) {
  Request r;
  r.prompt = Prompt(9, 3 + salt, 60 + salt);
  r.params.max_tokens = max_tokens;
  r.params.seed = 11 + salt;
  r.params.temperature = salt % 2 == 0 ? 0.0f : 0.9f;
  r.params.ignore_eos = true;
  r.reasoning_budget = std::move(budget);
  return r;
}

// Whether `t` holds `sub` anywhere.
bool HasRun(const Tokens& t, const Tokens& sub) {
  return std::search(t.begin(), t.end(), sub.begin(), sub.end()) != t.end();
}

// A reply that starts inside the section, never closed by the model: exactly N reasoning tokens
// (those it samples without a budget: forcing changes nothing before it), then the forced close,
// then sampling again for the answer, which now follows the close.
TEST(EngineTest, ReasoningBudgetForcesTheCloseAfterNTokens) {
  for (int salt : {0, 1}) {
    SCOPED_TRACE("salt " + std::to_string(salt));
    const Result free = RunSolo(Budgeted(salt, 20, std::nullopt));
    ASSERT_EQ(free.tokens.size(), 20u);
    ASSERT_FALSE(HasRun(free.tokens, {29, 30}));  // the model never closes by itself
    for (int n : {1, 5}) {
      const Result got = RunSolo(Budgeted(salt, 20, Budget(n)));
      ASSERT_EQ(got.tokens.size(), 20u) << n;
      EXPECT_EQ(Tokens(got.tokens.begin(), got.tokens.begin() + n),
                Tokens(free.tokens.begin(), free.tokens.begin() + n));
      EXPECT_EQ(Tokens(got.tokens.begin() + n, got.tokens.begin() + n + 3), (Tokens{28, 29, 30}));
      // The answer is sampled (a solo run of prompt + reasoning + close continues the same way).
      Request cont = Budgeted(salt, 20 - n - 3, std::nullopt);
      cont.prompt.insert(cont.prompt.end(), got.tokens.begin(), got.tokens.begin() + n + 3);
      const Result answer = RunSolo(cont);
      if (salt == 0) {  // greedy: the continuation is the same tokens
        EXPECT_EQ(Tokens(got.tokens.begin() + n + 3, got.tokens.end()), answer.tokens);
      }
      EXPECT_EQ(got.finish, FinishReason::kLength);
    }
  }
}

// Budget 0 closes the section at once; a reply that opens the section itself (its first tokens
// are the open marker) starts counting after the marker; one that does not is never forced.
TEST(EngineTest, ReasoningBudgetZeroAndModelOpenedSections) {
  const Result zero = RunSolo(Budgeted(0, 6, Budget(0)));
  ASSERT_EQ(zero.tokens.size(), 6u);
  EXPECT_EQ(Tokens(zero.tokens.begin(), zero.tokens.begin() + 3), (Tokens{28, 29, 30}));

  const Result free = RunSolo(Budgeted(0, 12, std::nullopt));
  ASSERT_EQ(free.tokens.size(), 12u);
  // The model's own first two tokens as the open marker: two reasoning tokens after them.
  const Tokens open(free.tokens.begin(), free.tokens.begin() + 2);
  const Result opened = RunSolo(Budgeted(0, 12, Budget(2, /*starts_open=*/false, open)));
  EXPECT_EQ(Tokens(opened.tokens.begin(), opened.tokens.begin() + 4),
            Tokens(free.tokens.begin(), free.tokens.begin() + 4));
  EXPECT_EQ(Tokens(opened.tokens.begin() + 4, opened.tokens.begin() + 7), (Tokens{28, 29, 30}));
  // A marker the reply does not begin with: no section, the free output.
  const Tokens other = {static_cast<TokenId>(free.tokens[0] == 5 ? 6 : 5)};
  EXPECT_EQ(RunSolo(Budgeted(0, 12, Budget(2, false, other))).tokens, free.tokens);
}

// A model that closes the section itself before the budget is spent is left alone; the same
// budget with a close marker it never writes does force (so the first check can fail).
TEST(EngineTest, ReasoningBudgetLeavesASectionClosedBeforeTheBudget) {
  for (int salt : {0, 1}) {
    const Result free = RunSolo(Budgeted(salt, 16, std::nullopt));
    ASSERT_EQ(free.tokens.size(), 16u);
    ReasoningBudget b = Budget(8);
    b.close = {free.tokens[3], free.tokens[4]};  // the model "closes" with its 4th and 5th tokens
    Request r = Budgeted(salt, 16, b);
    EXPECT_EQ(RunSolo(r).tokens, free.tokens) << salt;
    b.close = {29, 30};
    r.reasoning_budget = b;
    EXPECT_NE(RunSolo(r).tokens, free.tokens) << salt;
  }
}

// Budgeted and free rows in one batch with chunked prefill and preemption: the free rows give
// exactly their solo output, the budgeted rows theirs (the budget follows the request's own
// tokens, not its KV), logprobs included (a forced token's are those of its row).
TEST(EngineTest, ReasoningBudgetRowsInAMixedBatch) {
  auto work = [] {
    std::vector<Request> w = Workload();
    for (int i = 0; i < 3; ++i) {
      Request r = Budgeted(i, 14, Budget(2 + 3 * i));
      r.params.num_logprobs = i == 1 ? 2 : -1;
      w.insert(w.begin() + 2 * i, r);
    }
    return w;
  };
  std::vector<Result> solo;
  for (const Request& r : work()) solo.push_back(RunSolo(r));
  EngineConfig tight = BaseConfig(/*num_blocks=*/14);
  tight.max_batched_tokens = 7;
  tight.max_num_seqs = 5;
  Made m = Make(tight);
  const std::vector<Request> batch = work();
  const std::vector<Result> batched = RunAll(*m.engine, batch);
  int num_budgeted = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    ExpectSame(batched[i], solo[i], i);
    if (!batch[i].reasoning_budget.has_value()) continue;
    const int n = batch[i].reasoning_budget->max_tokens;
    ++num_budgeted;
    ASSERT_GE(batched[i].tokens.size(), static_cast<size_t>(n + 3)) << i;
    EXPECT_EQ(Tokens(batched[i].tokens.begin() + n, batched[i].tokens.begin() + n + 3),
              (Tokens{28, 29, 30}))
        << i;
  }
  EXPECT_EQ(num_budgeted, 3);
  EXPECT_GT(m.engine->stats().preemptions, 0u);
  EXPECT_EQ(m.engine->stats().kv_blocks_used, 0);
}

// Under a grammar that starts after the reasoning section (grammar_compose.h AfterReasoning),
// the forced close is text the grammar accepts, and the answer follows the grammar.
TEST(EngineTest, ReasoningBudgetUnderAGrammarAfterReasoning) {
  const GrammarFixture fx;
  auto g = CompileGbnf(R"(root ::= [0-9]+ "," [a-p] [a-p])");
  ASSERT_TRUE(g.ok());
  // The fixture's "?" (31) closes the section; nothing else in its vocabulary writes "?".
  auto compiled = CompiledGrammar::Compile(AfterReasoning(*std::move(g), "<", "?", true));
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  for (int salt : {0, 1}) {
    Request r = Budgeted(salt, 30, std::nullopt);
    r.params.ignore_eos = false;
    r.grammar = std::make_shared<GrammarState>(*compiled, fx.vocab.get());
    ReasoningBudget b = Budget(4);
    b.close = {31};
    b.forced = {31};
    r.reasoning_budget = b;
    const Result got = RunSolo(r);
    ASSERT_TRUE(got.error.ok()) << got.error.ToString();
    ASSERT_GE(got.tokens.size(), 5u);
    EXPECT_EQ(got.tokens[4], 31) << salt;
    EXPECT_EQ(got.finish, FinishReason::kStop);
    const std::string text = fx.Text(got.tokens);
    const std::string answer = text.substr(text.find('?') + 1);
    EXPECT_TRUE(fx.Matches(answer)) << "\"" << text << "\"";
  }
}

// A committed token the grammar refuses (here the budget's forced close, which this grammar has
// no room for: it does not start after the reasoning section) fails the request with an error
// naming the grammar, whether the grammar takes its tokens on the engine thread or on the
// workers, and frees its blocks.
TEST(EngineTest, ATokenOutsideTheGrammarFailsTheRequest) {
  const GrammarFixture fx;
  for (int grammar_threads : {0, 2}) {
    SCOPED_TRACE("num_grammar_threads " + std::to_string(grammar_threads));
    EngineConfig config = BaseConfig(/*num_blocks=*/16);
    config.num_grammar_threads = grammar_threads;
    Made m = Make(config);
    Request r = Budgeted(0, 30, std::nullopt);
    r.params.ignore_eos = false;
    r.grammar = std::make_shared<GrammarState>(fx.grammar, fx.vocab.get());
    ReasoningBudget b = Budget(2);
    b.close = {31};
    b.forced = {31};
    r.reasoning_budget = b;
    const std::vector<Result> got = RunAll(*m.engine, {r});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].finish, FinishReason::kError);
    EXPECT_NE(got[0].error.message().find("outside the request's grammar"), std::string::npos)
        << got[0].error.ToString();
    EXPECT_EQ(m.engine->stats().kv_blocks_used, 0);
  }
}

TEST(EngineTest, SubmitRejectsABadReasoningBudget) {
  Made m = Make(BaseConfig(16));
  Request r = Budgeted(0, 4, Budget(2));
  r.reasoning_budget->forced = {28, kVocab};
  StatusOr<RequestHandle> h = m.engine->Submit(r);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("forced token id 32"), std::string::npos);
  r.reasoning_budget = Budget(2, /*starts_open=*/false);
  EXPECT_FALSE(m.engine->Submit(r).ok());  // no open marker
}

TEST(EngineTest, SameRequestTwiceReusesTheWholePromptButTheLastToken) {
  Made m = Make(BaseConfig(64));
  Request r;
  r.prompt = Prompt(0, 17, 3);
  r.params.temperature = 0;
  r.params.max_tokens = 5;
  Result first = RunAll(*m.engine, {r})[0];
  Result second = RunAll(*m.engine, {r})[0];
  EXPECT_EQ(first.cached_tokens, 0);
  EXPECT_EQ(second.cached_tokens, 16);
  EXPECT_EQ(first.tokens, second.tokens);
  const EngineStats s = m.engine->stats();
  EXPECT_EQ(s.prefix_cache_hits, 1u);
  EXPECT_EQ(s.prefix_cache_misses, 1u);
  EXPECT_EQ(s.prefix_cache_hit_tokens, 16u);
}

// The SSD tier under the fake runner, whose "KV" is each slot's token id: a restored block with
// wrong contents, or one read into the wrong place, changes the history it reads back, hence the
// tokens (or fails the step on an unwritten slot).
class EngineSsdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("loom_engine_ssd_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  EngineConfig WithSsd(EngineConfig cfg) const {
    cfg.ssd_cache_dir = dir_.string();
    return cfg;
  }
  // Every .kvb file under the cache directory (not quarantine/ or tmp/).
  std::vector<std::filesystem::path> BlockFiles() const {
    std::vector<std::filesystem::path> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_)) {
      if (e.path().extension() == ".kvb" &&
          e.path().parent_path().filename().string().size() == 2) {
        out.push_back(e.path());
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  std::filesystem::path dir_;
};

Request Greedy(Tokens prompt, int max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  return r;
}

TEST_F(EngineSsdTest, APromptComesBackFromDiskAfterARestart) {
  const Request r = Greedy(Prompt(0, 41, 7), 6);  // 10 full blocks may be cached (40 of 41)
  Result first;
  EngineConfig config = WithSsd(BaseConfig(64));
  config.ssd_staging_chunk_bytes = 1;  // one block a chunk: the restore lands in 10 pieces
  {
    Made a = Make(config);
    first = RunAll(*a.engine, {r})[0];
    a.engine->Shutdown();  // flushes the write-behind queue
    const EngineStats s = a.engine->stats();
    ASSERT_TRUE(s.ssd_cache);
    // The prompt's 10 blocks and the output's first (41 + 6 = 47 tokens, 46 computed: 11 full).
    EXPECT_EQ(s.ssd.store.writes, 11);
    EXPECT_EQ(s.ssd.pending_spills, 0);
    EXPECT_GT(a.runner->kv_reads_, 0);
  }
  EXPECT_EQ(BlockFiles().size(), 11u);
  Made b = Make(config);  // a fresh runner: its KV holds nothing
  Result second = RunAll(*b.engine, {r})[0];
  EXPECT_EQ(second.tokens, first.tokens);
  EXPECT_EQ(second.cached_tokens, 40);
  EXPECT_EQ(b.runner->kv_writes_, 10);
  const EngineStats s = b.engine->stats();
  EXPECT_EQ(s.ssd.restores, 1);
  EXPECT_EQ(s.ssd.restored_blocks, 10);
  EXPECT_EQ(s.ssd_restore_tokens, 40u);
  EXPECT_EQ(s.ssd.store.writes, 0);  // nothing new: the output's block is on disk already
  EXPECT_EQ(s.prefix_cache_hit_tokens, 40u);

  // A longer prompt with the same start: the pool holds it now, so nothing is read again.
  Tokens longer = r.prompt;
  longer.insert(longer.end(), {5, 6, 7, 8, 9, 10, 11, 12});
  Result third = RunAll(*b.engine, {Greedy(longer, 3)})[0];
  EXPECT_EQ(third.cached_tokens, 40);  // its 11th block differs from the output's
  EXPECT_EQ(b.engine->stats().ssd.restores, 1);
}

// Two engines on one --ssd-cache directory (two processes): what one spilled after the other
// started is found on the other's lookup and restored.
TEST_F(EngineSsdTest, AnotherEnginesBlocksAreFoundOnTheSharedDirectory) {
  const Request r = Greedy(Prompt(0, 41, 8), 5);
  Made reader = Make(WithSsd(BaseConfig(64)));  // opened first: its index is empty
  Result first;
  {
    Made writer = Make(WithSsd(BaseConfig(64)));
    first = RunAll(*writer.engine, {r})[0];
  }  // shut down: its blocks are on disk
  Result second = RunAll(*reader.engine, {r})[0];
  EXPECT_EQ(second.tokens, first.tokens);
  EXPECT_EQ(second.cached_tokens, 40);
  const EngineStats s = reader.engine->stats();
  EXPECT_EQ(s.ssd.store.discovered, 10);
  EXPECT_EQ(s.ssd.restored_blocks, 10);
}

TEST_F(EngineSsdTest, ACorruptBlockIsQuarantinedAndItsTokensRecomputed) {
  const Request r = Greedy(Prompt(0, 33, 4), 4);  // 8 blocks may be cached
  Result first;
  {
    Made a = Make(WithSsd(BaseConfig(64)));
    first = RunAll(*a.engine, {r})[0];
  }  // the engine's destructor shuts down and flushes too
  std::vector<std::filesystem::path> files = BlockFiles();
  ASSERT_EQ(files.size(), 9u);
  // Flip one payload byte of every file: whichever is the chain's 4th block, its read fails.
  for (const auto& f : files) {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(4096 + 5);
    char c = 0;
    io.read(&c, 1);
    c ^= 0x40;
    io.seekp(4096 + 5);
    io.write(&c, 1);
  }
  Made b = Make(WithSsd(BaseConfig(64)));
  Result second = RunAll(*b.engine, {r})[0];
  EXPECT_EQ(second.tokens, first.tokens);
  EXPECT_EQ(second.cached_tokens, 0);  // the chain's first block is already bad
  const EngineStats s = b.engine->stats();
  EXPECT_GE(s.ssd.store.quarantined, 1);
  EXPECT_EQ(s.ssd.restored_blocks, 0);
  EXPECT_EQ(b.runner->kv_writes_, 0);
}

TEST_F(EngineSsdTest, ACorruptMiddleBlockEndsTheRestoredChainThere) {
  const Request r = Greedy(Prompt(0, 33, 5), 4);  // 8 blocks may be cached
  Result first;
  {
    Made a = Make(WithSsd(BaseConfig(64)));
    first = RunAll(*a.engine, {r})[0];
  }
  // The chain's 4th block (index 3), by its hash under the engine's root (BaseConfig's "fake"
  // fingerprint, f32 KV, no tokenizer hash).
  BlockHash h = RootBlockHash("fake", "f32", "");
  for (int i = 0; i <= 3; ++i) {
    h = HashBlock(h, std::span<const TokenId>(r.prompt).subspan(4 * i, 4), "");
  }
  const std::string hex = h.ToHex();
  const std::filesystem::path victim = dir_ / hex.substr(0, 2) / (hex + ".kvb");
  ASSERT_TRUE(std::filesystem::exists(victim));
  std::filesystem::resize_file(victim, 4096 + 3);  // truncated: caught by the start-up scan
  Made b = Make(WithSsd(BaseConfig(64)));
  EXPECT_EQ(b.engine->stats().ssd.store.quarantined, 1);
  Result second = RunAll(*b.engine, {r})[0];
  EXPECT_EQ(second.tokens, first.tokens);
  EXPECT_EQ(second.cached_tokens, 12);  // blocks 0-2 from disk, 3 onwards recomputed
  EXPECT_EQ(b.runner->kv_writes_, 3);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "quarantine"));
}

// 64 agents' requests with overlapping prefixes, and their outputs from an unbounded pool
// without tiers.
std::vector<Request> OverlappingWork() {
  std::vector<Request> work;
  for (int i = 0; i < 64; ++i) {
    Tokens p = Prompt(/*shared=*/8 + 4 * (i % 5), /*distinct=*/6 + i % 7, i % 9);
    Request r = Greedy(p, 5 + i % 4);
    if (i % 3 == 1) {
      r.params.temperature = 0.9f;
      r.params.seed = 1000 + i;
    }
    work.push_back(r);
  }
  return work;
}

std::vector<Result> UnboundedResults(const std::vector<Request>& work) {
  std::vector<Result> want;
  Made big = Make(BaseConfig(4096));
  for (const Request& r : work) want.push_back(RunAll(*big.engine, {r})[0]);
  return want;
}

// Many requests sharing prefixes through a pool far smaller than their working set: what is
// evicted comes back from disk, outputs match an unbounded pool without a tier, the integrity
// walk (every step: BaseConfig) holds, and nothing is left referenced.
TEST_F(EngineSsdTest, ManyOverlappingPrefixesThroughATinyPoolMatchAnUnboundedOne) {
  const std::vector<Request> work = OverlappingWork();
  const std::vector<Result> want = UnboundedResults(work);
  EngineConfig tiny = WithSsd(BaseConfig(24));
  tiny.ssd_staging_chunk_bytes = 1;  // restores land block by block, between running steps
  tiny.max_num_seqs = 4;
  tiny.max_batched_tokens = 16;
  for (int round = 0; round < 2; ++round) {  // the second round starts from a fresh pool
    Made m = Make(tiny);
    std::vector<Result> got = RunAll(*m.engine, work);
    for (size_t i = 0; i < work.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "round " << round << " request " << i;
    }
    m.engine->Shutdown();
    const EngineStats s = m.engine->stats();
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.ssd.pending_spills, 0);
    if (round == 1) {
      EXPECT_GT(s.ssd.restores, 0);
      EXPECT_GT(s.ssd_restore_tokens, 0u);
    }
  }
}

// The host-RAM tier alone (the fake runner's blocks are 16 bytes: 20 host slots) and under it
// the SSD tier: the same 64 agents through a 24-block pool. What the pool evicted comes back from
// host slots (and, with the disk under them, from the disk once the host tier evicted it too).
TEST_F(EngineSsdTest, ManyOverlappingPrefixesThroughTinyPoolAndHostTierMatchAnUnboundedOne) {
  const std::vector<Request> work = OverlappingWork();
  const std::vector<Result> want = UnboundedResults(work);
  // Each also with copies out that land a step later (async: a GPU's copy engine).
  for (const auto& [with_ssd, async] : {std::pair{false, false}, std::pair{true, false},
                                        std::pair{false, true}, std::pair{true, true}}) {
    std::filesystem::remove_all(dir_);
    EngineConfig tiny = BaseConfig(24);
    if (with_ssd) tiny = WithSsd(tiny);
    tiny.host_cache_bytes = 20 * 16;
    tiny.ssd_staging_chunk_bytes = 1;
    tiny.max_num_seqs = 4;
    tiny.max_batched_tokens = 16;
    Made m = Make(tiny);
    m.runner->async_reads_ = async;
    std::vector<Result> got = RunAll(*m.engine, work);
    for (size_t i = 0; i < work.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens)
          << "ssd " << with_ssd << " async " << async << " request " << i;
    }
    m.engine->Shutdown();
    EXPECT_TRUE(m.runner->pending_reads_.empty()) << "a copy out was never waited for";
    const EngineStats s = m.engine->stats();
    EXPECT_EQ(s.kv_blocks_used, 0);
    ASSERT_TRUE(s.host_cache);
    EXPECT_EQ(s.host.capacity_blocks, 20);
    EXPECT_EQ(s.host.entries, 20);
    EXPECT_EQ(s.host.held, 0) << "a hold leaked";
    // The SSD writer may hold every slot for the whole run (each file is fsynced): then new
    // blocks go straight down instead of evicting.
    EXPECT_GT(s.host.evictions + (with_ssd ? s.host.refused : 0), 0);
    EXPECT_GT(s.host.restores, 0);
    EXPECT_GT(s.host_restore_tokens, 0u);
    EXPECT_EQ(s.host_restore_tokens, static_cast<uint64_t>(s.host.restored_blocks) * 4);
    EXPECT_EQ(s.ssd_cache, with_ssd);
    if (with_ssd) {
      EXPECT_EQ(s.ssd.pending_spills, 0);
      // Every block reached the disk, through its host slot or straight down (a refused block
      // may be refused again when recomputed: `refused` counts attempts).
      EXPECT_GE(s.ssd.store.writes, s.host.inserts);
      EXPECT_LE(s.ssd.store.writes, s.host.inserts + s.host.refused);
      EXPECT_EQ(s.ssd.dropped_spills, 0);
    }
  }
}

// A prefix evicted from the pool comes back from the host tier in one go when nothing runs; after
// a restart (an empty host tier) it comes from the disk, which the host slots wrote.
TEST_F(EngineSsdTest, APrefixComesBackFromTheHostTierThenFromDiskAfterARestart) {
  const Request r = Greedy(Prompt(0, 41, 3), 6);  // 10 full prompt blocks
  EngineConfig config = WithSsd(BaseConfig(16));  // 16 blocks: the next prompt evicts r's
  config.host_cache_bytes = 64 * 16;
  Result first;
  {
    Made a = Make(config);
    first = RunAll(*a.engine, {r})[0];
    RunAll(*a.engine, {Greedy(Prompt(0, 41, 4), 6)});  // other tokens: evicts most of r's blocks
    Result again = RunAll(*a.engine, {r})[0];
    EXPECT_EQ(again.tokens, first.tokens);
    EXPECT_EQ(again.cached_tokens, 40);
    const EngineStats s = a.engine->stats();
    EXPECT_EQ(s.host.restores, 1);
    EXPECT_GT(s.host.restored_blocks, 0);
    EXPECT_EQ(s.ssd.restores, 0);  // all of it was in host memory
    EXPECT_EQ(s.prefix_cache_hit_tokens, 40u);
  }
  Made b = Make(config);
  Result second = RunAll(*b.engine, {r})[0];
  EXPECT_EQ(second.tokens, first.tokens);
  EXPECT_EQ(second.cached_tokens, 40);
  EngineStats s = b.engine->stats();
  EXPECT_EQ(s.host.restores, 0);
  EXPECT_EQ(s.ssd.restored_blocks, 10);
  // The blocks restored from disk are kept in host RAM too (and the output's new block): once
  // the pool evicts them again, they come back from there, not from the disk.
  EXPECT_EQ(s.host.entries, 11);
  EXPECT_EQ(s.ssd.store.writes, 0);                  // nothing written again
  RunAll(*b.engine, {Greedy(Prompt(0, 41, 5), 6)});  // not on disk: evicts r's blocks again
  Result third = RunAll(*b.engine, {r})[0];
  EXPECT_EQ(third.tokens, first.tokens);
  EXPECT_EQ(third.cached_tokens, 40);
  s = b.engine->stats();
  EXPECT_EQ(s.host.restores, 1);
  EXPECT_GT(s.host.restored_blocks, 0);
  EXPECT_EQ(s.ssd.restores, 1);  // the one after the restart only
}

// With copies out that land later (a GPU's copy engine), going idle and the next request's
// restore probe do not wait for the last step's copy: it is polled while idle and finished once
// it has landed; a request arriving before then takes the blocks from the pool.
TEST_F(EngineSsdTest, GoingIdleAndTheNextProbeDoNotWaitForTheLastCopyOut) {
  EngineConfig config = BaseConfig(64);
  config.host_cache_bytes = 64 * 16;
  const Request a = Greedy(Prompt(0, 41, 5), 1);  // one step: its 10 full blocks copied out
  Tokens longer = a.prompt;
  longer.insert(longer.end(), {3, 9, 27});
  const Request b = Greedy(longer, 1);  // one step too: its new block's copy is the last
  const Result want_b = RunSolo(b);
  Made m = Make(config);
  m.runner->async_reads_ = true;
  m.runner->read_polls_ = 3;
  RunAll(*m.engine, {a});
  EXPECT_EQ(m.runner->pending_reads_.size(), 1u) << "going idle waited for the copy out";
  EXPECT_EQ(m.engine->stats().host.entries, 0);    // not published before it lands
  const Result got_b = RunAll(*m.engine, {b})[0];  // its probe polls (2), its step waits
  EXPECT_EQ(got_b.tokens, want_b.tokens);
  EXPECT_EQ(got_b.cached_tokens, 40);  // from the pool
  EXPECT_EQ(m.runner->early_waits_, 0) << "a wait before a copy landed (idle or the probe)";
  EXPECT_EQ(m.engine->stats().host.restores, 0);
  // Idle steps poll b's last copy until it lands, then publish it.
  const int64_t before = m.engine->stats().host.entries;
  int polls = 0;
  while (!m.runner->pending_reads_.empty() && polls < 10) {
    EXPECT_FALSE(m.engine->Step());
    ++polls;
  }
  EXPECT_TRUE(m.runner->pending_reads_.empty());
  EXPECT_GT(polls, 1);
  EXPECT_GT(m.engine->stats().host.entries, before);
  EXPECT_EQ(m.runner->early_waits_, 0);
}

// A disk writer whose queue holds two blocks drops 8 of a prompt's 10: without idle demotion a
// restart finds 2 blocks; with it, the idle engine writes the other 8 from the pool (as the
// queue drains) and a restart finds all 10.
TEST_F(EngineSsdTest, IdleDemotionWritesTheBlocksTheWriterDropped) {
  const Request r = Greedy(Prompt(0, 41, 9), 1);  // one step: 10 full blocks
  for (const bool demote : {false, true}) {
    std::filesystem::remove_all(dir_);
    EngineConfig config = WithSsd(BaseConfig(64));
    config.ssd_spill_queue_bytes = 2 * 16;
    config.ssd_demote_idle_ms = demote ? 1 : 0;
    Result first;
    {
      Made a = Make(config);
      first = RunAll(*a.engine, {r})[0];
      EXPECT_EQ(a.engine->stats().ssd.dropped_spills, 8);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (demote && a.engine->stats().ssd_demoted_blocks < 8 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        EXPECT_FALSE(a.engine->Step());
      }
      EXPECT_EQ(a.engine->stats().ssd_demoted_blocks, demote ? 8u : 0u);
    }  // shut down: the queue is flushed
    EngineConfig roomy = config;
    roomy.ssd_spill_queue_bytes = 1 << 20;
    Made b = Make(roomy);
    const Result again = RunAll(*b.engine, {r})[0];
    EXPECT_EQ(again.tokens, first.tokens);
    EXPECT_EQ(again.cached_tokens, demote ? 40 : 8) << "demote " << demote;
  }
}

TEST(EngineTest, AHostTierNeedsThePrefixCache) {
  EngineConfig c = BaseConfig(16);
  c.host_cache_bytes = 1024;
  c.enable_prefix_cache = false;
  EXPECT_FALSE(c.Validate().ok());
  c.enable_prefix_cache = true;
  c.host_cache_bytes = -1;
  EXPECT_FALSE(c.Validate().ok());
}

TEST(EngineTest, StopsOnEosStopIdsAndMaxTokens) {
  Request r;
  r.prompt = Prompt(0, 6, 1);
  r.params.temperature = 0;
  r.params.max_tokens = 12;
  EngineConfig no_eos = BaseConfig(64);
  no_eos.eos_token_ids = {};
  Made ref = Make(no_eos);
  const Result full = RunAll(*ref.engine, {r})[0];
  ASSERT_EQ(full.tokens.size(), 12u);
  EXPECT_EQ(full.finish, FinishReason::kLength);
  // The first output position whose token did not appear before it.
  size_t k = 1;
  while (std::count(full.tokens.begin(), full.tokens.begin() + k, full.tokens[k]) > 0) ++k;
  ASSERT_LT(k, full.tokens.size());
  const TokenId stop = full.tokens[k];

  EngineConfig eos = no_eos;
  eos.eos_token_ids = {stop};
  Made m = Make(eos);
  Result got = RunAll(*m.engine, {r})[0];
  EXPECT_EQ(got.tokens, Tokens(full.tokens.begin(), full.tokens.begin() + k));
  EXPECT_EQ(got.finish, FinishReason::kStop);
  EXPECT_EQ(got.stop_token, stop);

  Request ignore = r;
  ignore.params.ignore_eos = true;
  EXPECT_EQ(RunAll(*m.engine, {ignore})[0].tokens, full.tokens);

  Request by_id = r;
  by_id.params.stop_token_ids = {stop};
  got = RunAll(*ref.engine, {by_id})[0];
  EXPECT_EQ(got.tokens.size(), k);
  EXPECT_EQ(got.stop_token, stop);

  Request min = r;
  min.params.min_tokens = static_cast<int>(k) + 1;
  got = RunAll(*m.engine, {min})[0];
  ASSERT_GT(got.tokens.size(), k);
  EXPECT_NE(got.tokens[k], stop);  // masked while below min_tokens
}

// The integrity walk on going idle covers the whole block pool (milliseconds on a GPU-sized one):
// it must not run inside the step that finishes the last request, whose outputs a caller driving
// Step() only pops after it returns — nor in the serving loop before that step's outputs are
// out. It runs once per idle period, on the next idle Step() or right after the loop's step.
TEST(EngineTest, IdleIntegrityCheckRunsAfterTheFinishingStep) {
  Made m = Make(BaseConfig(32));
  Request r;
  r.prompt = Prompt(0, 6, 1);
  r.params.temperature = 0;
  r.params.max_tokens = 3;
  r.params.ignore_eos = true;
  auto h = m.engine->Submit(r);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  bool finished = false;
  while (!finished) {
    ASSERT_TRUE(m.engine->Step());
    while (auto c = h->stream->TryPop()) finished |= c->finish_reason.has_value();
  }
  EXPECT_EQ(m.engine->stats().idle_checks, 0u) << "walked inside the finishing step";
  EXPECT_FALSE(m.engine->Step());
  EXPECT_EQ(m.engine->stats().idle_checks, 1u);
  EXPECT_FALSE(m.engine->Step());
  EXPECT_EQ(m.engine->stats().idle_checks, 1u) << "once per idle period";

  // The serving loop: after the finishing step, without another submission.
  m.engine->Start();
  auto h2 = m.engine->Submit(r);
  ASSERT_TRUE(h2.ok()) << h2.status().ToString();
  for (bool done = false; !done;) {
    auto c = h2->stream->Pop(std::chrono::seconds(10));
    ASSERT_TRUE(c.has_value()) << "no output in 10 s";
    done = c->finish_reason.has_value();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (m.engine->stats().idle_checks < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(m.engine->stats().idle_checks, 2u);
  m.engine->Shutdown();
}

TEST(EngineTest, AbortMidPrefillAndMidDecodeFreesBlocks) {
  EngineConfig cfg = BaseConfig(32);
  cfg.max_batched_tokens = 4;
  Made m = Make(cfg);
  Request r;
  r.prompt = Prompt(0, 14, 2);
  r.params.max_tokens = 20;
  RequestHandle a = *m.engine->Submit(r);
  ASSERT_TRUE(m.engine->Step());  // first 4-token chunk
  EXPECT_EQ(m.engine->stats().kv_blocks_used, 1);
  m.engine->Abort(a.id);
  m.engine->Abort(RequestId{999});  // unknown: ignored
  EXPECT_FALSE(m.engine->Step());
  Result ra;
  Drain(*a.stream, ra);
  EXPECT_EQ(ra.finish, FinishReason::kAbort);
  EXPECT_TRUE(ra.tokens.empty());
  EXPECT_EQ(m.engine->stats().kv_blocks_used, 0);

  r.params.temperature = 0;
  r.params.ignore_eos = true;
  RequestHandle b = *m.engine->Submit(r);
  // a's first block is cached: 10 tokens left = 3 prefill steps (the last samples), 3 decodes.
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(m.engine->Step());
  Result rb;
  Drain(*b.stream, rb);
  EXPECT_EQ(rb.cached_tokens, 4);
  EXPECT_EQ(rb.tokens.size(), 4u);
  m.engine->Abort(b.id);
  m.engine->Abort(b.id);  // twice: harmless
  EXPECT_FALSE(m.engine->Step());
  Drain(*b.stream, rb);
  EXPECT_EQ(rb.finish, FinishReason::kAbort);
  EXPECT_EQ(rb.tokens.size(), 4u);
  const EngineStats s = m.engine->stats();
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_free, 32);
  EXPECT_GT(s.kv_blocks_cached, 0);  // the prompt blocks stay cached
}

TEST(EngineTest, ARequestsOwnFailureDoesNotStopTheOthers) {
  std::vector<Request> work = Workload();
  Request poisoned = work[0];
  poisoned.prompt.insert(poisoned.prompt.begin(), kPoison);
  work.insert(work.begin() + 2, poisoned);
  Made m = Make(BaseConfig(64));
  std::vector<Result> got = RunAll(*m.engine, work);
  EXPECT_EQ(got[2].finish, FinishReason::kError);
  EXPECT_EQ(got[2].error.message(), "sampling failed: the model produced NaN logits");
  const std::vector<Request> clean = Workload();
  for (size_t i = 0, j = 0; i < got.size(); ++i) {
    if (i == 2) continue;
    ExpectSame(got[i], RunSolo(clean[j]), j);
    ++j;
  }
}

// `work` run on an engine whose runner's logits live on a FakeDeviceBackend (`edits`: it also
// edits rows) after the same work on one sampling every row on the host; the results must be the
// same (checked here).
struct DeviceRun {
  std::unique_ptr<Engine> engine;  // owns the runner, which owns *backend
  FakeDeviceBackend* backend = nullptr;
  std::vector<Result> results;
};
DeviceRun RunOnDeviceFakeAndCompare(const std::vector<Request>& work, bool edits,
                                    bool logprobs = false) {
  Made host = Make(BaseConfig(64));
  const std::vector<Result> want = RunAll(*host.engine, work);
  DeviceRun run;
  auto be = std::make_unique<FakeDeviceBackend>(edits, logprobs);
  run.backend = be.get();
  auto fake = std::make_unique<FakeRunner>(64, 4, 256, kVocab, std::move(be));
  auto made = Engine::Create(BaseConfig(64), std::move(fake));
  EXPECT_TRUE(made.ok());
  if (!made.ok()) return run;
  run.engine = std::move(made).value();
  run.results = RunAll(*run.engine, work);
  const std::vector<Result>& got = run.results;
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].logprobs, want[i].logprobs) << "request " << i;
    EXPECT_EQ(got[i].top_logprobs, want[i].top_logprobs) << "request " << i;
    EXPECT_EQ(got[i].finish, want[i].finish) << "request " << i;
    EXPECT_EQ(got[i].stop_token, want[i].stop_token) << "request " << i;
    EXPECT_EQ(got[i].error.ToString(), want[i].error.ToString()) << "request " << i;
  }
  return run;
}

// Rows a runner samples itself (plain greedy only) give exactly what the host sampler gives;
// rows needing logprobs, penalties, bias, min_tokens masking or XTC still reach the host; plain
// draws (temperature, top-k/p, min-p) come back as tokens with their seed and step.
TEST(EngineTest, DeviceSideSamplingMatchesHostSampling) {
  std::vector<Request> work = Workload();  // greedy + logprobs and sampled: all host rows
  for (int i = 0; i < 4; ++i) {  // plain draws; one masks EOS (host rows) for its first 3 tokens
    Request r;
    r.prompt = Prompt(5, 6 + i, 30 + i);
    r.params.max_tokens = 12;
    r.params.seed = 700 + i;
    r.params.temperature = 0.6f + 0.2f * i;
    r.params.top_k = i == 1 ? 7 : 0;
    r.params.top_p = i == 2 ? 0.8f : 1.0f;
    r.params.min_p = i == 3 ? 0.05f : 0.0f;
    r.params.min_tokens = i == 0 ? 3 : 0;
    work.push_back(r);
  }
  for (int i = 0; i < 3; ++i) {
    Request r;
    r.prompt = Prompt(5, 4 + i, 20 + i);
    r.params.max_tokens = 9 + i;
    r.params.temperature = 0;
    if (i == 1) {  // greedy through top_k = 1; EOS masked (host rows) for the first 4 tokens
      r.params.temperature = 0.7f;
      r.params.top_k = 1;
      r.params.min_tokens = 4;
    }
    if (i == 2) r.params.stop_token_ids = {5};
    work.push_back(r);
  }
  Request poisoned = work.back();  // NaN logits: the same error from the runner's argmax
  poisoned.prompt.insert(poisoned.prompt.begin(), kPoison);
  work.push_back(poisoned);

  const DeviceRun run = RunOnDeviceFakeAndCompare(work, /*edits=*/false);
  ASSERT_FALSE(run.results.empty());
  EXPECT_EQ(run.results.back().error.message(), "sampling failed: the model produced NaN logits");
  const FakeDeviceBackend* raw = run.backend;
  EXPECT_GT(raw->argmax_rows_, 10);
  EXPECT_GT(raw->draw_rows_, 30);
}

// Rows with logit_bias, repetition / presence / frequency penalties or min_tokens masking, sent
// to a runner that edits rows where the logits are (EditLogits), give exactly the host
// sampler's tokens, greedy and drawn; logprobs and XTC rows still reach the host.
TEST(EngineTest, DeviceSideEditedRowsMatchHostSampling) {
  std::vector<Request> work;
  for (int i = 0; i < 8; ++i) {
    Request r;
    r.prompt = Prompt(6, 3 + i, 40 + i);
    r.params.max_tokens = 14;
    r.params.seed = 900 + i;
    r.params.temperature = i % 2 == 0 ? 0.0f : 0.9f;
    r.params.top_k = i == 3 ? 9 : 0;
    if (i % 4 == 0) r.params.logit_bias = {{7, 3.0f}, {11, -2.5f}, {2, 100.0f}};
    if (i % 4 == 1) r.params.repetition_penalty = 1.4f;
    if (i % 4 == 2) {
      r.params.presence_penalty = 1.5f;
      r.params.frequency_penalty = 0.75f;
    }
    if (i % 4 == 3) {
      r.params.min_tokens = 6;
      r.params.stop_token_ids = {4};
    }
    work.push_back(r);
  }
  Request logprobs = work[1];  // stays a host row
  logprobs.params.num_logprobs = 2;
  work.push_back(logprobs);

  const DeviceRun run = RunOnDeviceFakeAndCompare(work, /*edits=*/true);
  const FakeDeviceBackend* raw = run.backend;
  EXPECT_GT(raw->edited_rows_, 50);  // the 8 requests' rows, but those past min_tokens
  EXPECT_GT(raw->argmax_rows_, 25);
  EXPECT_GT(raw->draw_rows_, 25);
}

// Rows that ask for logprobs, sent to a runner that takes them where the logits are
// (LogprobRows, after the row's edits), give exactly the host sampler's tokens and
// logprobs, greedy and drawn, with and without bias / penalties; rows with min_tokens masking
// at the step or XTC still reach the host.
TEST(EngineTest, DeviceSideLogprobsMatchHostSampling) {
  std::vector<Request> work;
  for (int i = 0; i < 8; ++i) {
    Request r;
    r.prompt = Prompt(6, 3 + i, 50 + i);
    r.params.max_tokens = 12;
    r.params.seed = 1200 + i;
    r.params.temperature = i % 2 == 0 ? 0.0f : 0.8f;
    r.params.num_logprobs = i % 3 == 0 ? 0 : i % 3 == 1 ? 3 : 20;
    if (i % 4 == 1) r.params.logit_bias = {{9, 2.0f}, {3, -4.0f}};
    if (i % 4 == 2) r.params.frequency_penalty = 0.5f;
    if (i == 3) r.params.min_tokens = 5;          // host rows for its first 5 tokens
    if (i == 5) r.params.xtc_probability = 0.5f;  // a host row throughout
    work.push_back(r);
  }
  const DeviceRun run = RunOnDeviceFakeAndCompare(work, /*edits=*/true, /*logprobs=*/true);
  const FakeDeviceBackend* raw = run.backend;
  ASSERT_EQ(run.results.size(), work.size());
  // Every sampled row (the tokens, and the EOS / stop id that ended a request) but XTC's and
  // the first 5 of request 3.
  int want_rows = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    const Result& r = run.results[i];
    EXPECT_EQ(r.logprobs.size(), r.tokens.size());
    const int n = static_cast<int>(r.tokens.size()) + (r.stop_token.has_value() ? 1 : 0);
    if (i != 5) want_rows += i == 3 ? std::max(0, n - 5) : n;
  }
  EXPECT_GT(want_rows, 50);
  EXPECT_EQ(raw->logprob_rows_, want_rows);
}

// Host rows of a step split over several sampling threads give exactly what one thread gives,
// and a row's error (NaN logits) still finishes only its own request.
TEST(EngineTest, ParallelHostSamplingMatchesOneThread) {
  constexpr int kBigVocab = 128256;  // a Llama 3 vocabulary: 8 rows are 16 workers' worth
  std::vector<Request> work = Workload();
  for (int i = 0; i < 6; ++i) {  // more rows at chat-like settings, with logprobs on some
    Request r;
    r.prompt = Prompt(5, 3 + i, 40 + i);
    r.params.max_tokens = 6 + i;
    r.params.seed = 500 + i;
    r.params.temperature = 0.7f + 0.1f * i;
    r.params.top_p = i % 2 == 0 ? 0.9f : 1.0f;
    r.params.top_k = i % 3 == 0 ? 40 : 0;
    r.params.num_logprobs = i % 2 == 0 ? 3 : -1;
    work.push_back(r);
  }
  Request poisoned = work[1];
  poisoned.prompt.insert(poisoned.prompt.begin(), kPoison);
  work.insert(work.begin() + 3, poisoned);

  auto run = [&](int num_threads, uint64_t* parallel_steps) {
    EngineConfig cfg = BaseConfig(128);
    cfg.num_sampling_threads = num_threads;
    auto engine = Engine::Create(cfg, std::make_unique<FakeRunner>(128, 4, 256, kBigVocab));
    CHECK(engine.ok()) << engine.status().ToString();
    std::vector<Result> results = RunAll(**engine, work);
    *parallel_steps = (*engine)->stats().parallel_sample_steps;
    return results;
  };
  uint64_t serial_steps = 0, parallel_steps = 0;
  const std::vector<Result> want = run(1, &serial_steps);
  const std::vector<Result> got = run(4, &parallel_steps);
  EXPECT_EQ(serial_steps, 0u);
  EXPECT_GT(parallel_steps, 5u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_FALSE(want[i].tokens.empty() && i != 3) << "request " << i;
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].logprobs, want[i].logprobs) << "request " << i;
    EXPECT_EQ(got[i].top_logprobs, want[i].top_logprobs) << "request " << i;
    EXPECT_EQ(got[i].finish, want[i].finish) << "request " << i;
    EXPECT_EQ(got[i].error.ToString(), want[i].error.ToString()) << "request " << i;
  }
  EXPECT_EQ(got[3].finish, FinishReason::kError);
  EXPECT_EQ(got[3].error.message(), "sampling failed: the model produced NaN logits");
  for (size_t i = 0; i < got.size(); ++i) {
    if (i == 3) continue;
    EXPECT_TRUE(got[i].error.ok()) << "request " << i << ": " << got[i].error.ToString();
  }
}

TEST(EngineTest, ARunnerFailureFailsThatStepsRequestsOnly) {
  Made m = Make(BaseConfig(64));
  m.runner->fail_steps_ = 1;
  const std::vector<Request> work = Workload();
  std::vector<Result> failed = RunAll(*m.engine, {work[0], work[1]});
  for (const Result& r : failed) {
    EXPECT_EQ(r.finish, FinishReason::kError);
    EXPECT_EQ(r.error.ToString(), "INTERNAL: model step failed: injected runner failure");
  }
  EXPECT_EQ(m.engine->stats().kv_blocks_used, 0);
  ExpectSame(RunAll(*m.engine, {work[1]})[0], RunSolo(work[1]), 1);
}

TEST(EngineTest, SubmitRejectsWhatCanNeverRun) {
  EngineConfig cfg = BaseConfig(8);  // 32 tokens of KV
  cfg.bytes_per_token_kv = 1'000'000;
  cfg.memory_budget_bytes = 20'000'000;  // 20 tokens
  Made m = Make(cfg, /*max_len=*/40);
  Request ok;
  ok.prompt = {1, 2, 3};
  ok.params.max_tokens = 10;
  EXPECT_TRUE(m.engine->Submit(ok).ok());

  Request r = ok;
  r.params.max_tokens = 40;
  EXPECT_EQ(m.engine->Submit(r).status().code(), StatusCode::kOutOfRange);
  r.params.max_tokens = 30;  // 33 tokens: fits the context, not the 32-token pool
  auto pool = m.engine->Submit(r);
  EXPECT_EQ(pool.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(pool.status().message().find("--kv-cache-gb"), std::string::npos);
  r.params.max_tokens = 20;  // 23 tokens: fits the pool, not --memory-budget
  auto mem = m.engine->Submit(r);
  EXPECT_EQ(mem.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(mem.status().message().rfind("memory_admission: ", 0), 0u);

  r = ok;
  r.params.logit_bias = {{kVocab, 1.0f}};
  EXPECT_EQ(m.engine->Submit(r).status().message(),
            "logit_bias: token id 32 is out of the vocabulary [0, 32)");
  r = ok;
  r.prompt = {1, 99};
  EXPECT_EQ(m.engine->Submit(r).status().message(),
            "prompt token id 99 at position 1 is out of the vocabulary [0, 32)");
  r.prompt = {};
  EXPECT_EQ(m.engine->Submit(r).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.engine->stats().submitted_rows, 1u);

  m.engine->Shutdown();
  EXPECT_EQ(m.engine->Submit(ok).status().code(), StatusCode::kFailedPrecondition);
}

TEST(EngineTest, KvBudgetQueuesJoinersAndReportsPendingRows) {
  EngineConfig cfg = BaseConfig(64);
  cfg.bytes_per_token_kv = 100;
  cfg.kv_budget_bytes = 3000;  // 30 tokens of projected KV in flight
  Made m = Make(cfg);
  Request r;
  r.prompt = Prompt(0, 10, 1);
  r.params.max_tokens = 10;  // 20 tokens each: one at a time
  r.params.temperature = 0;
  r.params.ignore_eos = true;
  RequestHandle a = *m.engine->Submit(r);
  RequestHandle b = *m.engine->Submit(r);
  ASSERT_TRUE(m.engine->Step());
  EngineStats s = m.engine->stats();
  EXPECT_EQ(s.active_rows, 1);
  EXPECT_EQ(s.pending_rows, 1);
  EXPECT_EQ(s.kv_projected_bytes, 2000);
  EXPECT_EQ(s.kv_budget_bytes, 3000);
  EXPECT_EQ(s.kv_bytes, 3 * 4 * 100);  // 3 blocks of 4 tokens
  while (m.engine->Step()) {
    EXPECT_LE(m.engine->stats().active_rows, 1);
  }
  Result ra, rb;
  Drain(*a.stream, ra);
  Drain(*b.stream, rb);
  EXPECT_EQ(ra.tokens, rb.tokens);
  EXPECT_EQ(rb.cached_tokens, 8);  // b waited and then hit a's prompt blocks
}

TEST(EngineTest, ConcurrentSubmitAndAbortFromSeveralThreads) {
  EngineConfig cfg = BaseConfig(24);
  cfg.max_num_seqs = 4;
  cfg.max_batched_tokens = 16;
  cfg.check_integrity_every_step = true;
  Made m = Make(cfg);
  m.engine->Start();
  const std::vector<Request> work = Workload();
  std::vector<Result> solo;
  for (const Request& r : work) solo.push_back(RunSolo(r));

  constexpr int kThreads = 4;
  constexpr int kPerThread = 12;
  std::atomic<int> completed{0}, aborted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kPerThread; ++i) {
        const size_t w = (t * kPerThread + i) % work.size();
        auto h = m.engine->Submit(work[w]);
        ASSERT_TRUE(h.ok());
        const int abort_after = static_cast<int>(rng() % 3) == 0 ? static_cast<int>(rng() % 4) : -1;
        if (abort_after == 0) m.engine->Abort(h->id);
        Result r;
        while (!h->stream->done()) {
          std::optional<StreamChunk> c = h->stream->Pop(10s);
          ASSERT_TRUE(c.has_value()) << "engine stalled";
          for (const TokenOutput& o : c->tokens) r.tokens.push_back(o.token);
          if (c->finish_reason) r.finish = c->finish_reason;
          if (abort_after > 0 && static_cast<int>(r.tokens.size()) >= abort_after) {
            m.engine->Abort(h->id);
          }
        }
        ASSERT_TRUE(r.finish.has_value());
        // Whatever happened, the tokens are a prefix of the solo run's.
        ASSERT_LE(r.tokens.size(), solo[w].tokens.size());
        EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), solo[w].tokens.begin()));
        if (*r.finish == FinishReason::kAbort) {
          ++aborted;
        } else {
          EXPECT_EQ(r.tokens, solo[w].tokens);
          ++completed;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(completed + aborted, kThreads * kPerThread);
  EXPECT_GT(aborted.load(), 0);
  // The engine publishes stats after the step that finished the last stream.
  EngineStats s;
  for (int i = 0; i < 200; ++i) {
    s = m.engine->stats();
    if (s.finished_rows == kThreads * kPerThread) break;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(s.finished_rows, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(s.submitted_rows, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(s.active_rows, 0);
  EXPECT_EQ(s.pending_rows, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  m.engine->Shutdown();
}

TEST(EngineTest, ShutdownAbortsWhatIsLeft) {
  Made m = Make(BaseConfig(64));
  Request r;
  r.prompt = {1, 2, 3};
  r.params.max_tokens = 50;
  r.params.ignore_eos = true;  // the default (unseeded) sampling could otherwise draw EOS first
  RequestHandle a = *m.engine->Submit(r);
  ASSERT_TRUE(m.engine->Step());
  RequestHandle b = *m.engine->Submit(r);  // still in the inbox
  m.engine->Shutdown();
  Result ra, rb;
  Drain(*a.stream, ra);
  Drain(*b.stream, rb);
  EXPECT_EQ(ra.finish, FinishReason::kAbort);
  EXPECT_EQ(rb.finish, FinishReason::kAbort);
  EXPECT_EQ(m.engine->stats().kv_blocks_used, 0);
}

TEST(EngineConfigTest, ValidateNamesTheFlag) {
  EngineConfig cfg = BaseConfig(8);
  EXPECT_TRUE(cfg.Validate().ok());
  cfg.block_size = 0;
  EXPECT_EQ(cfg.Validate().message(), "--block-size must be in [1, 1024], got 0");
  cfg = BaseConfig(0);
  EXPECT_NE(cfg.Validate().message().find("--kv-cache-gb"), std::string::npos);
  cfg = BaseConfig(8);
  cfg.kv_budget_bytes = 10;
  EXPECT_FALSE(cfg.Validate().ok());
  cfg = BaseConfig(8);
  cfg.num_sampling_threads = 0;
  EXPECT_EQ(cfg.Validate().message(),
            "num_sampling_threads must be in [1, 256], got 0 (see --threads)");
  cfg = BaseConfig(8);
  cfg.max_model_len = 1000;
  auto e = Engine::Create(cfg, std::make_unique<FakeRunner>(8, 4, 100));
  EXPECT_EQ(e.status().message(), "max_model_len 1000 exceeds the model's context length 100");
}

}  // namespace
}  // namespace loom
