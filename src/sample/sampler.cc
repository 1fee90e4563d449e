#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <unordered_map>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "base/check.h"

namespace loom {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Higher probability first; equal probabilities by lower id, so the order is total.
template <typename C>
bool Before(const C& a, const C& b) {
  return a.p > b.p || (a.p == b.p && a.id < b.id);
}

bool AnyNaN(std::span<const float> row) {
  int nan = 0;  // an int, not a bool with an early exit, so the loop vectorizes
  for (float l : row) nan |= static_cast<int>(l != l);
  return nan != 0;
}

// The largest value of a row without NaN. For such rows max is order-independent up to the sign
// of a zero maximum, which no caller can see: x - (+0) == x - (-0) except for x = -0, and both
// exp(+0) and exp(-0) are 1; mx + log(sum) is +0 for either zero when log(sum) is +0. So a
// lane-parallel max gives the same results as the sequential one it replaces.
float MaxOf(std::span<const float> row) {
  size_t i = 0;
  float mx = kNegInf;
#if defined(__SSE__)
  // MAXPS(x, m) = x > m ? x : m lane by lane: four independent running maxima per register.
  __m128 m0 = _mm_set1_ps(kNegInf), m1 = m0, m2 = m0, m3 = m0;
  for (; i + 16 <= row.size(); i += 16) {
    m0 = _mm_max_ps(_mm_loadu_ps(row.data() + i), m0);
    m1 = _mm_max_ps(_mm_loadu_ps(row.data() + i + 4), m1);
    m2 = _mm_max_ps(_mm_loadu_ps(row.data() + i + 8), m2);
    m3 = _mm_max_ps(_mm_loadu_ps(row.data() + i + 12), m3);
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3)));
  for (float l : lanes) mx = std::max(mx, l);
#endif
  for (; i < row.size(); ++i) mx = std::max(mx, row[i]);
  return mx;
}

// Mirrors SampleRow: no step before the greedy choice or the temperature edits the row (bias,
// penalties, min_tokens masking) or needs the raw logits (logprobs).
bool UnmodifiedRow(const SamplingParams& params, int num_output_tokens) {
  return params.logit_bias.empty() && params.repetition_penalty == 1.0f &&
         params.presence_penalty == 0.0f && params.frequency_penalty == 0.0f &&
         params.num_logprobs < 0 && num_output_tokens >= params.min_tokens;
}

}  // namespace

float PenaltySubtrahend(const SamplingParams& params, int count) {
  return params.frequency_penalty * static_cast<float>(count) + params.presence_penalty;
}

void ApplyLogitBias(const SamplingParams& params, std::span<float> logits) {
  for (const auto& [id, bias] : params.logit_bias) {
    CHECK(id >= 0 && static_cast<size_t>(id) < logits.size()) << "unvalidated logit_bias id";
    logits[id] += bias;
  }
}

void ApplyPenalties(const SamplingParams& params, std::span<const TokenId> prompt,
                    std::span<const TokenId> output, std::span<float> logits) {
  if (params.repetition_penalty != 1.0f) {
    const float r = params.repetition_penalty;
    std::vector<TokenId> seen(prompt.begin(), prompt.end());
    seen.insert(seen.end(), output.begin(), output.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (TokenId id : seen) {
      CHECK(id >= 0 && static_cast<size_t>(id) < logits.size()) << "token id " << id;
      float& l = logits[id];
      l = l > 0.0f ? l / r : l * r;
    }
  }
  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
    std::unordered_map<TokenId, int> counts;
    for (TokenId id : output) ++counts[id];
    for (const auto& [id, n] : counts) {
      CHECK(id >= 0 && static_cast<size_t>(id) < logits.size()) << "token id " << id;
      logits[id] -= PenaltySubtrahend(params, n);
    }
  }
}

bool IsPlainGreedy(const SamplingParams& params, int num_output_tokens) {
  return params.greedy() && UnmodifiedRow(params, num_output_tokens);
}

