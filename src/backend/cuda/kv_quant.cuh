// Quantized KV pools on the GPU (`--kv-quant`; formats and block layout in tensor/kv_quant.h):
// how the store kernels quantize a row (bit for bit QuantizeKvRow) and how the attention kernels
// address and read one. Device code for .cu files, plus the host-side KvPoolDesc.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/kv_quant.h"

#ifdef __CUDACC__
#define LOOM_KV_HD __host__ __device__
#else
#define LOOM_KV_HD
#endif

namespace loom::cuda {

// A K or V pool as a kernel addresses it: bf16 rows ([slot][kv head][head_dim]) when quant is
// kNone, else tensor/kv_quant.h's blocks: a block's codes token-major, then its scales
// head-major. Offsets in bytes.
struct KvPoolDesc {
  KvQuant quant = KvQuant::kNone;
  int code_bytes = 0;   // per row
  int scale_bytes = 0;  // per row
  int group_shift = 0;  // log2 of the group length
  int64_t block_bytes = 0;
  int64_t scales_at = 0;  // where a block's scales start

  KvPoolDesc() = default;
  KvPoolDesc(KvQuant q, int head_dim, int block_size, int num_kv_heads) : quant(q) {
    if (q == KvQuant::kNone) return;
    const KvQuantBlock b(q, head_dim, block_size, num_kv_heads);
    code_bytes = static_cast<int>(b.code_bytes);
    scale_bytes = static_cast<int>(b.scale_bytes);
    int g = KvQuantGroup(head_dim);
    while (g > 1) {
      g >>= 1;
      ++group_shift;
    }
    block_bytes = static_cast<int64_t>(b.BlockBytes());
    scales_at = static_cast<int64_t>(b.Scales(0, 0));
  }
  LOOM_KV_HD bool quantized() const { return quant != KvQuant::kNone; }

#ifdef __CUDACC__
  // Row (token `off` of block `block`, kv head h) of a quantized pool.
  __device__ __forceinline__ int64_t CodesAt(int64_t block, int off, int h, int kvh) const {
    return block * block_bytes + (int64_t{off} * kvh + h) * code_bytes;
  }
  __device__ __forceinline__ int64_t ScalesAt(int64_t block, int off, int h, int bs) const {
    return block * block_bytes + scales_at + (int64_t{h} * bs + off) * scale_bytes;
  }
#endif
};

#ifdef __CUDACC__

__device__ __forceinline__ float Bf16BitsToF32(uint32_t bits16) {
  return __uint_as_float(bits16 << 16);
}

// e4m3 code -> f32 (exact).
__device__ __forceinline__ float E4m3ToF32(uint8_t c) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(c, __NV_E4M3);
  return __half2float(__half(h));
}

// Two e4m3 codes (low byte, high byte of `pair`) -> f16x2 (exact).
__device__ __forceinline__ uint32_t E4m3x2ToF16x2(uint32_t pair) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// Two int8 codes (byte 0 and byte 1 of `pair`) -> f16x2 (exact): each code c spread into
// 0x6400 | (c ^ 0x80), the f16 1024 + (c + 128), minus 1152.
__device__ __forceinline__ uint32_t Int8x2ToF16x2(uint32_t pair) {
  const uint32_t spread = __byte_perm(pair ^ 0x8080u, 0x64646464u, 0x4140);
  const __half2 h = *reinterpret_cast<const __half2*>(&spread);
  const __half2 r = __hsub2(h, __half2(__float2half_rn(1152.f), __float2half_rn(1152.f)));
  return *reinterpret_cast<const uint32_t*>(&r);
}

// Two codes of `q` (fp8 or int8; low byte first) -> f16x2 (exact).
template <KvQuant Q>
__device__ __forceinline__ uint32_t CodesToF16x2(uint32_t pair) {
  static_assert(Q == KvQuant::kFp8 || Q == KvQuant::kInt8, "f16 pairs of fp8 / int8 codes");
  if constexpr (Q == KvQuant::kFp8) {
    return E4m3x2ToF16x2(pair);
  } else {
    return Int8x2ToF16x2(pair);
  }
}

// 8 bytes at p, which is 2-byte aligned (a quantized pool's rows start 8-byte aligned only when
// block_size x kv heads x row bytes is: always at block_size 16, not at every odd size).
__device__ __forceinline__ uint2 Load8Bytes(const uint8_t* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  if ((at & 7) == 0) return *reinterpret_cast<const uint2*>(p);
  if ((at & 3) == 0) {
    const auto* w = reinterpret_cast<const uint32_t*>(p);
    return make_uint2(w[0], w[1]);
  }
  const auto* h = reinterpret_cast<const uint16_t*>(p);
  return make_uint2(h[0] | (uint32_t{h[1]} << 16), h[2] | (uint32_t{h[3]} << 16));
}

