// FakeDeviceBackend (tests only): a CpuBackend that also offers the optional sampling ops a
// device backend has, computed on host memory with the host sampler's rules, and counts what it
// was asked to do. The StepSampler's device paths run on it without a GPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "sample/sampler.h"

namespace loom {

// A backend that samples where "the logits are" as the CUDA backend does on the device
// (ArgmaxRows, SampleRows, and with `edits` / `logprobs` / `masks` EditLogits, LogprobRows and
// MaskLogits), on host memory. Greedy: the host sampler's argmax rules (lowest id on ties, NaN and
// all -inf reported). Draws: a Sampler of its own given only what DrawParams carries (the step as
// that many placeholder output tokens), so a wrong seed, step or parameter the StepSampler hands
// over changes the tokens.
class FakeDeviceBackend final : public CpuBackend {
 public:
  FakeDeviceBackend(bool edits, bool logprobs, bool masks = true)
      : CpuBackend(1), edits_(edits), logprobs_(logprobs), masks_(masks) {}

  bool has_argmax_rows() const override { return true; }
  bool has_sample_rows(int64_t vocab) const override { return vocab > 0; }
  bool has_edit_logits() const override { return edits_; }
  bool has_logprob_rows() const override { return logprobs_; }
  bool has_mask_logits() const override { return masks_; }

  void MaskLogits(const Tensor& x, std::span<const int32_t> rows,
                  std::span<const std::span<const uint32_t>> masks) override {
    CHECK(masks_) << "masks for a backend that did not offer them";
    CHECK_EQ(masks.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      float* row = x.data_as<float>() + rows[i] * x.cols();
      const auto words = static_cast<int64_t>(masks[i].size());
      for (int64_t v = 0; v < x.cols(); ++v) {
        const bool allowed = v < 32 * words && ((masks[i][v / 32] >> (v % 32)) & 1) != 0;
        if (!allowed) row[v] = -INFINITY;
      }
      ++masked_rows_;
    }
  }
  void EditLogits(const Tensor& x, std::span<const LogitEdit> edits) override {
    CHECK(edits_) << "edits for a backend that did not offer them";
    std::vector<int32_t> rows;
    for (const LogitEdit& e : edits) {
      float& v = x.data_as<float>()[e.row * x.cols() + e.token];
      v = ApplyLogitEdit(e, v);
      rows.push_back(e.row);
    }
    std::sort(rows.begin(), rows.end());
    edited_rows_ += std::unique(rows.begin(), rows.end()) - rows.begin();
  }
  void ArgmaxRows(const Tensor& x, const Tensor& out) override {
    for (int64_t r = 0; r < x.rows(); ++r) {
      const float* row = x.data_as<float>() + r * x.cols();
      int32_t best = kArgmaxNone;
      float best_value = -INFINITY;
      bool nan = false;
      for (int64_t v = 0; v < x.cols(); ++v) {
        nan |= std::isnan(row[v]);
        if (row[v] > best_value) {
          best_value = row[v];
          best = static_cast<int32_t>(v);
        }
      }
      out.data_as<int32_t>()[r] = nan ? kArgmaxNaN : best;
      ++argmax_rows_;
    }
  }
  void SampleRows(const Tensor& x, std::span<const int32_t> rows,
                  std::span<const DrawParams> params, const Tensor& out) override {
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t vocab = x.cols();
      std::vector<float> row(x.data_as<float>() + rows[i] * vocab,
                             x.data_as<float>() + (rows[i] + 1) * vocab);
      out.data_as<int32_t>()[i] = Draw(params[i], row);
      ++draw_rows_;
    }
  }
  // The Sampler's arithmetic: the max in f32, the sum of exp in f64 in id order, equal logits by
  // lower id.
  void LogprobRows(const Tensor& x, std::span<const LogprobRow> rows, const Tensor& ids, int top_k,
                   const Tensor& out) override {
    CHECK(logprobs_) << "logprobs for a backend that did not offer them";
    const int64_t vocab = x.cols();
    for (size_t i = 0; i < rows.size(); ++i) {
      const float* row = x.data_as<float>() + rows[i].row * vocab;
      float mx = -INFINITY;
      for (int64_t v = 0; v < vocab; ++v) mx = std::max(mx, row[v]);
      double sum = 0.0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
      const float log_z = mx + static_cast<float>(std::log(sum));
      float* o = out.data_as<float>() + static_cast<int64_t>(i) * kLogprobStride;
      const int32_t t = ids.data_as<int32_t>()[rows[i].id_index];
      o[0] = t >= 0 ? row[t] - log_z : 0.0f;
      std::vector<int32_t> order(static_cast<size_t>(vocab));
      for (int64_t v = 0; v < vocab; ++v) order[static_cast<size_t>(v)] = static_cast<int32_t>(v);
      const auto want = static_cast<size_t>(std::min<int64_t>(top_k, vocab));
      std::partial_sort(
          order.begin(), order.begin() + static_cast<std::ptrdiff_t>(want), order.end(),
          [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      for (size_t j = 0; j < want; ++j) {
        o[1 + 2 * j] = static_cast<float>(order[j]);
        o[2 + 2 * j] = row[order[j]] - log_z;
      }
      ++logprob_rows_;
    }
  }

  bool edits_ = false;     // offers EditLogits (bias, penalties, min_tokens masking)
  bool logprobs_ = false;  // and LogprobRows (taken after the edits)
  bool masks_ = false;     // offers MaskLogits (grammar masks)
  int64_t masked_rows_ = 0;
  int64_t logprob_rows_ = 0;
  int64_t argmax_rows_ = 0;  // rows ArgmaxRows ran over (a greedy row's prefix may hold others)
  int64_t draw_rows_ = 0;
  int64_t edited_rows_ = 0;

 private:
  int32_t Draw(const DrawParams& d, std::vector<float>& row) {
    SamplingParams params;
    params.temperature = d.temperature;
    params.top_k = d.top_k;
    params.top_p = d.top_p;
    params.min_p = d.min_p;
    const std::vector<TokenId> output(d.step, 0);
    SampleContext ctx;
    ctx.params = &params;
    ctx.output = output;
    ctx.seed = d.seed;
    Sampler sampler(static_cast<int>(row.size()));
    StatusOr<SampleResult> r = sampler.SampleRow(row, ctx);
    if (r.ok()) return r->token;
    return r.status().message().find("NaN") != std::string::npos ? kArgmaxNaN : kArgmaxNone;
  }
};

}  // namespace loom
