// A reasoning budget (issue 22 item 5: Anthropic thinking.budget_tokens, vLLM's
// thinking_token_budget, --reasoning-budget): at most `max_tokens` tokens inside the reply's
// reasoning section (<think> ... </think>); when they are spent without the model closing the
// section, the engine emits the close sequence token by token instead of sampling, then sampling
// resumes for the answer.
//
//   reply:   [open]  r r r ... r   forced...   answer ...
//            \_ only when the     \_ max_tokens  \_ e.g. "\n</think>\n\n"
//               model opens it       tokens
//
// The engine works on token ids: the server tokenizes the family's markers (output_parsing.h).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "base/ids.h"
#include "base/status.h"

namespace loom {

struct ReasoningBudget {
  int max_tokens = 0;  // reasoning tokens (after the open marker) before the close is forced; >= 0
  // The prompt opened the section (its generation prompt ends with "<think>"): the reply starts
  // inside it. Otherwise the section opens when the reply's first tokens are `open`.
  bool starts_open = false;
  std::vector<TokenId> open;    // the open marker's ids; non-empty unless starts_open
  std::vector<TokenId> close;   // the close marker's ids: the model closing the section itself
  std::vector<TokenId> forced;  // emitted when the budget is spent; ends the section too

  // InvalidArgument naming the member for a negative max_tokens, an empty close / forced (or
  // open without starts_open) and ids outside [0, vocab_size).
  Status Validate(int vocab_size) const;
};

// The state of one request's budget, driven by the tokens it commits. Every state is a function
// of the request's generated tokens, which preemption and recompute keep: the tracker follows
// commits only, never the KV.
class ReasoningBudgetTracker {
 public:
  // Precondition: budget.Validate() is OK.
  explicit ReasoningBudgetTracker(ReasoningBudget budget);

  // The token the request's next row must be (the forced close under way), or none: sample.
  std::optional<TokenId> forced() const {
    if (phase_ != Phase::kForcing) return std::nullopt;
    return budget_.forced[static_cast<size_t>(forced_idx_)];
  }
  // The request committed the last token of `output` (all its generated tokens so far, one more
  // than at the previous call). A forced token must be the one forced() gave.
  void Accept(std::span<const TokenId> output);

  bool done() const { return phase_ == Phase::kDone; }

 private:
  enum class Phase {
    kBeforeOpen,  // the reply may still open the section (its first tokens so far are `open`'s)
    kOpen,        // inside the section, counting
    kForcing,     // the budget is spent: emitting `forced`
    kDone,        // closed (by the model or by force), or never opened: nothing more to do
  };
  // Enters kOpen with the section's content starting at output position `start`.
  void Open(int start);

  ReasoningBudget budget_;
  Phase phase_;
  int content_start_ = 0;  // kOpen: the output position of the section's first content token
  int forced_idx_ = 0;     // kForcing: the next token of budget_.forced
};

}  // namespace loom
