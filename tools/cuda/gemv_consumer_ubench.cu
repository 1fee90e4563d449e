// How long the streamed GEMV's consumers (src/backend/cuda/stream_gemv.cu) take to dot one
// 32 KB ring stage (8 rows x 2048 columns) that is already in shared memory, 200 stages in a row
// (throughput, not one stage's latency): fma, the kernel's CUDA-core loop (one row a warp, bf16
// unpacked, f32 FMAs, `unroll 4`); fma-batched, the same FMAs in the same order with all of the
// stage's loads issued first (branch h-batch); fma-xreg, x held in registers; mma, a tensor-core
// loop (mma.m16n8k16 with x as row 0 of A, 16-column chunks split over the warps, rows 16 bytes
// apart so ldmatrix is free of bank conflicts; branch h-mma). Clock cycles per stage of one warp,
// median block.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -Isrc tools/cuda/gemv_consumer_ubench.cu -o ubench
//   ./ubench            (on the GPU machine; no arguments)
//
// H200, 2026-12-01, one warp active / all 8: fma 551 / 1,281 (0.65 us at 1.98 GHz);
// fma-batched 425 / 708; fma-xreg 329 / 510; mma 266 / 544. None of the faster loops made the
// engine faster (tools/cuda/E2E_NOTES.md, session 10): the per-stage time of the GEMVs whose
// ring is full at their release is not this loop's throughput.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "backend/cuda/device_math.cuh"
using namespace loom::cuda;
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void MmaK16(float (&c)[2], uint32_t a_lo, uint32_t a_hi, uint32_t b0,
                                       uint32_t b1) {
  [[maybe_unused]] float d2, d3;
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %10, %10};\n"
      : "+f"(c[0]), "+f"(c[1]), "=f"(d2), "=f"(d3)
      : "r"(a_lo), "r"(0u), "r"(a_hi), "r"(0u), "r"(b0), "r"(b1), "f"(0.f));
}
constexpr int kSlice = 2048, kStride = kSlice * 2 + 16, kSlot = 33024, kStages = 5, NIT = 200;

template <int V>
__global__ void __launch_bounds__(288, 1) Bench(float* out, long long* cycles, int warps_active) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // fill: small bf16 values
  for (int i = threadIdx.x; i < (kStages * kSlot + 4096) / 2; i += blockDim.x)
    reinterpret_cast<__nv_bfloat16*>(smem)[i] = __float2bfloat16(0.001f * ((i * 7) % 13));
  __syncthreads();
  if (warp >= warps_active) return;
  const uint4* xs = reinterpret_cast<const uint4*>(smem + kStages * kSlot);
  float acc[4][2] = {};
  float facc[2] = {};
  uint4 xr[8];  // V == 2
  for (int j = 0; j < 8; ++j) xr[j] = xs[lane + 32 * j];
  const long long t0 = clock64();
  for (int it = 0; it < NIT; ++it) {
    const int slot = it % kStages;
    if constexpr (V == 0) {  // CUDA-core dot: row `warp` of the slot, x from smem
      const uint4* wv = reinterpret_cast<const uint4*>(smem + slot * 32768) + warp * (kSlice / 8);
#pragma unroll 4
      for (int u = lane; u < kSlice / 8; u += 32) {
        float wf[8], xf[8];
        UnpackBf16x8(wv[u], wf);
        UnpackBf16x8(xs[u], xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) facc[e & 1] += wf[e] * xf[e];
      }
    } else if constexpr (V == 2) {  // CUDA-core dot, x held in registers (loaded once)
      const uint4* wv = reinterpret_cast<const uint4*>(smem + slot * 32768) + warp * (kSlice / 8);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float wf[8], xf[8];
        UnpackBf16x8(wv[lane + 32 * j], wf);
        UnpackBf16x8(xr[j], xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) facc[e & 1] += wf[e] * xf[e];
      }
    } else if constexpr (V == 4) {  // CUDA-core dot, all of the stage's w and x loads first
      const uint4* wv = reinterpret_cast<const uint4*>(smem + slot * 32768) + warp * (kSlice / 8);
      uint4 wr[8], xl[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        wr[j] = wv[lane + 32 * j];
        xl[j] = xs[lane + 32 * j];
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float wf[8], xf[8];
        UnpackBf16x8(wr[j], wf);
        UnpackBf16x8(xl[j], xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) facc[e & 1] += wf[e] * xf[e];
      }
    } else {  // tensor cores: 16 chunks a warp
      constexpr int kCW = 16;
      const uint32_t stage =
          SmemAddress(smem + slot * kSlot) + (lane % 8) * kStride + (lane / 8) * 16;
      const int c0 = warp * kCW;
      const uint4* xq = xs + (lane & 3);
      uint4 xa[kCW / 2];
      uint32_t b[kCW / 2][4];
#pragma unroll
      for (int i = 0; i < kCW / 2; ++i) xa[i] = xq[(c0 / 2 + i) * 4];
#pragma unroll
      for (int i = 0; i < kCW / 2; ++i) LdMatrixX4(b[i], stage + (c0 + 2 * i) * 32);
#pragma unroll
      for (int i = 0; i < kCW / 2; ++i) {
        MmaK16(acc[(2 * i) % 4], xa[i].x, xa[i].y, b[i][0], b[i][1]);
        MmaK16(acc[(2 * i + 1) % 4], xa[i].z, xa[i].w, b[i][2], b[i][3]);
      }
    }
    __syncwarp();
  }
  const long long t1 = clock64();
  float v = facc[0] + facc[1];
  for (int a = 0; a < 4; ++a) v += acc[a][0] + acc[a][1];
  out[blockIdx.x * 288 + threadIdx.x] = v;
  if (threadIdx.x == 0) cycles[blockIdx.x] = (t1 - t0) / NIT;
}

int main() {
  float* out;
  long long* cyc;
  cudaMalloc(&out, 132 * 288 * 4);
  cudaMalloc(&cyc, 132 * 8);
  const int smem = kStages * kSlot + 4096;
  cudaFuncSetAttribute(Bench<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(Bench<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(Bench<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(Bench<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  for (int v : {0, 4, 2, 1})
    for (int wa : {1, 8})
      for (int blocks : {132}) {
        for (int rep = 0; rep < 2; ++rep) {
          if (v == 0)
            Bench<0><<<blocks, 288, smem>>>(out, cyc, wa);
          else if (v == 1)
            Bench<1><<<blocks, 288, smem>>>(out, cyc, wa);
          else if (v == 2)
            Bench<2><<<blocks, 288, smem>>>(out, cyc, wa);
          else
            Bench<4><<<blocks, 288, smem>>>(out, cyc, wa);
        }
        cudaError_t e = cudaDeviceSynchronize();
        std::vector<long long> c(blocks);
        cudaMemcpy(c.data(), cyc, blocks * 8, cudaMemcpyDeviceToHost);
        std::sort(c.begin(), c.end());
        printf("%s warps %d blocks %3d: %lld cycles per 32 KB stage (median block) %s\n",
               (const char*[]){"fma", "mma", "fma-xreg", "", "fma-batched"}[v], wa, blocks,
               c[blocks / 2], cudaGetErrorString(e));
      }
}
