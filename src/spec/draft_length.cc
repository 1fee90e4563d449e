#include "spec/draft_length.h"

#include <algorithm>
#include <cmath>

namespace loom {

void AcceptanceRate::Round(int drafted, int accepted) {
  if (drafted <= 0) return;
  accepted_ = kDecay * accepted_ + accepted;
  rejected_ = kDecay * rejected_ + (accepted < drafted ? 1.0 : 0.0);
}

void StepCost::Observe(int tokens, double seconds) {
  if (tokens <= 0 || !(seconds > 0)) return;
  const double x = tokens;
  w_ = kDecay * w_ + 1;
  x_ = kDecay * x_ + x;
  y_ = kDecay * y_ + seconds;
  xx_ = kDecay * xx_ + x * x;
  xy_ = kDecay * xy_ + x * seconds;
}

std::optional<double> StepCost::TokenCost() const {
  // Weighted least squares; a slope needs the sizes to spread by at least about one token.
  const double var = w_ * xx_ - x_ * x_;
  if (w_ < 8 || var < 0.25 * w_ * w_) return std::nullopt;
  const double b = (w_ * xy_ - x_ * y_) / var;
  const double a = (y_ - b * x_) / w_;
  if (b <= 0) return 0.0;  // more tokens cost nothing measurable
  // A non-positive intercept: the step is all per-token work. Cap r so c stays finite (r = 1e3
  // already makes c = rows / tokens to within 0.1% for any step of a token or more).
  if (a <= 0) return 1e3;
  return std::min(b / a, 1e3);
}

double DraftTokenCost(double token_cost, int rows, int tokens) {
  return rows * token_cost / (1 + token_cost * tokens);
}

int DraftLength(double alpha, double cost, int max_drafts) {
  int k = 0;
  for (double p = alpha; k < max_drafts && p > cost; p *= alpha) ++k;
  return k;
}

}  // namespace loom
