#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/flash_prefill.cuh"

namespace loom::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr float kLog2e = 1.4426950408889634f;

// Shapes of one kernel instance. W warps of 16 x MT query rows each (MT = 2: every K/V fragment
// read from shared memory feeds two m16 row tiles, halving shared-memory traffic per flop, at
// twice the accumulator registers); K/V tiles of kKeys keys. q fragments stay in registers when
// they fit (16 rows, head_dim <= 128), else are re-read from shared memory per key tile.
// head_dim 256 uses 32-key tiles: its f32 output accumulator alone is 128 registers a thread.
template <int D, int W, int MT>
struct Shape {
  static_assert(MT == 1 || (MT == 2 && D <= 128), "two row tiles a warp only up to head_dim 128");
  static constexpr int kThreads = W * 32;
  static constexpr int kWarpRows = 16 * MT;
  static constexpr int kRows = W * kWarpRows;
  static constexpr int kKeys = D == 256 ? 32 : 64;
  static constexpr bool kQInRegs = MT * D <= 128;
  // bf16 per shared row: 16 bytes of padding so the 8 rows an ldmatrix reads start in
  // different bank groups (a D * 2-byte stride would put them all in the same banks).
  static constexpr int kStride = D + 8;
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static constexpr size_t kSmemBytes = size_t{kRows + 4 * kKeys} * kStride * sizeof(bf16);
};

struct FlashArgs : PagedKernelTables {
  const int32_t* tile_start;
  int num_seqs, block_size, q_per_tile;
  float scale;
};

// ---- PTX wrappers ----

// 16-byte global -> shared copy; !valid zero-fills the destination (src-size 0) so padded K/V
// rows are 0, not stale data that could hold Inf/NaN (P = 0 times NaN is NaN).
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void CpAsyncWaitAll() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// c += a (16x16, row) * b (16x8, col), bf16 -> f32.
__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x on the SFU (ex2.approx.ftz: ~2 ulp; results below 2^-126 flush to 0, which for softmax
// weights relative to the row max is harmless). exp2f adds range handling around the same
// instruction, and the exponentials are a sizable share of the kernel's issue slots.
__device__ __forceinline__ float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lo) in the low half
  return *reinterpret_cast<const uint32_t*>(&v);
}

// ---- Tile bookkeeping ----

// The query tile a block handles and the keys its rows may see.
struct Tile {
  int seq;
  int t0;    // first token (row of q / out)
  int rows;  // ntok * group valid rows
  int pos0;  // position of the first token
  int k_lo;  // keys [k_lo, k_hi) seen by some row
  int k_hi;
};

// Blocks take tiles from the last to the first: within a sequence the late tiles see the most
// keys, so the long blocks start first and the short ones fill the tail of the grid.
__device__ __forceinline__ bool FindTile(const FlashArgs& a, Tile& t) {
  const int total = a.tile_start[a.num_seqs];
  if (static_cast<int>(blockIdx.y) >= total) return false;
  const int tile = total - 1 - static_cast<int>(blockIdx.y);
  const int s = SequenceOfTile(a.tile_start, a.num_seqs, tile);
  const int q0 = a.query_start[s];
  const int q_len = a.query_start[s + 1] - q0;
  t.seq = s;
  t.t0 = q0 + (tile - a.tile_start[s]) * a.q_per_tile;
  const int ntok = min(a.q_per_tile, q0 + q_len - t.t0);
  t.rows = ntok * a.group;
  t.pos0 = a.kv_len[s] - q_len + (t.t0 - q0);
  t.k_lo = a.window > 0 ? max(0, t.pos0 - a.window + 1) : 0;
  t.k_hi = t.pos0 + ntok;
  return true;
}

// Row r of a tile is token r / group, head g * group + r % group: its offset in q / out.
__device__ __forceinline__ int64_t RowOffset(const FlashArgs& a, const Tile& t, int g, int r,
                                             int D) {
  const int64_t tok = t.t0 + r / a.group;
  const int64_t head = int64_t{g} * a.group + r % a.group;
  return (tok * a.num_heads + head) * D;
}

// ---- Shared-memory loads ----

