// Sampler: turns one row of logits into a token, per request, inside a batch.
//
// Processing order (as vLLM / llama.cpp):
//   logit_bias → repetition / presence / frequency penalties → [logprobs taken here]
//   → min_tokens masking of EOS + stop ids → greedy argmax if temperature == 0, else
//   temperature → softmax → top-k → top-p → min-p → XTC → draw from what is left.
//
// Logprobs are the model's distribution as the OpenAI API defines it: log_softmax of the logits
// after logit_bias and penalties, before masking, temperature and truncation (vLLM's
// "processed logits" mode would differ; this choice keeps logprobs independent of temperature).
//
// Randomness is counter-based: the draw for output token i of a request is a pure function of
// (seed, i), so a seeded request gives the same tokens whatever else is in the batch, and also
// after preemption and recompute.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/logit_edit.h"
#include "base/counter_uniform.h"  // CounterUniform, shared with the device sampler
#include "base/ids.h"
#include "base/status.h"
#include "sample/sampling_params.h"

namespace loom {

struct TokenLogprob {
  TokenId token = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  TokenId token = 0;
  float logprob = 0.0f;                    // of `token`; 0 when logprobs were not requested
  std::vector<TokenLogprob> top_logprobs;  // params.num_logprobs best, highest first (ties: id)
};

// What the sampler needs to know about the request besides its parameters.
struct SampleContext {
  const SamplingParams* params = nullptr;
  std::span<const TokenId> prompt;  // prompt token ids
  std::span<const TokenId> output;  // tokens generated so far
  uint64_t seed = 0;                // params->seed, or the one the engine drew
  std::span<const TokenId> eos_token_ids;
  // A grammar's token mask (bit i of word i / 32: token i may be sampled); empty = no grammar.
  // Ids beyond the mask are not allowed. Applied where min_tokens masks (logprobs are those of
  // the unmasked row, as vLLM reports them by default).
  std::span<const uint32_t> allowed = {};
  // >= 0: the row's token is this one whatever the logits (a reasoning budget forcing its
  // section's close, engine/reasoning_budget.h); its logprobs are still taken as usual. Must be in
  // [0, vocab_size).
  TokenId forced = -1;
};

// The steps, exposed for tests. `logits` is one row [vocab_size], modified in place.
void ApplyLogitBias(const SamplingParams& params, std::span<float> logits);
// Repetition (HF style: positive logits divided by r, negative multiplied, over the set of
// prompt + output tokens), then presence / frequency (OpenAI: logit -= frequency * count +
// presence * (count > 0), over output tokens).
void ApplyPenalties(const SamplingParams& params, std::span<const TokenId> prompt,
                    std::span<const TokenId> output, std::span<float> logits);

// True when SampleRow on a row, for a request with these params and `num_output_tokens` tokens
// generated so far, is exactly the greedy argmax of the unmodified logits (lowest id on ties;
// NaN -> the NaN error; every logit -inf -> the "masked" error) with no logprobs: greedy, no
// logit_bias, no penalties, no logprobs, and no min_tokens masking at this step. Such a row needs
// only its argmax, which a device runner can take without copying the logits.
bool IsPlainGreedy(const SamplingParams& params, int num_output_tokens);

// True when SampleRow's choice for such a row depends only on the unmodified logits, the
// temperature, top_k, top_p, min_p and CounterUniform(seed, num_output_tokens, 0): a draw
// (temperature > 0, top_k != 1) with no logit_bias, no penalties, no XTC, no logprobs and no
// min_tokens masking at this step. A device runner can draw such a row where the logits are
// (Backend::SampleRows) and return one token id instead of the row.
bool IsPlainDraw(const SamplingParams& params, int num_output_tokens);

// PenaltySubtrahend(params, n): what the presence / frequency penalties subtract from the logit
// of a token generated n > 0 times (ApplyPenalties and BuildLogitEdits share it, so both give the
// same float).
float PenaltySubtrahend(const SamplingParams& params, int count);

// True when SampleRow's choice is the greedy argmax (IsEditableGreedy) or the plain draw
// (IsEditableDraw, see IsPlainDraw) of the row after the edits BuildLogitEdits lists: no
// logprobs, no XTC. A device runner can edit such a row where it is (Backend::EditLogits) and
// sample it there.
bool IsEditableGreedy(const SamplingParams& params);
bool IsEditableDraw(const SamplingParams& params);

// True when a row asks for logprobs and, those set aside, IsEditableGreedy or IsEditableDraw
// holds, with no min_tokens masking at this step (num_output_tokens >= min_tokens): SampleRow's
// logprobs are then log_softmax of the row after the edits BuildLogitEdits lists (logit_bias,
// penalties), so a device runner can take them where it edits and samples the row
// (Backend::LogprobRows).
bool LogprobsOnEditedRow(const SamplingParams& params, int num_output_tokens);

// The edits SampleRow makes to a row before the greedy choice or the temperature (logit_bias,
// penalties, min_tokens masking of EOS and stop ids), one per token, in token order, with
// LogitEdit::row 0: applying them (ApplyLogitEdit) gives the same floats as SampleRow's steps.
// False (and no use of `edits`) when an id is out of [0, vocab_size) or logit_bias lists one id
// twice: such a row stays with the host sampler. `prompt_ids`: SortedUniqueIds(ctx.prompt) when
// the caller keeps it across steps (the repetition penalty's prompt part), else null.
bool BuildLogitEdits(const SampleContext& ctx, int vocab_size, std::vector<LogitEdit>* edits,
                     const std::vector<TokenId>* prompt_ids = nullptr);
// The ids of `ids`, sorted, each once.
std::vector<TokenId> SortedUniqueIds(std::span<const TokenId> ids);

// BuildLogitEdits for one request step after step, updated in place: when the request's output
// grew by one token since the last call (or not at all) and min_tokens masking did not switch
// off, only that token's edit changes (a binary search, at most one insertion) instead of the
// whole list being rebuilt (sorting the output, merging the prompt's ids: ~10 us a row with a
// 512-token prompt, on the engine thread, for every row of a batch). Same edits as
// BuildLogitEdits. One per request; the request's SamplingParams must not change.
class LogitEditCache {
 public:
  bool Build(const SampleContext& ctx, int vocab_size);
  // The edits of the last Build that returned true (valid until the next Build).
  const std::vector<LogitEdit>& edits() const { return edits_; }
  // Full rebuilds so far (the first call, masking switching off, gaps): tests.
  int64_t rebuilds() const { return rebuilds_; }

