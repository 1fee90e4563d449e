#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace loom {
namespace {

double YarnMscale(double scale) { return scale <= 1.0 ? 1.0 : 0.1 * std::log(scale) + 1.0; }

double YarnCorrectionDim(double num_rotations, int dim, double base, double max_pos) {
  return (dim * std::log(max_pos / (num_rotations * 2 * std::numbers::pi))) / (2 * std::log(base));
}

}  // namespace

RopeFrequencies ComputeRopeFrequencies(const RopeConfig& rope, int rotary_dim,
                                       int max_position_embeddings) {
  const int half = rotary_dim / 2;
  std::vector<double> base_freq(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    // HF: 1 / base ** (arange(0, dim, 2) / dim), computed in f32; the exponent is exact.
    float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    float pw = std::pow(rope.theta, exponent);
    base_freq[static_cast<size_t>(i)] = 1.0 / static_cast<double>(pw);
  }
  RopeFrequencies out;
  std::vector<double> freq(static_cast<size_t>(half));  // rounded to f32 once, at the end
  switch (rope.type) {
    case RopeType::kDefault:
      for (int i = 0; i < half; ++i) freq[i] = base_freq[i];
      break;
    case RopeType::kLinear:
      for (int i = 0; i < half; ++i) freq[i] = base_freq[i] / rope.factor;
      break;
    case RopeType::kLlama3: {
      const double old_len = rope.original_max_position_embeddings;
      const double low_wavelen = old_len / rope.low_freq_factor;
      const double high_wavelen = old_len / rope.high_freq_factor;
      for (int i = 0; i < half; ++i) {
        double f = base_freq[i];
        double wavelen = 2 * std::numbers::pi / f;
        double r;
        if (wavelen > low_wavelen) {
          r = f / rope.factor;
        } else if (wavelen < high_wavelen) {
          r = f;
        } else {
          double smooth = (old_len / wavelen - rope.low_freq_factor) /
                          (rope.high_freq_factor - rope.low_freq_factor);
          r = (1 - smooth) * f / rope.factor + smooth * f;
        }
        freq[i] = r;
      }
      break;
    }
    case RopeType::kYarn: {
      const double orig = rope.original_max_position_embeddings > 0
                              ? rope.original_max_position_embeddings
                              : max_position_embeddings;
      double low = YarnCorrectionDim(rope.beta_fast, rotary_dim, rope.theta, orig);
      double high = YarnCorrectionDim(rope.beta_slow, rotary_dim, rope.theta, orig);
      if (rope.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(rotary_dim - 1));
      if (low == high) high += 0.001;
      for (int i = 0; i < half; ++i) {
        double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
        double extrapolation_factor = 1 - ramp;
        double extra = base_freq[i];
        double inter = base_freq[i] / rope.factor;
        freq[i] = inter * (1 - extrapolation_factor) + extra * extrapolation_factor;
      }
      out.attention_factor = rope.attention_factor > 0.f
                                 ? rope.attention_factor
                                 : static_cast<float>(YarnMscale(rope.factor));
      break;
    }
  }
  // llama.cpp divides each rotation angle by its factor (ggml_rope_ext's freq_factors).
  const bool have_factors = static_cast<int>(rope.freq_factors.size()) == half;
  out.inv_freq.resize(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    double f = have_factors ? freq[i] / rope.freq_factors[static_cast<size_t>(i)] : freq[i];
    out.inv_freq[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return out;
}

}  // namespace loom