template <int D, int W, int MT>
__device__ __forceinline__ void LoadQ(const FlashArgs& a, const Tile& t, int g, bf16* q_s) {
  using S = Shape<D, W, MT>;
  for (int i = threadIdx.x; i < S::kRows * S::kChunks; i += S::kThreads) {
    const int r = i / S::kChunks, c = i % S::kChunks;
    const bool valid = r < t.rows;
    const bf16* src = valid ? a.q + RowOffset(a, t, g, r, D) + c * 8 : a.q;
    CpAsync16(SmemAddress(q_s + r * S::kStride + c * 8), src, valid);
  }
}

// Keys [kt, kt + kKeys) of kv head g, gathered through the page table; rows past k_hi are zero.
template <int D, int W, int MT>
__device__ __forceinline__ void LoadKv(const FlashArgs& a, const int32_t* pages, int g, int kt,
                                       int k_hi, bf16* k_s, bf16* v_s) {
  using S = Shape<D, W, MT>;
  constexpr int kRowsPerPass = S::kThreads / S::kChunks;
  static_assert(S::kThreads % S::kChunks == 0, "a thread keeps one chunk column");
  const int c = threadIdx.x % S::kChunks;
  for (int r = threadIdx.x / S::kChunks; r < S::kKeys; r += kRowsPerPass) {
    const int p = kt + r;
    const bool valid = p < k_hi;
    int64_t off = 0, block = 0;
    if (valid) {
      block = pages[p / a.block_size];
      off = ((block * a.block_size + p % a.block_size) * a.num_kv_heads + g) * D + c * 8;
    }
    // A quantized pool's rows are decoded here (plain loads and stores; the bf16 rows' copies
    // stay asynchronous).
    const auto dequant = [&](const KvPoolDesc& desc, const bf16* pool, bf16* dst) {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (valid) {
        v = LoadDequantBf16x8(reinterpret_cast<const uint8_t*>(pool), desc, block, p % a.block_size,
                              g, a.num_kv_heads, a.block_size, c * 8);
      }
      *reinterpret_cast<uint4*>(dst) = v;
    };
    if (a.k_desc.quantized()) {
      dequant(a.k_desc, a.k_pool, k_s + r * S::kStride + c * 8);
    } else {
      CpAsync16(SmemAddress(k_s + r * S::kStride + c * 8), a.k_pool + off, valid);
    }
    if (a.v_desc.quantized()) {
      dequant(a.v_desc, a.v_pool, v_s + r * S::kStride + c * 8);
    } else {
      CpAsync16(SmemAddress(v_s + r * S::kStride + c * 8), a.v_pool + off, valid);
    }
  }
}

// ---- Per-warp math ----
// A warp owns rows [row0, row0 + 16 MT); its row tile mt is rows row0 + 16 mt + [0, 16). A lane
// holds rows lane / 4 and lane / 4 + 8 of each row tile (m16n8k16 accumulator layout).

// A fragment of q rows [row0, row0 + 16) x dims [16 kc, 16 kc + 16) (m16n8k16 A layout: matrices
// rows 0-7 / 8-15 x dims 0-7 / 8-15, in the order a0..a3).
template <int D, int W, int MT>
__device__ __forceinline__ void LoadQFragment(uint32_t (&f)[4], const bf16* q_s, int row0, int kc) {
  const int lane = threadIdx.x % 32;
  LdMatrixX4(f, SmemAddress(q_s + (row0 + lane % 16) * Shape<D, W, MT>::kStride + kc * 16 +
                            (lane / 16) * 8));
}

template <int D, int W, int MT>
using Scores = float[MT][Shape<D, W, MT>::kKeys / 8][4];
template <int D, int MT>
using Acc = float[MT][D / 8][4];
template <int D, int W, int MT>
using QRegs = uint32_t[Shape<D, W, MT>::kQInRegs ? MT * D / 16 : 1][4];