// Elements [e, e + 8) (e % 8 == 0) of row (block, off, kv head h) of a quantized pool as 8 bf16
// (16 bytes): each value as DequantizeKvRow computes it in f32, rounded to bf16.
__device__ __forceinline__ uint4 LoadDequantBf16x8(const uint8_t* pool, const KvPoolDesc& p,
                                                   int64_t block, int off, int h, int kvh, int bs,
                                                   int e) {
  const uint8_t* codes = pool + p.CodesAt(block, off, h, kvh);
  const uint8_t* scales = pool + p.ScalesAt(block, off, h, bs);
  const int gi = e >> p.group_shift;
  float v[8];
  if (p.quant == KvQuant::kInt4) {
    const int g = 1 << p.group_shift, half = g / 2, j = e & (g - 1);
    const uint2 raw = Load8Bytes(codes + gi * half + (j & (half - 1)));
    const uint16_t* s = reinterpret_cast<const uint16_t*>(scales) + 2 * gi;
    const float d = Bf16BitsToF32(s[0]), m = Bf16BitsToF32(s[1]);
    const int shift = j < half ? 0 : 4;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t w = i < 4 ? raw.x : raw.y;
      const uint32_t q = (w >> (8 * (i % 4) + shift)) & 0xfu;
      v[i] = fmaf(static_cast<float>(q), d, m);
    }
  } else {
    const uint2 raw = Load8Bytes(codes + e);
    const float d = Bf16BitsToF32(reinterpret_cast<const uint16_t*>(scales)[gi]);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t w = i < 4 ? raw.x : raw.y;
      const auto c = static_cast<uint8_t>(w >> (8 * (i % 4)));
      v[i] =
          (p.quant == KvQuant::kFp8 ? E4m3ToF32(c) : static_cast<float>(static_cast<int8_t>(c))) *
          d;
    }
  }
  uint4 out;
  uint32_t* o = reinterpret_cast<uint32_t*>(&out);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    o[i] = *reinterpret_cast<const uint32_t*>(&b);
  }
  return out;
}

// Quantizes row x[0, D) (f32, readable by the whole warp) of `q` into codes / scales, as
// QuantizeKvRow does bit for bit (same divisions, roundings and saturation; max and min do not
// depend on order). Called by all 32 lanes of a warp.
__device__ __forceinline__ void QuantizeRowWarp(KvQuant q, const float* x, int D, int group_shift,
                                                uint8_t* codes, uint8_t* scales, int lane) {
  const int g = 1 << group_shift;
  for (int g0 = 0, gi = 0; g0 < D; g0 += g, ++gi) {
    const float* xg = x + g0;
    if (q == KvQuant::kInt4) {
      float lo = INFINITY, hi = -INFINITY;
      for (int i = lane; i < g; i += 32) {
        lo = fminf(lo, xg[i]);
        hi = fmaxf(hi, xg[i]);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, o));
        hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, o));
      }
      const __nv_bfloat16 d16 = __float2bfloat16_rn((hi - lo) / 15.0f);
      const __nv_bfloat16 m16 = __float2bfloat16_rn(lo);
      if (lane == 0) {
        reinterpret_cast<__nv_bfloat16*>(scales)[2 * gi] = d16;
        reinterpret_cast<__nv_bfloat16*>(scales)[2 * gi + 1] = m16;
      }
      const float d = __bfloat162float(d16), m = __bfloat162float(m16);
      for (int j = lane; j < g / 2; j += 32) {
        uint32_t nib[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float v = d > 0.0f ? rintf((xg[j + h * g / 2] - m) / d) : 0.0f;
          nib[h] = static_cast<uint32_t>(fminf(fmaxf(v, 0.0f), 15.0f));
        }
        codes[g0 / 2 + j] = static_cast<uint8_t>(nib[0] | (nib[1] << 4));
      }
      continue;
    }
    float amax = 0.0f;
    for (int i = lane; i < g; i += 32) amax = fmaxf(amax, fabsf(xg[i]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float qmax = q == KvQuant::kFp8 ? 448.0f : 127.0f;
    const __nv_bfloat16 d16 = __float2bfloat16_rn(amax / qmax);
    if (lane == 0) reinterpret_cast<__nv_bfloat16*>(scales)[gi] = d16;
    const float d = __bfloat162float(d16);
    for (int i = lane; i < g; i += 32) {
      const float r = d > 0.0f ? xg[i] / d : 0.0f;
      if (q == KvQuant::kFp8) {
        codes[g0 + i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(r, __NV_SATFINITE, __NV_E4M3));
      } else {
        codes[g0 + i] =
            static_cast<uint8_t>(static_cast<int8_t>(fminf(fmaxf(rintf(r), -127.0f), 127.0f)));
      }
    }
  }
}

// Row x[0, D) (as QuantizeRowWarp) into slot `slot`, kv head h, of a quantized pool whose blocks
// hold bs tokens of kvh heads.
__device__ __forceinline__ void QuantizeRowToSlot(const KvPoolDesc& p, void* pool, int32_t slot,
                                                  int h, int kvh, int bs, const float* x, int D,
                                                  int lane) {
  auto* base = static_cast<uint8_t*>(pool);
  const int64_t block = slot / bs;
  const int off = slot - static_cast<int>(block) * bs;
  QuantizeRowWarp(p.quant, x, D, p.group_shift, base + p.CodesAt(block, off, h, kvh),
                  base + p.ScalesAt(block, off, h, bs), lane);
}

#endif  // __CUDACC__

// StoreKv into pools of which at least one is quantized: rows k / v [n, KVH * D] bf16 to slot
// slots[i] (skipped when < 0 or >= num_slots); a quantized pool's rows through QuantizeRowWarp,
// a bf16 pool's copied. head_dim <= 256.
struct StoreKvQuantArgs {
  const void* k;
  const void* v;
  int64_t n = 0;
  const int32_t* slots;
  int64_t num_slots = 0;
  int num_kv_heads = 0, head_dim = 0, block_size = 0;
  KvPoolDesc k_desc, v_desc;
  void* k_pool;
  void* v_pool;
};
void LaunchStoreKvQuant(const StoreKvQuantArgs& args, cudaStream_t stream);

}  // namespace loom::cuda
