// StepPlan: the scheduler's immutable decision for one engine step, handed to the ModelRunner.
// It lives in sched/ (not runtime/) because the scheduler produces it and runtime/ sits below
// sched/ in the room order; runtime/model_runner.h includes it.
//
// One step is a flat list of token runs, no padding. For block_size 4:
//
//   seq 0 (decode):   tokens [t9]           start_pos 9   block_table [17, 4, 9]   num_logits 1
//   seq 1 (chunk):    tokens [u4 .. u7]     start_pos 4   block_table [2, 11]      num_logits 0
//   seq 2 (prefill):  tokens [v0 .. v2]     start_pos 0   block_table [5]          num_logits 1
//   seq 3 (verify):   tokens [w7 d0 d1]     start_pos 7   block_table [8, 3]       num_logits 3
//
// Token j of a seq sits at position p = start_pos + j and its KV goes to slot
// block_table[p / block_size] * block_size + p % block_size. A seq's logits rows are those of its
// last num_logits tokens, in order: seq 3 (a decode of w7 with two draft tokens d0, d1) gets the
// rows of w7, d0 and d1, which score d0, d1 and the token after d1.
//
// A prompt-only seq (an embedding request: HiddenRows other than kNone) asks for no logits but
// for the final hidden states (after the final norm, before lm_head) of the tokens
// [hidden_begin, hidden_end) of this step's tokens; the step's hidden rows are those ranges, seq
// by seq, in plan order (plan.num_hidden in all):
//
//   seq 4 (mean, chunk):  tokens [x0 .. x3]  start_pos 0   hidden [0, 4)   num_logits 0
//   seq 5 (last, end):    tokens [y8 y9]     start_pos 8   hidden [1, 2)   num_logits 0
#pragma once

#include <cstdint>
#include <vector>

#include "base/ids.h"

namespace loom {

// Which final hidden states a prompt-only request wants, by prompt position: kAll every token's
// (mean pooling), kLast the last prompt token's, kFirst the first's (CLS pooling). kNone: a
// generation request (logits, no hidden states).
enum class HiddenRows { kNone, kFirst, kLast, kAll };

struct ScheduledSeq {
  RequestId request_id;
  std::vector<TokenId> tokens;       // [n] tokens to compute this step (a prompt chunk, or 1)
  int32_t start_pos = 0;             // == the request's num_computed_tokens before this step
  std::vector<BlockId> block_table;  // ALL the request's blocks, covering start_pos + n tokens
  // Logits rows wanted: those of the last num_logits tokens (0: a prompt chunk that does not end
  // the prompt; 1: the next token; 1 + k: the next token and k drafts to verify). <= tokens.size().
  int32_t num_logits = 0;
  // num_logits > 0, and the token sampled now is the request's last by length (max_tokens or
  // the context): no step follows for it (a runner queuing the next step ahead skips it).
  bool last_by_length = false;
  // Final hidden-state rows wanted: those of tokens [hidden_begin, hidden_end) of `tokens`
  // (0 <= begin <= end <= tokens.size(); empty for generation requests).
  int32_t hidden_begin = 0;
  int32_t hidden_end = 0;

  int32_t num_hidden() const { return hidden_end - hidden_begin; }
};

struct StepPlan {
  std::vector<ScheduledSeq> seqs;  // in row order; logits rows keep this order
  int block_size = 0;              // tokens per KV block
  int num_tokens = 0;              // sum of seqs[i].tokens.size(), <= max_batched_tokens
  int num_logits = 0;              // sum of seqs[i].num_logits (rows of the step's logits)
  int num_hidden = 0;              // sum of seqs[i].num_hidden() (rows of the step's hidden states)
  // Requests preempted while building this plan: their blocks are freed (they will be
  // recomputed later). A runner holding per-request state (e.g. recurrent state) drops it.
  std::vector<RequestId> preempted;
  // Requests finished or aborted since the previous plan (blocks already freed).
  std::vector<RequestId> finished;

  bool empty() const { return seqs.empty(); }
};

}  // namespace loom