// sc = q K^T for the warp's rows x kKeys keys. K rows are the B operand's columns, stored
// key-major, so plain ldmatrix yields B fragments: one x4 covers 16 keys x 16 dims = the
// (b0, b1) pairs of two 8-key blocks, used by each of the warp's row tiles.
template <int D, int W, int MT>
__device__ __forceinline__ void QKt(Scores<D, W, MT>& sc, const QRegs<D, W, MT>& qf,
                                    const bf16* q_s, const bf16* k_s, int row0) {
  using S = Shape<D, W, MT>;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nb = 0; nb < S::kKeys / 8; ++nb) {
      sc[mt][nb][0] = sc[mt][nb][1] = sc[mt][nb][2] = sc[mt][nb][3] = 0.f;
    }
  }
  const bf16* k_lane = k_s + (lane % 8 + (lane / 16) * 8) * S::kStride + ((lane / 8) % 2) * 8;
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if constexpr (S::kQInRegs) {
#pragma unroll
        for (int i = 0; i < 4; ++i) a[mt][i] = qf[mt * (D / 16) + kc][i];
      } else {
        LoadQFragment<D, W, MT>(a[mt], q_s, row0 + 16 * mt, kc);
      }
    }
#pragma unroll
    for (int nb2 = 0; nb2 < S::kKeys / 16; ++nb2) {
      uint32_t b[4];
      LdMatrixX4(b, SmemAddress(k_lane + nb2 * 16 * S::kStride + kc * 16));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        Mma(sc[mt][2 * nb2], a[mt], b[0], b[1]);
        Mma(sc[mt][2 * nb2 + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// Scores to log2 units (scale, optional soft-cap, log2 e), then -inf where the key is outside
// the row's causal / window range. Only tiles that reach past a row's range pay for the mask.
template <int D, int W, int MT>
__device__ __forceinline__ void ScaleAndMask(const FlashArgs& a, const Tile& t, int row0, int kt,
                                             Scores<D, W, MT>& sc) {
  constexpr int kKeys = Shape<D, W, MT>::kKeys;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nb = 0; nb < kKeys / 8; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = sc[mt][nb][e];
        if (a.softcap > 0.f) {
          v = a.softcap * tanhf(v * a.scale / a.softcap) * kLog2e;
        } else {
          v *= a.scale * kLog2e;
        }
        sc[mt][nb][e] = v;
      }
    }
  }
  const int pos_hi = t.k_hi - 1;  // the last token's position
  const bool need_mask = kt + kKeys - 1 > t.pos0 || (a.window > 0 && kt <= pos_hi - a.window);
  if (!need_mask) return;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = row0 + 16 * mt + lane / 4 + 8 * i;
      const int pos = t.pos0 + r / a.group;
#pragma unroll
      for (int nb = 0; nb < kKeys / 8; ++nb) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int p = kt + nb * 8 + (lane % 4) * 2 + e;
          const bool ok = p < t.k_hi && p <= pos && (a.window <= 0 || p > pos - a.window);
          if (!ok) sc[mt][nb][2 * i + e] = -INFINITY;
        }
      }
    }
  }
}

// Online softmax for the lane's rows (each row is spread over the 4 lanes of a quad): new
// running max, rescale of the accumulator and running sum, and sc <- exp2(sc - max). l holds
// this lane's partial sum only (reduced over the quad at the end).
template <int D, int W, int MT>
__device__ __forceinline__ void OnlineSoftmax(Scores<D, W, MT>& sc, Acc<D, MT>& o,
                                              float (&m)[MT][2], float (&l)[MT][2]) {
  constexpr int kKeys = Shape<D, W, MT>::kKeys;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float mx = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < kKeys / 8; ++nb) {
        mx = fmaxf(mx, fmaxf(sc[mt][nb][2 * i], sc[mt][nb][2 * i + 1]));
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[mt][i], mx);
      // A row with no key yet (all -inf) must not compute -inf - -inf.
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = Exp2(m[mt][i] - m_use);
      m[mt][i] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int nb = 0; nb < kKeys / 8; ++nb) {
        sc[mt][nb][2 * i] = Exp2(sc[mt][nb][2 * i] - m_use);
        sc[mt][nb][2 * i + 1] = Exp2(sc[mt][nb][2 * i + 1] - m_use);
        sum += sc[mt][nb][2 * i] + sc[mt][nb][2 * i + 1];
      }
      l[mt][i] = l[mt][i] * alpha + sum;
