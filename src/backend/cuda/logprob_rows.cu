// One block of 1024 threads per row: the max (f32) and the sum of exp (f64) as block reductions,
// then the top_k: each thread keeps the best top_k of its strided share in order (ties by id:
// a thread meets its ids in increasing order), and top_k rounds of a block-wide best-of-heads
// pick them in the Sampler's order. A 128k-token row is read three times from L2.
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/logprob_rows.cuh"

namespace loom::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

// The Sampler's order (Before in sample/sampler.cc): the larger logit first, equal ones by the
// lower id; no entry (id < 0) last.
__device__ __forceinline__ bool Before(float av, int ai, float bv, int bi) {
  if (bi < 0) return ai >= 0;
  if (ai < 0) return false;
  return av > bv || (av == bv && ai < bi);
}

// The best (value, id) of the warp by Before.
__device__ __forceinline__ void WarpBest(float& v, int& id) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oid = __shfl_xor_sync(0xffffffffu, id, o);
    if (Before(ov, oid, v, id)) {
      v = ov;
      id = oid;
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    LogprobRowsKernel(const float* __restrict__ x, int64_t vocab, const LogprobTask* tasks,
                      const int32_t* ids, int top_k, int stride, float* out) {
  const LogprobTask task = tasks[blockIdx.x];
  const float* row = x + int64_t{task.row} * vocab;
  float* dst = out + int64_t{blockIdx.x} * stride;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  __shared__ float red_v[kWarps];
  __shared__ int red_i[kWarps];
  __shared__ double red_d[kWarps];
  __shared__ float s_max, s_best;
  __shared__ int s_best_id;
  __shared__ double s_sum;

  float mx = -INFINITY;
  for (int64_t i = t; i < vocab; i += kThreads) mx = fmaxf(mx, row[i]);
  mx = WarpMax(mx);
  if (lane == 0) red_v[warp] = mx;
  __syncthreads();
  if (warp == 0) {
    float v = lane < kWarps ? red_v[lane] : -INFINITY;
    v = WarpMax(v);
    if (lane == 0) s_max = v;
  }
  __syncthreads();
  mx = s_max;
  double sum = 0.0;
  for (int64_t i = t; i < vocab; i += kThreads) sum += exp(static_cast<double>(row[i] - mx));
  sum = WarpSum(sum);
  if (lane == 0) red_d[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    double v = lane < kWarps ? red_d[lane] : 0.0;
    v = WarpSum(v);
    if (lane == 0) s_sum = v;
  }
  __syncthreads();
  const float log_z = mx + static_cast<float>(log(s_sum));
  if (t == 0) {
    const int32_t id = ids[task.id_index];
    dst[0] = id >= 0 && id < vocab ? row[id] - log_z : 0.0f;
  }
  if (top_k <= 0) return;

  // This thread's best top_k of ids t, t + kThreads, ..., in order.
  float tv[kLogprobMaxTopK];
  int ti[kLogprobMaxTopK];
  int count = 0;
  for (int64_t i = t; i < vocab; i += kThreads) {
    const float v = row[i];
    const int id = static_cast<int>(i);
    if (count == top_k && !Before(v, id, tv[count - 1], ti[count - 1])) continue;
    int j = count < top_k ? count++ : top_k - 1;
    while (j > 0 && Before(v, id, tv[j - 1], ti[j - 1])) {
      tv[j] = tv[j - 1];
      ti[j] = ti[j - 1];
      --j;
    }
    tv[j] = v;
    ti[j] = id;
  }
  // top_k rounds: the best of every thread's next entry; its owner moves on.
  int head = 0;
  for (int r = 0; r < top_k; ++r) {
    float v = head < count ? tv[head] : 0.0f;
    int id = head < count ? ti[head] : -1;
    WarpBest(v, id);
    if (lane == 0) {
      red_v[warp] = v;
      red_i[warp] = id;
    }
    __syncthreads();
    if (warp == 0) {
      v = lane < kWarps ? red_v[lane] : 0.0f;
      id = lane < kWarps ? red_i[lane] : -1;
      WarpBest(v, id);
      if (lane == 0) {
        s_best = v;
        s_best_id = id;
      }
    }
    __syncthreads();
    const int best = s_best_id;
    if (head < count && ti[head] == best) ++head;  // ids are unique: one owner
    if (t == 0) {
      dst[1 + 2 * r] = best >= 0 ? static_cast<float>(best) : -1.0f;
      dst[2 + 2 * r] = best >= 0 ? s_best - log_z : 0.0f;
    }
    __syncthreads();  // red_v / red_i are rewritten next round
  }
}

}  // namespace

void LaunchLogprobRows(const float* x, int64_t vocab, const LogprobTask* tasks, int64_t n,
                       const int32_t* ids, int top_k, int stride, float* out, cudaStream_t stream) {
  if (n == 0) return;
  CHECK(top_k >= 0 && top_k <= kLogprobMaxTopK && stride >= 1 + 2 * top_k)
      << "LogprobRows: top_k " << top_k << " stride " << stride;
  CHECK(vocab > 0 && vocab < (int64_t{1} << 24)) << "LogprobRows: vocab " << vocab;
  LogprobRowsKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(x, vocab, tasks, ids, top_k,
                                                                       stride, out);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace loom::cuda
