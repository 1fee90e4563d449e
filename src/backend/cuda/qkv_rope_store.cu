#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qkv_rope_store.cuh"

namespace loom::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxHeadDim = 256;

// One warp per (token, head slot); head slots are the H q heads, the KVH k heads, then the KVH v
// heads, in the order their columns sit in qkv. The head vector is staged in shared memory (f32)
// so the rope pairs (j, j + half) or (2j, 2j + 1) can be read by any lane. Numerics follow the
// unfused kernels: the norm's output is rounded to bf16 before the rope, as RmsNorm's output
// tensor would be; the rope is RopeKernel's formula.
__global__ void __launch_bounds__(kWarps * 32) QkvRopeStoreKernel(QkvRopeStoreArgs a) {
  PdlWait();
  PdlLaunchDependents();
  __shared__ float buf_all[kWarps][kMaxHeadDim];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int H = a.num_heads, KVH = a.num_kv_heads, D = a.head_dim;
  const int slots_per_token = H + 2 * KVH;
  const int64_t item = int64_t{blockIdx.x} * kWarps + warp;
  if (item >= a.n * slots_per_token) return;
  const int64_t t = item / slots_per_token;
  const int j = static_cast<int>(item % slots_per_token);
  const auto* src = static_cast<const __nv_bfloat16*>(a.qkv) + item * D;  // head j of token t
  const int32_t slot = a.slots[t];
  const bool slot_ok = slot >= 0 && slot < a.num_slots;

  float* buf = buf_all[warp];
  // A quantized pool's row: the head's final bf16 values from buf, quantized in place.
  auto quantize_to = [&](const KvPoolDesc& p, void* pool, int h) {
    __syncwarp();
    QuantizeRowToSlot(p, pool, slot, h, KVH, a.block_size, buf, D, lane);
  };
  if (j >= H + KVH) {  // a v head: straight to its slot
    if (!slot_ok) return;
    const int h = j - H - KVH;
    if (a.v_desc.quantized()) {
      for (int d = lane; d < D; d += 32) buf[d] = __bfloat162float(src[d]);
      quantize_to(a.v_desc, a.v_pool, h);
      return;
    }
    auto* dst = static_cast<__nv_bfloat16*>(a.v_pool) + (int64_t{slot} * KVH + h) * D;
    for (int d = lane; d < D; d += 32) dst[d] = src[d];
    return;
  }
  const bool is_q = j < H;
  const bool k_quant = !is_q && a.k_desc.quantized();
  __nv_bfloat16* dst = is_q ? static_cast<__nv_bfloat16*>(a.q_out) + (t * H + j) * D
                            : (slot_ok && !k_quant ? static_cast<__nv_bfloat16*>(a.k_pool) +
                                                         (int64_t{slot} * KVH + (j - H)) * D
                                                   : nullptr);
  if (dst == nullptr && !(k_quant && slot_ok)) return;

  for (int d = lane; d < D; d += 32) buf[d] = __bfloat162float(src[d]);
  const float* norm_w = is_q ? a.q_norm : a.k_norm;
  if (norm_w != nullptr) {
    float ss = 0.f;
    for (int d = lane; d < D; d += 32) ss += buf[d] * buf[d];
    ss = WarpSum(ss);
    const float inv = rsqrtf(ss / static_cast<float>(D) + a.eps);
    for (int d = lane; d < D; d += 32) {
      buf[d] = __bfloat162float(__float2bfloat16_rn(buf[d] * inv * (norm_w[d] + a.norm_offset)));
    }
  }
  __syncwarp();

  const int half = a.rotary_dim / 2;
  const float pos = static_cast<float>(a.positions[t]);
  for (int p = lane; p < half; p += 32) {
    float s, c;
    sincosf(pos * a.inv_freq[p], &s, &c);
    s *= a.attention_factor;
    c *= a.attention_factor;
    const int ia = a.interleaved ? 2 * p : p;
    const int ib = a.interleaved ? 2 * p + 1 : p + half;
    const float x0 = buf[ia], x1 = buf[ib];
    const __nv_bfloat16 y0 = __float2bfloat16_rn(x0 * c - x1 * s);
    const __nv_bfloat16 y1 = __float2bfloat16_rn(x1 * c + x0 * s);
    if (k_quant) {  // the pair is this lane's alone: updated in place
      buf[ia] = __bfloat162float(y0);
      buf[ib] = __bfloat162float(y1);
    } else {
      dst[ia] = y0;
      dst[ib] = y1;
    }
  }
  if (k_quant) {
    quantize_to(a.k_desc, a.k_pool, j - H);
    return;
  }
  for (int d = a.rotary_dim + lane; d < D; d += 32) dst[d] = __float2bfloat16_rn(buf[d]);
}

}  // namespace

void LaunchQkvRopeStore(const QkvRopeStoreArgs& args, cudaStream_t stream, bool pdl) {
  CHECK(args.head_dim > 0 && args.head_dim <= kMaxHeadDim && args.head_dim % 2 == 0)
      << "QkvRopeStore: head_dim " << args.head_dim;
  CHECK((!args.k_desc.quantized() && !args.v_desc.quantized()) || args.block_size > 0)
      << "QkvRopeStore: quantized pools need the block size";
  CHECK(args.rotary_dim > 0 && args.rotary_dim % 2 == 0 && args.rotary_dim <= args.head_dim)
      << "QkvRopeStore: rotary_dim " << args.rotary_dim << " vs head_dim " << args.head_dim;
  const int64_t items = args.n * (args.num_heads + 2 * int64_t{args.num_kv_heads});
  if (items == 0) return;
  const auto blocks = static_cast<unsigned>((items + kWarps - 1) / kWarps);
  LaunchPdl(QkvRopeStoreKernel, dim3(blocks), dim3(kWarps * 32), 0, stream, pdl, args);
}

}  // namespace loom::cuda