#pragma unroll
      for (int db = 0; db < D / 8; ++db) {
        o[mt][db][2 * i] *= alpha;
        o[mt][db][2 * i + 1] *= alpha;
      }
    }
  }
}

// o += P V. P (the score accumulator, rounded to bf16) becomes the A operand directly: the
// m16n8k16 C layout of two 8-key blocks is the A layout of one 16-key chunk. V rows are keys
// (the B operand's k), stored key-major, so ldmatrix.trans yields B fragments: one x4 covers
// 16 keys x 16 dims = (b0, b1) of two 8-dim blocks, used by each of the warp's row tiles.
template <int D, int W, int MT>
__device__ __forceinline__ void PV(const Scores<D, W, MT>& sc, Acc<D, MT>& o, const bf16* v_s) {
  using S = Shape<D, W, MT>;
  const int lane = threadIdx.x % 32;
  const bf16* v_lane = v_s + (lane % 8 + ((lane / 8) % 2) * 8) * S::kStride + (lane / 16) * 8;
#pragma unroll
  for (int kc = 0; kc < S::kKeys / 16; ++kc) {
    uint32_t p[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      p[mt][0] = PackBf16(sc[mt][2 * kc][0], sc[mt][2 * kc][1]);
      p[mt][1] = PackBf16(sc[mt][2 * kc][2], sc[mt][2 * kc][3]);
      p[mt][2] = PackBf16(sc[mt][2 * kc + 1][0], sc[mt][2 * kc + 1][1]);
      p[mt][3] = PackBf16(sc[mt][2 * kc + 1][2], sc[mt][2 * kc + 1][3]);
    }
#pragma unroll
    for (int db2 = 0; db2 < D / 16; ++db2) {
      uint32_t b[4];
      LdMatrixX4Trans(b, SmemAddress(v_lane + kc * 16 * S::kStride + db2 * 16));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        Mma(o[mt][2 * db2], p[mt], b[0], b[1]);
        Mma(o[mt][2 * db2 + 1], p[mt], b[2], b[3]);
      }
    }
  }
}

// Normalizes the warp's rows and writes them (bf16); a row that saw no key is written as 0.
template <int D, int MT>
__device__ __forceinline__ void StoreRows(const FlashArgs& a, const Tile& t, int g, int row0,
                                          const Acc<D, MT>& o, const float (&m)[MT][2],
                                          float (&l)[MT][2]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float sum = l[mt][i];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int r = row0 + 16 * mt + lane / 4 + 8 * i;
      if (r >= t.rows) continue;
      sum += SinkWeight(a.sinks, int64_t{g} * a.group + r % a.group, SafeMax(m[mt][i]));
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      bf16* dst = a.out + RowOffset(a, t, g, r, D) + (lane % 4) * 2;
#pragma unroll
      for (int db = 0; db < D / 8; ++db) {
        *reinterpret_cast<__nv_bfloat162*>(dst + db * 8) =
            __floats2bfloat162_rn(o[mt][db][2 * i] * inv, o[mt][db][2 * i + 1] * inv);
      }
    }
  }
}

// Whether the warp's rows see any key of [kt, kt + kKeys): lets a warp skip the math of tiles
// past its rows' diagonal or before their window (and warps of padding rows skip all).
template <int D, int W, int MT>
__device__ __forceinline__ bool WarpSeesTile(const FlashArgs& a, const Tile& t, int row0, int kt) {
  using S = Shape<D, W, MT>;
  if (row0 >= t.rows) return false;
  const int pos_lo = t.pos0 + row0 / a.group;
  const int pos_hi = t.pos0 + (min(row0 + S::kWarpRows, t.rows) - 1) / a.group;
  if (kt > pos_hi) return false;
  return a.window <= 0 || kt + S::kKeys - 1 > pos_lo - a.window;
}