 private:
  bool Rebuild(const SampleContext& ctx, int vocab_size);

  std::vector<LogitEdit> edits_;
  std::vector<int> counts_;          // output occurrences of edits_[i].token
  std::vector<TokenId> prompt_ids_;  // SortedUniqueIds(prompt), for the repetition penalty
  bool have_prompt_ids_ = false;
  int64_t outputs_ = -1;  // ctx.output.size() edits_ reflect; -1: nothing built
  bool masked_ = false;   // min_tokens masking in edits_
  int64_t rebuilds_ = 0;
};

class Sampler {
 public:
  explicit Sampler(int vocab_size);

  int vocab_size() const { return vocab_size_; }

  // Samples one row (a forced row, ctx.forced >= 0: returns that token and its logprobs).
  // `logits` [vocab_size] f32 is used as scratch (overwritten). Errors (InvalidArgument,
  // belonging to this request only): NaN logits, or no token left after masking. Not thread-safe
  // (scratch buffers); use one Sampler per thread.
  StatusOr<SampleResult> SampleRow(std::span<float> logits, const SampleContext& ctx);

 private:
  struct Candidate {
    float p;
    TokenId id;
  };
  // Sum of the candidates' p, in their current order.
  double SumP() const;
  // Keeps the smallest prefix of the candidates (sorted by p desc) whose mass reaches top_p.
  // `total`: SumP().
  void ApplyTopP(float top_p, double total);
  // `chosen` as a result, with its logprob and the num_logprobs best (from scratch_ and log_z,
  // as SampleRow took them) when num_logprobs >= 0.
  SampleResult WithLogprobs(TokenId chosen, int num_logprobs, float log_z);

  int vocab_size_;
  std::vector<Candidate> candidates_;  // surviving tokens (p: probability, or logit for logprobs)
  std::vector<float> scratch_;         // [vocab] logits after bias + penalties, for logprobs
};

}  // namespace loom
