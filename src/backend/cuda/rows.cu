#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/ktrace.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/rows.cuh"

namespace loom::cuda {
LOOM_KTRACE_TU(rows)
namespace {

// Unit = uint4 (16 B) when rows and pointers allow, else uint16_t. Grid: (chunks, rows).
template <typename Unit>
__global__ void GatherKernel(const Unit* x, int64_t x_rows, const int32_t* rows, int64_t units,
                             Unit* out) {
  PdlWait();  // launched with PDL (launch.cuh)
  PdlLaunchDependents();
  const int64_t i = blockIdx.y;
  const int32_t r = rows[i];
  for (int64_t u = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; u < units;
       u += int64_t{gridDim.x} * blockDim.x) {
    out[i * units + u] = (r >= 0 && r < x_rows) ? x[r * units + u] : Unit{};
  }
}

// Grid z picks the (src, dst) pair: one launch scatters K and V.
template <typename Unit>
__global__ void ScatterKernel(const Unit* src0, Unit* dst0, const Unit* src1, Unit* dst1,
                              const int32_t* slots, int64_t num_slots, int64_t units) {
  const Unit* src = blockIdx.z == 0 ? src0 : src1;
  Unit* dst = blockIdx.z == 0 ? dst0 : dst1;
  const int64_t i = blockIdx.y;
  const int32_t s = slots[i];
  if (s < 0 || s >= num_slots) return;
  for (int64_t u = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; u < units;
       u += int64_t{gridDim.x} * blockDim.x) {
    dst[s * units + u] = src[i * units + u];
  }
}

template <typename T>
__global__ void EmbedKernel(const T* table, int64_t vocab, const int32_t* ids, int64_t d,
                            float scale, __nv_bfloat16* out) {
  KTRACE_BEGIN();
  KTRACE_END(kKTraceEmbed, vocab, d);
  const int64_t i = blockIdx.y;
  const int32_t id = ids[i];
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < d;
       j += int64_t{gridDim.x} * blockDim.x) {
    const float v = (id >= 0 && id < vocab) ? ToF32(table[id * d + j]) * scale : 0.f;
    out[i * d + j] = __float2bfloat16_rn(v);
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

dim3 GridFor(int64_t units, int64_t n) {
  const int64_t bx = std::min<int64_t>((units + 255) / 256, 64);
  CHECK_LE(n, 65535 * 1024) << "too many rows";
  return dim3(static_cast<unsigned>(std::max<int64_t>(bx, 1)), static_cast<unsigned>(n));
}

}  // namespace

void LaunchGatherRows(const void* x, int64_t x_rows, const int32_t* rows, int64_t n,
                      size_t row_bytes, void* out, cudaStream_t stream, bool pdl) {
  if (n == 0 || row_bytes == 0) return;
  CHECK_EQ(row_bytes % 2, 0u);
  if (row_bytes % 16 == 0 && Aligned16(x) && Aligned16(out)) {
    const int64_t units = static_cast<int64_t>(row_bytes / 16);
    LaunchPdl(GatherKernel<uint4>, GridFor(units, n), dim3(256), 0, stream, pdl,
              static_cast<const uint4*>(x), x_rows, rows, units, static_cast<uint4*>(out));
  } else {
    const int64_t units = static_cast<int64_t>(row_bytes / 2);
    LaunchPdl(GatherKernel<uint16_t>, GridFor(units, n), dim3(256), 0, stream, pdl,
              static_cast<const uint16_t*>(x), x_rows, rows, units, static_cast<uint16_t*>(out));
  }
  CUDA_CHECK_LAUNCH();
}

void LaunchScatterRows(const void* src, int64_t n, const int32_t* slots, int64_t num_slots,
                       size_t row_bytes, void* dst, cudaStream_t stream) {
  LaunchScatterRowPairs(src, dst, nullptr, nullptr, n, slots, num_slots, row_bytes, stream);
}

void LaunchScatterRowPairs(const void* src0, void* dst0, const void* src1, void* dst1, int64_t n,
                           const int32_t* slots, int64_t num_slots, size_t row_bytes,
                           cudaStream_t stream) {
  if (n == 0 || row_bytes == 0) return;
  CHECK_EQ(row_bytes % 2, 0u);
  const unsigned pairs = src1 == nullptr ? 1 : 2;
  const bool wide = row_bytes % 16 == 0 && Aligned16(src0) && Aligned16(dst0) &&
                    (pairs == 1 || (Aligned16(src1) && Aligned16(dst1)));
  const size_t unit = wide ? 16 : 2;
  const int64_t units = static_cast<int64_t>(row_bytes / unit);
  dim3 grid = GridFor(units, n);
  grid.z = pairs;
  if (wide) {
    ScatterKernel<<<grid, 256, 0, stream>>>(
        static_cast<const uint4*>(src0), static_cast<uint4*>(dst0), static_cast<const uint4*>(src1),
        static_cast<uint4*>(dst1), slots, num_slots, units);
  } else {
    ScatterKernel<<<grid, 256, 0, stream>>>(
        static_cast<const uint16_t*>(src0), static_cast<uint16_t*>(dst0),
        static_cast<const uint16_t*>(src1), static_cast<uint16_t*>(dst1), slots, num_slots, units);
  }
  CUDA_CHECK_LAUNCH();
}

void LaunchEmbed(const void* table, DType table_dtype, int64_t vocab, const int32_t* ids, int64_t n,
                 int64_t d, float scale, void* out, cudaStream_t stream) {
  if (n == 0) return;
  auto* o = static_cast<__nv_bfloat16*>(out);
  if (table_dtype == DType::kBF16) {
    EmbedKernel<<<GridFor(d, n), 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(table), vocab,
                                                   ids, d, scale, o);
  } else {
    CHECK(table_dtype == DType::kF32)
        << "Embed: table must be bf16 or f32 on CUDA, got " << DTypeName(table_dtype);
    EmbedKernel<<<GridFor(d, n), 256, 0, stream>>>(static_cast<const float*>(table), vocab, ids, d,
                                                   scale, o);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace loom::cuda