template <int D, int W, int MT>
__global__ void __launch_bounds__(W * 32, W == 4 ? 2 : 1) FlashPrefillKernel(FlashArgs a) {
  using S = Shape<D, W, MT>;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* q_s = reinterpret_cast<bf16*>(smem);    // [kRows][kStride]
  bf16* k_s = q_s + S::kRows * S::kStride;      // [2][kKeys][kStride]
  bf16* v_s = k_s + 2 * S::kKeys * S::kStride;  // [2][kKeys][kStride]
  constexpr int kStage = S::kKeys * S::kStride;

  Tile t;
  if (!FindTile(a, t)) return;
  const int g = static_cast<int>(blockIdx.x);
  const int row0 = (static_cast<int>(threadIdx.x) / 32) * S::kWarpRows;
  const int32_t* pages = a.page_indices + a.page_indptr[t.seq];
  const int num_tiles = (t.k_hi - t.k_lo + S::kKeys - 1) / S::kKeys;

  LoadQ<D, W, MT>(a, t, g, q_s);
  if (num_tiles > 0) LoadKv<D, W, MT>(a, pages, g, t.k_lo, t.k_hi, k_s, v_s);
  CpAsyncCommit();
  CpAsyncWaitAll();
  __syncthreads();

  QRegs<D, W, MT> qf;
  if constexpr (S::kQInRegs) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) {
        LoadQFragment<D, W, MT>(qf[mt * (D / 16) + kc], q_s, row0 + 16 * mt, kc);
      }
    }
  }
  Acc<D, MT> o;
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int db = 0; db < D / 8; ++db)
      o[mt][db][0] = o[mt][db][1] = o[mt][db][2] = o[mt][db][3] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }

  for (int i = 0; i < num_tiles; ++i) {
    // Tile i landed (waited at the end of the previous iteration / above); every warp is past
    // tile i - 1, so its stage can take tile i + 1 while tile i is computed.
    const int kt = t.k_lo + i * S::kKeys;
    if (i + 1 < num_tiles) {
      const int next = (i + 1) % 2;
      LoadKv<D, W, MT>(a, pages, g, kt + S::kKeys, t.k_hi, k_s + next * kStage,
                       v_s + next * kStage);
    }
    CpAsyncCommit();
    if (WarpSeesTile<D, W, MT>(a, t, row0, kt)) {
      Scores<D, W, MT> sc;
      QKt<D, W, MT>(sc, qf, q_s, k_s + (i % 2) * kStage, row0);
      ScaleAndMask<D, W, MT>(a, t, row0, kt, sc);
      OnlineSoftmax<D, W, MT>(sc, o, m, l);
      PV<D, W, MT>(sc, o, v_s + (i % 2) * kStage);
    }
    CpAsyncWaitAll();
    __syncthreads();
  }
  StoreRows<D, MT>(a, t, g, row0, o, m, l);
}

template <int D, int W, int MT>
void LaunchInstance(const FlashArgs& fa, int num_kv_heads, int grid_tiles, cudaStream_t stream) {
  constexpr size_t kSmem = Shape<D, W, MT>::kSmemBytes;
  static bool configured = false;  // per instantiation; the attribute is per-function
  if (!configured) {
    CUDA_CHECK(cudaFuncSetAttribute(FlashPrefillKernel<D, W, MT>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kSmem)));
    configured = true;
  }
  // x: kv heads (fastest), so all heads of the longest tiles start first.
  const dim3 grid(static_cast<unsigned>(num_kv_heads), static_cast<unsigned>(grid_tiles));
  FlashPrefillKernel<D, W, MT><<<grid, Shape<D, W, MT>::kThreads, kSmem, stream>>>(fa);
  CUDA_CHECK_LAUNCH();
}

template <int W, int MT>
void LaunchForShape(const FlashArgs& fa, int head_dim, int num_kv_heads, int grid_tiles,
                    cudaStream_t stream) {
  switch (head_dim) {
    case 64:
      LaunchInstance<64, W, MT>(fa, num_kv_heads, grid_tiles, stream);
      break;
    case 128:
      LaunchInstance<128, W, MT>(fa, num_kv_heads, grid_tiles, stream);
      break;
    case 256:
      if constexpr (MT == 1) {
        LaunchInstance<256, W, 1>(fa, num_kv_heads, grid_tiles, stream);
      } else {
        CHECK(false) << "FlashPrefill: head_dim 256 has one row tile a warp";
      }
      break;
    default:
      CHECK(false) << "FlashPrefill: head_dim " << head_dim;
  }
}

}  // namespace

