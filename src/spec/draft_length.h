// How many drafts a row should verify this step, so that speculation pays. Two measurements:
//  - AcceptanceRate: the chance alpha that a row's next draft is accepted given the drafts before
//    it were (each round of k drafts with m accepted is m successes and, when m < k, one failure;
//    counts decay so the estimate follows the row's text).
//  - StepCost: a fit of a step's time as a + b * tokens over recent steps; r = b / a is what one
//    more token in a step costs, in units of a step's fixed cost.
// With R sampled rows in a step of N tokens, the step yields about R tokens per (1 + r N) fixed
// costs, so one draft token costs c = R r / (1 + r N) output tokens of the step's rate. Draft j
// of a row is accepted with probability alpha^j, so a row drafts while alpha^j > c: long drafts
// when a step's fixed cost dominates (batch 1 on a GPU, weights streamed once per step), none
// once the batch is compute-bound (r N >> 1 makes c -> R / N = 1) or when drafts are rejected.
#pragma once

#include <optional>

namespace loom {

class AcceptanceRate {
 public:
  // One verify round: `drafted` drafts scored, the first `accepted` of them accepted.
  void Round(int drafted, int accepted);
  double alpha() const { return accepted_ / (accepted_ + rejected_); }

 private:
  static constexpr double kDecay = 0.9;  // per round
  double accepted_ = 1.0;                // prior: alpha 0.5, worth two drafts
  double rejected_ = 1.0;
};

class StepCost {
 public:
  // A step of `tokens` tokens that took `seconds` (its forward and sampling).
  void Observe(int tokens, double seconds);
  // r = b / a: one token's share of a step relative to the step's fixed cost; nullopt until the
  // steps seen differ enough in size to fit a slope.
  std::optional<double> TokenCost() const;

 private:
  static constexpr double kDecay = 0.99;            // per step: about the last 100 steps count
  double w_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;  // decayed sums of 1, tokens, s, tokens^2, ...
};

// Output tokens one draft token costs in a step of `tokens` tokens with `rows` sampled rows,
// given the token cost r: rows * r / (1 + r * tokens).
double DraftTokenCost(double token_cost, int rows, int tokens);

// The most drafts (<= max_drafts) whose last is still worth verifying: the largest k with
// alpha^k > cost; 0 when even the first is not.
int DraftLength(double alpha, double cost, int max_drafts);

}  // namespace loom
