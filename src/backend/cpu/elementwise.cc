#include "backend/cpu/elementwise.h"

#include <cmath>
#include <vector>

#include "base/check.h"

namespace loom::cpu {
namespace {

// Small ops are not worth waking threads for (the pool's wake-up and barrier cost a few us).
// Values an op must touch to go parallel: plain arithmetic, and ops with a transcendental per
// value (exp, tanh) or an f64 sum, where a decode step's rows are already worth splitting
// (134M F16, concurrency 8, 2 threads: SiluMul of 8 x 2048 values was ~4% of the step, serial).
constexpr int64_t kParallelMinValues = 1 << 16;
constexpr int64_t kParallelMinCostlyValues = 1 << 12;

int ThreadsFor(int64_t work, int num_threads, int64_t min_values = kParallelMinValues) {
  return work >= min_values ? num_threads : 1;
}

}  // namespace

void RmsNormRows(const float* x, const float* w, float eps, float weight_offset, int64_t n,
                 int64_t d, float* out, int num_threads) {
#pragma omp parallel for num_threads(ThreadsFor(n* d, num_threads, kParallelMinCostlyValues)) \
    schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * d;
    double ss = 0.0;  // f64: exact enough that the mean does not depend on d's rounding
    for (int64_t j = 0; j < d; ++j) ss += static_cast<double>(xr[j]) * xr[j];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
    float* o = out + i * d;
    for (int64_t j = 0; j < d; ++j) o[j] = xr[j] * inv * (w[j] + weight_offset);
  }
}

void RopeRows(float* x, const int32_t* positions, const float* inv_freq, int rotary_dim,
              float attention_factor, bool interleaved, int64_t n, int num_heads, int head_dim,
              int num_threads) {
  CHECK(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim)
      << "Rope: rotary_dim " << rotary_dim << " vs head_dim " << head_dim;
  const int half = rotary_dim / 2;
#pragma omp parallel num_threads(ThreadsFor(n* num_heads* head_dim, num_threads))
  {
    std::vector<float> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      // Like HF: angle = f32(position) * inv_freq in f32, then cos/sin, then * attention_factor.
      for (int j = 0; j < half; ++j) {
        const float theta = static_cast<float>(positions[i]) * inv_freq[j];
        cos_t[static_cast<size_t>(j)] = std::cos(theta) * attention_factor;
        sin_t[static_cast<size_t>(j)] = std::sin(theta) * attention_factor;
      }
      for (int h = 0; h < num_heads; ++h) {
        float* v =
            x + i * static_cast<int64_t>(num_heads) * head_dim + static_cast<int64_t>(h) * head_dim;
        for (int j = 0; j < half; ++j) {
          const int a = interleaved ? 2 * j : j;
          const int b = interleaved ? 2 * j + 1 : j + half;
          const float c = cos_t[static_cast<size_t>(j)], s = sin_t[static_cast<size_t>(j)];
          const float x0 = v[a], x1 = v[b];
          v[a] = x0 * c - x1 * s;
          v[b] = x1 * c + x0 * s;
        }
      }
    }
  }
}

void SiluMulValues(const float* gate, const float* up, float* out, int64_t count, int num_threads) {
#pragma omp parallel for num_threads(ThreadsFor(count, num_threads, kParallelMinCostlyValues)) \
    schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void GeluTanhMulValues(const float* gate, const float* up, float* out, int64_t count,
                       int num_threads) {
  const float k = std::sqrt(2.0f / static_cast<float>(M_PI));
#pragma omp parallel for num_threads(ThreadsFor(count, num_threads, kParallelMinCostlyValues)) \
    schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(k * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void SoftCapValues(float* x, int64_t count, float cap, int num_threads) {
  CHECK_GT(cap, 0.0f);
#pragma omp parallel for num_threads(ThreadsFor(count, num_threads, kParallelMinCostlyValues)) \
    schedule(static)
  for (int64_t i = 0; i < count; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void StoreValues(const float* src, DType dtype, void* dst, int64_t count) {
  switch (dtype) {
    case DType::kF32:
      for (int64_t i = 0; i < count; ++i) static_cast<float*>(dst)[i] = src[i];
      return;
    case DType::kF16:
      for (int64_t i = 0; i < count; ++i) static_cast<uint16_t*>(dst)[i] = F32ToF16(src[i]);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < count; ++i) static_cast<uint16_t*>(dst)[i] = F32ToBf16(src[i]);
      return;
    default:
      break;
  }
  CHECK(false) << "KV pools must be f32, f16 or bf16, got " << DTypeName(dtype);
}

}  // namespace loom::cpu