FlashPrefillTile FlashPrefillTileFor(const PagedAttentionArgs& a, int num_sms,
                                     const CudaTuning& tuning) {
  // attn_prefill_tile=WxM (warps x 16-row tiles a warp: 4x1, 8x1, 4x2, 8x2) for A/B.
  if (tuning.attn_prefill_warps > 0) {
    return {tuning.attn_prefill_warps, a.head_dim > 128 ? 1 : tuning.attn_prefill_m_tiles};
  }
  // The largest block that still gives about every SM a block (>= 3/4 of them): bigger blocks
  // read each K/V tile into shared memory once for more rows, but too few of them leave SMs
  // idle. Fitted to two H200 points, 8B heads, 132 SMs (cuda_prefill_bench): a 4096-token prompt
  // 8x2 249 TFLOP/s (512 blocks) vs 8x1 199, 4x1 170; a 512-token chunk on a 3584 prefix 8x1 185
  // (128 blocks) vs 8x2 117 (64 blocks), 4x1 156 (256 blocks).
  const int group = a.num_heads / a.num_kv_heads;
  const int64_t tokens = std::max(a.num_tokens, 1);
  auto blocks = [&](FlashPrefillTile t) {
    const int64_t per_tile = std::max(FlashPrefillTokensPerTile(group, t), 1);
    return (tokens + per_tile - 1) / per_tile * a.num_kv_heads;
  };
  const FlashPrefillTile big{8, 2}, mid{8, 1}, small{4, 1};
  auto fills = [&](FlashPrefillTile t) { return blocks(t) * 4 >= int64_t{num_sms} * 3; };
  if (a.head_dim <= 128 && fills(big)) return big;
  if (fills(mid)) return mid;
  return small;
}

int FlashPrefillTokensPerTile(int group, FlashPrefillTile tile) {
  return tile.warps * 16 * tile.m_tiles / group;
}

bool FlashPrefillSupports(const PagedAttentionArgs& a) {
  if (a.num_kv_heads <= 0 || a.num_heads % a.num_kv_heads != 0) return false;
  const int group = a.num_heads / a.num_kv_heads;
  return (a.head_dim == 64 || a.head_dim == 128 || a.head_dim == 256) && group <= 4 * 16;
}

void LaunchFlashPrefill(const PagedAttentionArgs& a, FlashPrefillTile tile,
                        const int32_t* tile_start, int grid_tiles, cudaStream_t stream) {
  CHECK(grid_tiles <= 65535) << "FlashPrefill: " << grid_tiles << " query tiles";
  FlashArgs fa;
  static_cast<PagedKernelTables&>(fa) = KernelTables(a);
  fa.tile_start = tile_start;
  fa.num_seqs = a.num_seqs;
  fa.block_size = a.block_size;
  fa.q_per_tile = FlashPrefillTokensPerTile(fa.group, tile);
  fa.scale = a.scale;
  if (grid_tiles <= 0) return;
  const int kvh = a.num_kv_heads, d = a.head_dim;
  if (tile.warps == 4 && tile.m_tiles == 1) {
    LaunchForShape<4, 1>(fa, d, kvh, grid_tiles, stream);
  } else if (tile.warps == 8 && tile.m_tiles == 1) {
    LaunchForShape<8, 1>(fa, d, kvh, grid_tiles, stream);
  } else if (tile.warps == 4 && tile.m_tiles == 2) {
    LaunchForShape<4, 2>(fa, d, kvh, grid_tiles, stream);
  } else if (tile.warps == 8 && tile.m_tiles == 2) {
    LaunchForShape<8, 2>(fa, d, kvh, grid_tiles, stream);
  } else {
    CHECK(false) << "FlashPrefill: tile " << tile.warps << "x" << tile.m_tiles;
  }
}

}  // namespace loom::cuda
