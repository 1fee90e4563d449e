// EngineConfig: every knob of the engine core, validated once (STYLE.md §9). The CLI fills it
// from flags; nothing in the engine reads the environment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "spec/ngram_proposer.h"

namespace loom {

struct EngineConfig {
  // KV pool, as the runner allocated it.
  int num_blocks = 0;              // > 0
  int block_size = 16;             // tokens per block (--block-size)
  int64_t bytes_per_token_kv = 0;  // KV bytes of one token, all layers, K + V

  // Per-step limits.
  int max_batched_tokens = 2048;  // --max-batched-tokens (2048 on CPU)
  int max_num_seqs = 8;           // --batch: rows per step

  // Host sampling: threads that sample the rows whose logits come back to the host (the engine
  // thread + a pool of num_sampling_threads - 1), used only when a step has enough logits
  // (Engine::NumSamplingWorkers). The CLI derives it from --threads. In [1, 256].
  int num_sampling_threads = 1;
  // Rows are sampled where the logits are when the backend can (CUDA: argmax, draws, logit edits,
  // logprobs); false: every row's logits to the host (--no-device-sampling).
  bool device_sampling = true;
  // Grammar masks: > 0 computes each step's masks on a pool of this many threads while the runner
  // executes the step (they depend only on tokens already accepted), so a device step hides
  // them; 0 computes them on the engine thread after the step (the CPU backend: its OpenMP
  // threads hold every core during the step). The CLI sets it for CUDA. In [0, 64].
  int num_grammar_threads = 0;
  // Jump-forward (--jump-forward): after a grammar row's sampled token, the tokens of the text its
  // grammar forces next are appended without sampling (GrammarState::JumpForward) and computed by
  // the next step with the row's next token. Not for rows asking logprobs or inside a reasoning
  // budget. Off by default: the forced text is spelled longest token first, which need not be
  // the model's own spelling.
  bool jump_forward = false;

  // Speculative decoding (--draft-kind ngram): after a decoding row's token, its own tokens are
  // searched for the last n-gram's earlier occurrence (spec/ngram_proposer.h) and up to
  // num_draft_tokens of what followed are verified by the row's next step (1 + k logits rows;
  // accepted while each row's token equals the draft, so the output is the one without
  // speculation, greedy or sampled; under a grammar each draft row has the grammar's mask after the
  // drafts before it). 0: off. Not for rows under a reasoning budget.
  // A row drafts only as many tokens as pay (spec/draft_length.h): while the chance its j-th
  // draft is accepted (its acceptance rate ^ j) beats what a draft token costs the step, from
  // draft_token_cost. A row that drafts nothing, or whose drafts were all rejected, skips
  // drafting for 1, 2, 4 ... 64 decode steps, then tries at least one draft.
  int num_draft_tokens = 0;  // --num-draft-tokens (with --draft-kind ngram)
  NgramConfig ngram;         // --ngram-min / --ngram-max
  // --draft-token-cost: what one more token in a step costs relative to the step's fixed cost
  // (r in spec/draft_length.h); negative: measured from the steps (auto); 0: drafts are free
  // (every row drafts num_draft_tokens).
  double draft_token_cost = -1;

  // Admission.
  int64_t kv_budget_bytes = 0;      // --kv-budget (decimal GB x 1e9); 0 = off
  int64_t memory_budget_bytes = 0;  // --memory-budget; 0 = off
  int64_t model_bytes = 0;          // weights etc., counted against memory_budget_bytes
  int max_model_len = 0;            // context length; 0 = the runner's max_model_len()

  // Prefix cache: on by default; the root hash binds blocks to model + KV dtype + tokenizer.
  bool enable_prefix_cache = true;
  std::string model_fingerprint;
  std::string kv_dtype = "f32";
  std::string tokenizer_hash;

  // Host-RAM tier (--host-cache GB): every block entering the prefix cache is also copied into a
  // host arena of this many bytes (page-locked on CUDA), least recently used evicted; a waiting
  // request whose prefix continues there has it copied up before its first step. 0: off. Needs
  // the prefix cache. With an SSD tier too, blocks reach the disk from their host slots.
  int64_t host_cache_bytes = 0;

  // SSD tier (--ssd-cache DIR): every block entering the prefix cache is also written behind to
  // DIR, and a waiting request whose prefix continues there has it read back into the pool
  // before its first step (after a restart too). Empty: off. Needs the prefix cache.
  std::string ssd_cache_dir;
  int64_t ssd_cache_max_bytes = 32'000'000'000;         // --ssd-cache-max (decimal GB x 1e9)
  int64_t ssd_spill_queue_bytes = 4'000'000'000;        // --ssd-cache-queue: write-behind cap
  int ssd_readers = 4;                                  // threads reading a restore
  int64_t ssd_staging_chunk_bytes = int64_t{32} << 20;  // a restore lands in chunks of this
  int ssd_flush_ms = 10'000;  // Shutdown waits this long for queued spills to reach the disk
  // --ssd-demote-idle: after this long idle, the pool's cached blocks not on disk yet (dropped
  // spills) are written (0: never).
  int64_t ssd_demote_idle_ms = 0;

  std::vector<TokenId> eos_token_ids;  // stop every request unless ignore_eos

  // Runs Scheduler/KV CheckIntegrity after every step (tests, --debug); always run when idle.
  bool check_integrity_every_step = false;
  // One stderr line per step: its size and how long Execute and the whole step took (--step-trace).
  bool step_trace = false;

  // Checks ranges; messages name the flag.
  Status Validate() const;
};

}  // namespace loom