bool IsEditableGreedy(const SamplingParams& params) {
  return params.greedy() && params.num_logprobs < 0;
}

bool IsEditableDraw(const SamplingParams& params) {
  return !params.greedy() && params.temperature > 0.0f && params.xtc_probability == 0.0f &&
         params.num_logprobs < 0;
}

bool LogprobsOnEditedRow(const SamplingParams& params, int num_output_tokens) {
  if (params.num_logprobs < 0 || num_output_tokens < params.min_tokens) return false;
  SamplingParams without = params;
  without.num_logprobs = -1;
  return IsEditableGreedy(without) || IsEditableDraw(without);
}

std::vector<TokenId> SortedUniqueIds(std::span<const TokenId> ids) {
  std::vector<TokenId> out(ids.begin(), ids.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool BuildLogitEdits(const SampleContext& ctx, int vocab_size, std::vector<LogitEdit>* edits,
                     const std::vector<TokenId>* prompt_ids) {
  const SamplingParams& p = *ctx.params;
  edits->clear();
  auto valid = [&](TokenId id) { return id >= 0 && id < vocab_size; };
  // Each step's tokens as a sorted list, then one merge: a row's edits are built once a step for
  // every row of a batch, on the engine thread, so no maps.
  std::vector<std::pair<TokenId, float>> bias(p.logit_bias.begin(), p.logit_bias.end());
  std::sort(bias.begin(), bias.end());
  for (size_t i = 0; i < bias.size(); ++i) {
    if (!valid(bias[i].first) || (i > 0 && bias[i].first == bias[i - 1].first)) return false;
  }
  std::vector<TokenId> output(ctx.output.begin(), ctx.output.end());  // sorted, with repeats
  std::sort(output.begin(), output.end());
  if (!output.empty() && (!valid(output.front()) || !valid(output.back()))) return false;
  std::vector<TokenId> seen;  // repetition penalty: prompt and output ids
  if (p.repetition_penalty != 1.0f) {
    std::vector<TokenId> computed;
    if (prompt_ids == nullptr) {
      computed = SortedUniqueIds(ctx.prompt);
      prompt_ids = &computed;
    }
    if (!prompt_ids->empty() && (!valid(prompt_ids->front()) || !valid(prompt_ids->back()))) {
      return false;
    }
    std::set_union(prompt_ids->begin(), prompt_ids->end(), output.begin(), output.end(),
                   std::back_inserter(seen));
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  }
  const bool counts = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  std::vector<TokenId> masked;
  if (static_cast<int>(ctx.output.size()) < p.min_tokens) {
    if (!p.ignore_eos) {
      for (TokenId id : ctx.eos_token_ids) {
        if (valid(id)) masked.push_back(id);
      }
    }
    for (TokenId id : p.stop_token_ids) {
      if (!valid(id)) return false;
      masked.push_back(id);
    }
    masked = SortedUniqueIds(masked);
  }
  size_t ib = 0, is = 0, io = counts ? 0 : output.size(), im = 0;
  while (true) {
    TokenId t = vocab_size;
    if (ib < bias.size()) t = std::min(t, bias[ib].first);
    if (is < seen.size()) t = std::min(t, seen[is]);
    if (io < output.size()) t = std::min(t, output[io]);
    if (im < masked.size()) t = std::min(t, masked[im]);
    if (t == vocab_size) break;
    LogitEdit& e = edits->emplace_back();
    e.token = t;
    if (ib < bias.size() && bias[ib].first == t) {
      e.ops |= LogitEdit::kBias;
      e.bias = bias[ib++].second;
    }
    if (is < seen.size() && seen[is] == t) {
      e.ops |= LogitEdit::kRepetition;
      e.repetition = p.repetition_penalty;
      ++is;
    }
    if (io < output.size() && output[io] == t) {
      int n = 0;
      for (; io < output.size() && output[io] == t; ++io) ++n;
      e.ops |= LogitEdit::kSubtract;
      e.subtract = PenaltySubtrahend(p, n);
    }
    if (im < masked.size() && masked[im] == t) {
      e.ops |= LogitEdit::kMask;
      ++im;
    }
  }
  return true;
}

namespace {
// The first edit of `edits` (sorted by token) whose token is not below `t`.
std::vector<LogitEdit>::iterator LowerEdit(std::vector<LogitEdit>& edits, TokenId t) {
  return std::lower_bound(edits.begin(), edits.end(), t,
                          [](const LogitEdit& e, TokenId id) { return e.token < id; });
}
}  // namespace

bool LogitEditCache::Rebuild(const SampleContext& ctx, int vocab_size) {
  const SamplingParams& p = *ctx.params;
  if (p.repetition_penalty != 1.0f && !have_prompt_ids_) {
    prompt_ids_ = SortedUniqueIds(ctx.prompt);
    have_prompt_ids_ = true;
  }
  outputs_ = -1;
  ++rebuilds_;
  if (!BuildLogitEdits(ctx, vocab_size, &edits_, have_prompt_ids_ ? &prompt_ids_ : nullptr)) {
    return false;
  }
  counts_.assign(edits_.size(), 0);
  for (TokenId t : ctx.output) {
    const auto it = LowerEdit(edits_, t);
    if (it != edits_.end() && it->token == t) ++counts_[static_cast<size_t>(it - edits_.begin())];
  }
  outputs_ = static_cast<int64_t>(ctx.output.size());
  masked_ = static_cast<int>(ctx.output.size()) < p.min_tokens;
  return true;
}

bool LogitEditCache::Build(const SampleContext& ctx, int vocab_size) {
  const SamplingParams& p = *ctx.params;
  const int64_t n = static_cast<int64_t>(ctx.output.size());
  const bool masked = n < p.min_tokens;
  const bool reuse = outputs_ >= 0 && masked == masked_ && (n == outputs_ || n == outputs_ + 1);
  if (!reuse) {
    if (!Rebuild(ctx, vocab_size)) return false;
  } else if (n == outputs_ + 1) {  // one new token: its edit, and nothing else, changes
    const TokenId t = ctx.output.back();
    if (t < 0 || t >= vocab_size) {
      outputs_ = -1;
      return false;
    }
    const bool repetition = p.repetition_penalty != 1.0f;
    const bool counted = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
    if (repetition || counted) {
      auto it = LowerEdit(edits_, t);
      size_t i = static_cast<size_t>(it - edits_.begin());
      if (it == edits_.end() || it->token != t) {
        LogitEdit e;
        e.token = t;
        edits_.insert(it, e);
        counts_.insert(counts_.begin() + static_cast<std::ptrdiff_t>(i), 0);
      }
      LogitEdit& e = edits_[i];
      ++counts_[i];
      if (repetition) {
        e.ops |= LogitEdit::kRepetition;
        e.repetition = p.repetition_penalty;
      }
      if (counted) {
        e.ops |= LogitEdit::kSubtract;
        e.subtract = PenaltySubtrahend(p, counts_[i]);
      }
    }
    outputs_ = n;
  }
  return true;
}

bool IsPlainDraw(const SamplingParams& params, int num_output_tokens) {
  return !params.greedy() && params.temperature > 0.0f && params.xtc_probability == 0.0f &&
         UnmodifiedRow(params, num_output_tokens);
}

Sampler::Sampler(int vocab_size) : vocab_size_(vocab_size) { CHECK_GT(vocab_size, 0); }

double Sampler::SumP() const {
  double total = 0.0;
  for (const Candidate& c : candidates_) total += c.p;
  return total;
}

void Sampler::ApplyTopP(float top_p, double total) {
  const double target = top_p * total;
  // Sort only as much of the head as needed: grow the sorted prefix until it holds the mass. Each
  // round selects the next slice with nth_element (linear) and sorts only that slice, so a flat
  // distribution (top-p keeping most of a 128k vocabulary) costs about one sort, not a chain of
  // heap-based partial sorts (~50 ms a row). `Before` is a total order, so the prefix and the
  // running sum are exactly what one partial_sort of the whole head would give.
  const size_t n = candidates_.size();
  size_t sorted = 0;
  size_t m = std::min<size_t>(256, n);
  double cum = 0.0;
  while (true) {
    const auto first = candidates_.begin() + static_cast<std::ptrdiff_t>(sorted);
    const auto mid = candidates_.begin() + static_cast<std::ptrdiff_t>(m);
    if (mid != candidates_.end())
      std::nth_element(first, mid, candidates_.end(), Before<Candidate>);
    std::sort(first, mid, Before<Candidate>);
    for (size_t i = sorted; i < m; ++i) {
      cum += candidates_[i].p;
      if (cum >= target) {
        candidates_.resize(i + 1);
        return;
      }
    }
    if (m == n) return;  // rounding: keep everything
    sorted = m;
    m = std::min(n, m * 4);
  }
}

StatusOr<SampleResult> Sampler::SampleRow(std::span<float> logits, const SampleContext& ctx) {
  CHECK(ctx.params != nullptr);
  CHECK_EQ(static_cast<int>(logits.size()), vocab_size_);
  const SamplingParams& params = *ctx.params;
  if (AnyNaN(logits)) return InvalidArgumentError("the model produced NaN logits");

  ApplyLogitBias(params, logits);
  ApplyPenalties(params, ctx.prompt, ctx.output, logits);

  // Raw log-softmax for logprobs (see the file comment), before any masking: keep a copy.
  float log_z = 0.0f;
  if (params.num_logprobs >= 0) {
    scratch_.assign(logits.begin(), logits.end());
    const float mx = MaxOf(logits);
    double sum = 0.0;
    for (float l : logits) sum += std::exp(static_cast<double>(l - mx));
    log_z = mx + static_cast<float>(std::log(sum));
  }
  if (ctx.forced >= 0) {
    CHECK_LT(ctx.forced, vocab_size_) << "forced token out of the vocabulary";
    return WithLogprobs(ctx.forced, params.num_logprobs, log_z);
  }

  if (static_cast<int>(ctx.output.size()) < params.min_tokens) {
    if (!params.ignore_eos) {
      for (TokenId id : ctx.eos_token_ids) {
        if (id >= 0 && id < vocab_size_) logits[id] = kNegInf;
      }
    }
    for (TokenId id : params.stop_token_ids) {
      CHECK(id >= 0 && id < vocab_size_) << "unvalidated stop token id " << id;
      logits[id] = kNegInf;
    }
  }

  if (!ctx.allowed.empty()) {
    const size_t words = std::min(ctx.allowed.size(), (logits.size() + 31) / 32);
    for (size_t w = 0; w < words; ++w) {
      const uint32_t bits = ctx.allowed[w];
      if (bits == ~uint32_t{0}) continue;
      const size_t end = std::min(logits.size(), w * 32 + 32);
      for (size_t i = w * 32; i < end; ++i) {
        if (((bits >> (i & 31)) & 1) == 0) logits[i] = kNegInf;
      }
    }
    for (size_t i = words * 32; i < logits.size(); ++i) logits[i] = kNegInf;
  }

  const uint64_t step = ctx.output.size();
  TokenId chosen = -1;
  if (params.greedy()) {
    float best = kNegInf;
    for (int i = 0; i < vocab_size_; ++i) {
      if (logits[i] > best) {
        best = logits[i];
        chosen = i;
      }
    }
  } else {
    const float inv_t = 1.0f / params.temperature;
    const float mx = MaxOf(logits);
    if (mx == kNegInf) {
      return InvalidArgumentError("no token left to sample: every token is masked");
    }
    // Every unmasked token in id order, and `total`, the sum of their p in that order: any later
    // sum over the candidates that adds up this same set in this same order is `total` exactly,
    // so it is taken from here (in the shadow of exp) instead of a second pass.
    candidates_.clear();
    double total = 0.0;
    for (int i = 0; i < vocab_size_; ++i) {
      if (logits[i] == kNegInf) continue;
      const float p = std::exp((logits[i] - mx) * inv_t);
      candidates_.push_back({p, i});
      total += p;
    }
    const size_t num_unmasked = candidates_.size();
    bool reordered = false;  // candidates_ are not in id order
    // Candidates only ever leave, so the same size is the same set.
    auto whole_in_id_order = [&] { return !reordered && candidates_.size() == num_unmasked; };
    if (params.top_k > 0 && static_cast<size_t>(params.top_k) < candidates_.size()) {
      reordered = true;
      const auto kth = candidates_.begin() + params.top_k;
      if (params.top_p < 1.0f || params.xtc_probability > 0.0f) {
        // Both sum the survivors in the order nth_element leaves them: keep that order.
        std::nth_element(candidates_.begin(), kth, candidates_.end(), Before<Candidate>);
      } else {
        // Only the set of the k best survives (Before is a total order, so it is unique), and a
        // k-heap finds it several times faster than nth_element over a large vocabulary.
        std::partial_sort(candidates_.begin(), kth, candidates_.end(), Before<Candidate>);
      }
      candidates_.resize(params.top_k);
    }
    if (params.top_p < 1.0f) {
      ApplyTopP(params.top_p, whole_in_id_order() ? total : SumP());
      reordered = true;
    }
    if (params.min_p > 0.0f) {
      float p_max = 0.0f;
      for (const Candidate& c : candidates_) p_max = std::max(p_max, c.p);
      const float cut = params.min_p * p_max;
      std::erase_if(candidates_, [cut](const Candidate& c) { return c.p < cut; });
    }
    if (params.xtc_probability > 0.0f &&
        CounterUniform(ctx.seed, step, /*stream=*/1) < params.xtc_probability) {
      // XTC ("exclude top choices"): drop every token at or above the threshold except the
      // least likely of them, when there are at least two.
      const double cut = params.xtc_threshold * (whole_in_id_order() ? total : SumP());
      int num_above = 0;
      const Candidate* last_above = nullptr;
      for (const Candidate& c : candidates_) {
        if (c.p >= cut) {
          ++num_above;
          if (last_above == nullptr || Before(*last_above, c)) last_above = &c;
        }
      }
      if (num_above >= 2) {
        const Candidate keep = *last_above;
        std::erase_if(candidates_,
                      [&](const Candidate& c) { return c.p >= cut && !(c.id == keep.id); });
      }
    }
    // Inverse CDF in id order: deterministic whatever order the steps above left. Candidates
    // start in id order and only top-k / top-p reorder them (min-p and XTC erase stably).
    if (reordered) {
      std::sort(candidates_.begin(), candidates_.end(),
                [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
      reordered = false;
    }
    if (!whole_in_id_order()) total = SumP();
    const double target = CounterUniform(ctx.seed, step, /*stream=*/0) * total;
    double cum = 0.0;
    chosen = candidates_.back().id;
    for (const Candidate& c : candidates_) {
      cum += c.p;
      if (cum > target) {
        chosen = c.id;
        break;
      }
    }
  }
  if (chosen < 0) return InvalidArgumentError("no token left to sample: every token is masked");
  return WithLogprobs(chosen, params.num_logprobs, log_z);
}

SampleResult Sampler::WithLogprobs(TokenId chosen, int num_logprobs, float log_z) {
  SampleResult result;
  result.token = chosen;
  if (num_logprobs >= 0) {
    result.logprob = scratch_[chosen] - log_z;
    const int k = std::min(num_logprobs, vocab_size_);
    if (k > 0) {
      candidates_.clear();
      for (int i = 0; i < vocab_size_; ++i) candidates_.push_back({scratch_[i], i});
      std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(),
                        Before<Candidate>);
      result.top_logprobs.reserve(k);
      for (int i = 0; i < k; ++i) {
        result.top_logprobs.push_back({candidates_[i].id, candidates_[i].p - log_z});
      }
    }
  }
  return result;
}

}  // namespace loom
