#include "engine/reasoning_budget.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "base/check.h"

namespace loom {
namespace {

Status CheckIds(const std::vector<TokenId>& ids, const char* name, int vocab_size) {
  for (TokenId id : ids) {
    if (id < 0 || id >= vocab_size) {
      return InvalidArgumentError("reasoning budget: " + std::string(name) + " token id " +
                                  std::to_string(id) + " is out of the vocabulary [0, " +
                                  std::to_string(vocab_size) + ")");
    }
  }
  return OkStatus();
}

bool EndsWith(std::span<const TokenId> s, const std::vector<TokenId>& suffix) {
  return s.size() >= suffix.size() &&
         std::equal(suffix.begin(), suffix.end(),
                    s.end() - static_cast<std::ptrdiff_t>(suffix.size()));
}

}  // namespace

Status ReasoningBudget::Validate(int vocab_size) const {
  if (max_tokens < 0) {
    return InvalidArgumentError("reasoning budget: max_tokens must be >= 0, got " +
                                std::to_string(max_tokens));
  }
  if (close.empty()) return InvalidArgumentError("reasoning budget: the close marker is empty");
  if (forced.empty()) return InvalidArgumentError("reasoning budget: the forced close is empty");
  if (!starts_open && open.empty()) {
    return InvalidArgumentError("reasoning budget: the open marker is empty");
  }
  RETURN_IF_ERROR(CheckIds(open, "open", vocab_size));
  RETURN_IF_ERROR(CheckIds(close, "close", vocab_size));
  return CheckIds(forced, "forced", vocab_size);
}

ReasoningBudgetTracker::ReasoningBudgetTracker(ReasoningBudget budget)
    : budget_(std::move(budget)), phase_(Phase::kBeforeOpen) {
  if (budget_.starts_open) Open(0);
}

void ReasoningBudgetTracker::Open(int start) {
  content_start_ = start;
  phase_ = budget_.max_tokens == 0 ? Phase::kForcing : Phase::kOpen;
  forced_idx_ = 0;
}

void ReasoningBudgetTracker::Accept(std::span<const TokenId> output) {
  CHECK(!output.empty());
  const int n = static_cast<int>(output.size());
  const TokenId last = output.back();
  switch (phase_) {
    case Phase::kBeforeOpen:
      // The reply opens the section only with its very first tokens (as ReasoningSplitter reads
      // the text; whitespace before the marker is not followed at the token level).
      if (n > static_cast<int>(budget_.open.size()) ||
          last != budget_.open[static_cast<size_t>(n - 1)]) {
        phase_ = Phase::kDone;
      } else if (n == static_cast<int>(budget_.open.size())) {
        Open(n);
      }
      return;
    case Phase::kOpen:
      if (EndsWith(output, budget_.close)) {
        phase_ = Phase::kDone;
      } else if (n - content_start_ >= budget_.max_tokens) {
        phase_ = Phase::kForcing;
        forced_idx_ = 0;
      }
      return;
    case Phase::kForcing:
      CHECK_EQ(last, budget_.forced[static_cast<size_t>(forced_idx_)])
          << "a forced reasoning-close token was not committed as forced";
      if (++forced_idx_ == static_cast<int>(budget_.forced.size())) phase_ = Phase::kDone;
      return;
    case Phase::kDone:
      return;
  }
}

}  // namespace loom
