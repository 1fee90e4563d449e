#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_quant.cuh"

namespace loom::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxHeadDim = 256;

// One warp per (token, pool, kv head): the row staged in shared memory as f32, then quantized
// (or copied, for a bf16 pool).
__global__ void __launch_bounds__(kWarps * 32) StoreKvQuantKernel(StoreKvQuantArgs a) {
  __shared__ float buf_all[kWarps][kMaxHeadDim];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int KVH = a.num_kv_heads, D = a.head_dim;
  const int64_t item = int64_t{blockIdx.x} * kWarps + warp;
  if (item >= a.n * 2 * KVH) return;
  const int64_t t = item / (2 * KVH);
  const int j = static_cast<int>(item % (2 * KVH));
  const bool is_v = j >= KVH;
  const int h = is_v ? j - KVH : j;
  const int32_t slot = a.slots[t];
  if (slot < 0 || slot >= a.num_slots) return;
  const auto* src = static_cast<const __nv_bfloat16*>(is_v ? a.v : a.k) + (t * KVH + h) * D;
  const KvPoolDesc& p = is_v ? a.v_desc : a.k_desc;
  void* pool = is_v ? a.v_pool : a.k_pool;
  if (!p.quantized()) {
    auto* dst = static_cast<__nv_bfloat16*>(pool) + (int64_t{slot} * KVH + h) * D;
    for (int d = lane; d < D; d += 32) dst[d] = src[d];
    return;
  }
  float* buf = buf_all[warp];
  for (int d = lane; d < D; d += 32) buf[d] = __bfloat162float(src[d]);
  __syncwarp();
  QuantizeRowToSlot(p, pool, slot, h, KVH, a.block_size, buf, D, lane);
}

}  // namespace

void LaunchStoreKvQuant(const StoreKvQuantArgs& args, cudaStream_t stream) {
  CHECK(args.head_dim > 0 && args.head_dim <= kMaxHeadDim && args.block_size > 0)
      << "StoreKvQuant: head_dim " << args.head_dim << " block_size " << args.block_size;
  const int64_t items = args.n * 2 * int64_t{args.num_kv_heads};
  if (items == 0) return;
  const auto blocks = static_cast<unsigned>((items + kWarps - 1) / kWarps);
  StoreKvQuantKernel<<<blocks, kWarps * 32, 0, stream>>>(args);
  CUDA_CHECK_LAUNCH();
}

}  // namespace loom::cuda
