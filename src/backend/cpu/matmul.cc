#include "backend/cpu/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <string_view>

#include "base/check.h"
#include "tensor/quant.h"

namespace loom::cpu {
namespace {

// Activation rows per block of the kernel path: 16 f32 rows of k = 4096 are 256 KiB, which stays
// in L2 while every thread streams its share of the weights past it once per block. Within a
// block, each tile of weight rows meets the rows in groups of the kernels' act_rows; the block is
// rounded up to a multiple of act_rows (18 for 3) so that prefill blocks have no short groups.
constexpr int64_t kRowBlock = 16;
// Weight rows per dequantized f32 tile of the BLAS path (64 x 4096 f32 = 1 MiB per thread).
constexpr int64_t kBlasTileRows = 64;

}  // namespace

CpuMatMul::CpuMatMul(const DotKernels& kernels, int num_threads, int blas_min_rows,
                     bool bf16_activations)
    : kernels_(kernels),
      num_threads_(num_threads),
      blas_min_rows_(blas_min_rows),
      bf16_activations_(bf16_activations) {
  CHECK_GE(num_threads_, 1);
  CHECK_GE(blas_min_rows_, 0);
  // We parallelize over weight tiles ourselves; OpenBLAS threads would fight our OpenMP threads
  // for the same cores.
  if (blas_min_rows_ > 0) openblas_set_num_threads(1);
  blas_tiles_.resize(static_cast<size_t>(num_threads_));
}

void CpuMatMul::Run(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  const int64_t n = x.rows();
  const int64_t k = x.cols();
  const int64_t m = w.rows();
  CHECK(x.dtype() == DType::kF32 && out.dtype() == DType::kF32)
      << "MatMul: x and out must be f32, got " << x.DebugString() << ", " << out.DebugString();
  CHECK_EQ(w.cols(), k) << "MatMul: w " << w.DebugString() << " vs x " << x.DebugString();
  CHECK(out.rows() == n && out.cols() == m)
      << "MatMul: out " << out.DebugString() << " must be [" << n << ", " << m << "]";
  if (n == 0 || m == 0) return;
  const float* xp = x.data_as<const float>();
  float* op = out.data_as<float>();
  if (blas_min_rows_ > 0 && n >= blas_min_rows_) {
    RunBlas(xp, n, k, w, op, m);
  } else {
    RunKernels(xp, n, k, w, op, m);
  }
  if (bias.defined()) {
    CHECK(bias.dtype() == DType::kF32 && bias.numel() == m)
        << "MatMul: bias " << bias.DebugString();
    const float* b = bias.data_as<const float>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) op[i * m + j] += b[j];
    }
  }
}

namespace {

// Everything one MatMul's tile loop needs; each thread runs a contiguous range of its tiles.
struct TileJob {
  DotTileF plain = nullptr, plain1 = nullptr;  // plain weights: x f32 (plain1: one-row calls)
  DotTileQ quant = nullptr, quant1 = nullptr;  // quantized weights: x as q8 rows
  DotTileB bf16act = nullptr;                  // bf16 weights x bf16 activations
  const float* x = nullptr;
  const ActQ8Row* x_q8 = nullptr;    // [n] when quant
  const uint16_t* x_bf16 = nullptr;  // [n, k] when bf16act
  int64_t n = 0, k = 0, m = 0;
  const char* wbase = nullptr;
  size_t row_bytes = 0;
  int act_rows = 1;
  float* out = nullptr;
};

// Tiles [t0, t1) of the job: each tile of kDotTileRows weight rows meets the rows of x in blocks
// of kRowBlock, each block in groups of at most act_rows.
[[gnu::always_inline]] inline void RunTileRange(const TileJob& j, int64_t t0, int64_t t1) {
  const int64_t row_block = (kRowBlock + j.act_rows - 1) / j.act_rows * j.act_rows;
  for (int64_t i0 = 0; i0 < j.n; i0 += row_block) {
    const int64_t i1 = std::min(j.n, i0 + row_block);
    // The block's rows in groups of at most act_rows, as even as possible (8 rows by 3: 3, 3, 2;
    // 4 by 3: 2, 2), since a short leftover group decodes the weights for few rows.
    const int64_t num_groups = (i1 - i0 + j.act_rows - 1) / j.act_rows;
    const int64_t small = (i1 - i0) / num_groups;
    const int64_t num_big = (i1 - i0) % num_groups;  // groups of small + 1 rows, first
    for (int64_t t = t0; t < t1; ++t) {
      const void* rows[kDotTileRows];
      const int64_t j0 = t * kDotTileRows;
      const int64_t valid = std::min<int64_t>(kDotTileRows, j.m - j0);
      for (int r = 0; r < kDotTileRows; ++r) {
        rows[r] = j.wbase + static_cast<size_t>(j0 + std::min<int64_t>(r, valid - 1)) * j.row_bytes;
      }
      float tile_out[kDotMaxActRows * kDotTileRows];  // [num_x][kDotTileRows]
      // The next tile (tiles are consecutive rows), an even share per group: one call bringing
      // all of it in while the others find theirs cached made the stream bursty (134M F16,
      // concurrency 8, 2 threads: 438-482 -> 475-539 tok/s).
      const char* next_tile = j.wbase + static_cast<size_t>(j0 + kDotTileRows) * j.row_bytes;
      const int64_t tile_bytes = kDotTileRows * static_cast<int64_t>(j.row_bytes);
      int64_t i = i0;
      for (int64_t g = 0; g < num_groups; ++g) {
        const int num_x = static_cast<int>(g < num_big ? small + 1 : small);
        const int64_t pf_begin = g * tile_bytes / num_groups;
        const DotPrefetch pf{next_tile + pf_begin, (g + 1) * tile_bytes / num_groups - pf_begin};
        if (j.quant != nullptr) {
          (num_x == 1 ? j.quant1 : j.quant)(rows, j.x_q8 + i, num_x, j.k, pf, tile_out);
        } else if (j.bf16act != nullptr) {
          const uint16_t* xs[kDotMaxActRows];
          for (int a = 0; a < num_x; ++a) xs[a] = j.x_bf16 + (i + a) * j.k;
          j.bf16act(rows, xs, num_x, j.k, pf, tile_out);
        } else {
          const float* xs[kDotMaxActRows];
          for (int a = 0; a < num_x; ++a) xs[a] = j.x + (i + a) * j.k;
          (num_x == 1 ? j.plain1 : j.plain)(rows, xs, num_x, j.k, pf, tile_out);
        }
        for (int a = 0; a < num_x; ++a) {
          const float* row_out = tile_out + a * kDotTileRows;
          float* dst = j.out + (i + a) * j.m + j0;
          if (valid == kDotTileRows) {  // a fixed-size copy, not a memcpy call per row
            for (int r = 0; r < kDotTileRows; ++r) dst[r] = row_out[r];
          } else {
            for (int64_t r = 0; r < valid; ++r) dst[r] = row_out[r];
          }
        }
        i += num_x;
      }
    }
  }
}

// The same loop compiled for AVX2 (VEX encoding), for the x86 kernel sets. Calling the AVX-512
// (EVEX) kernels from the baseline (SSE) build of this loop made them about 1.5x slower than
// called from a loop of their own, although they end in vzeroupper (dev VM, Zen 4: bf16-act
// kernel through MatMul, 768 x 32000, 1 row, 1 thread: 14-20 vs 24-28 GB/s; mechanism not
// pinned down). With this build of the loop they run at the speed of a direct call.
__attribute__((target("avx2,fma,f16c"))) void RunTileRangeAvx2(const TileJob& j, int64_t t0,
                                                               int64_t t1) {
  RunTileRange(j, t0, t1);
}
void RunTileRangeBaseline(const TileJob& j, int64_t t0, int64_t t1) { RunTileRange(j, t0, t1); }

}  // namespace

void CpuMatMul::RunKernels(const float* x, int64_t n, int64_t k, const Tensor& w, float* out,
                           int64_t m) {
  const DType wt = w.dtype();
  TileJob job;
  job.bf16act = bf16_activations_ && wt == DType::kBF16 ? kernels_.bf16_bf16act : nullptr;
  job.quant = QuantKernel(kernels_, wt);
  if (job.bf16act == nullptr) job.plain = PlainKernel(kernels_, wt);
  const DotKernels& one_row_set = kernels_.one_row != nullptr ? *kernels_.one_row : kernels_;
  job.plain1 = PlainKernel(one_row_set, wt);
  job.quant1 = QuantKernel(one_row_set, wt);
  CHECK(job.plain != nullptr || job.quant != nullptr || job.bf16act != nullptr)
      << "MatMul: unsupported weight dtype " << DTypeName(wt);
  if (job.bf16act != nullptr) {
    CHECK(kernels_.round_bf16 != nullptr) << "MatMul: bf16 activations without a rounding kernel";
    act_bf16_.resize(static_cast<size_t>(n * k));
    job.x_bf16 = act_bf16_.data();
  }
  if (job.quant != nullptr) {
    CHECK_EQ(k % 32, 0) << "MatMul: k must be a multiple of 32 for quantized weights";
    act_qs_.resize(static_cast<size_t>(n * k));
    act_d_.resize(static_cast<size_t>(n * k / 32));
    act_ds_.resize(static_cast<size_t>(n * k / 32));
    act_rows_q8_.resize(static_cast<size_t>(n));
#pragma omp parallel for num_threads(num_threads_) schedule(static) if (n > 1)
    for (int64_t i = 0; i < n; ++i) {
      kernels_.quantize_act(x + i * k, k, act_qs_.data() + i * k, act_d_.data() + i * (k / 32),
                            act_ds_.data() + i * (k / 32));
      act_rows_q8_[static_cast<size_t>(i)] = ActQ8Row{
          act_qs_.data() + i * k, act_d_.data() + i * (k / 32), act_ds_.data() + i * (k / 32)};
    }
    job.x_q8 = act_rows_q8_.data();
  }
  job.act_rows = job.quant != nullptr     ? kernels_.quant_act_rows
                 : job.bf16act != nullptr ? kernels_.bf16_act_rows
                                          : kernels_.plain_act_rows;
  CHECK(job.act_rows >= 1 && job.act_rows <= kDotMaxActRows) << "MatMul: act_rows " << job.act_rows;
  job.x = x;
  job.n = n;
  job.k = k;
  job.m = m;
  job.wbase = static_cast<const char*>(w.data());
  job.row_bytes = w.row_bytes();
  job.out = out;
  const int64_t num_tiles = (m + kDotTileRows - 1) / kDotTileRows;
  const bool vex = std::string_view(kernels_.isa) != "scalar";
  // Threads split the weight tiles, not the activation rows: a decode batch is a few rows, and
  // splitting them would make every thread stream all the weights. Contiguous ranges, so that
  // each tile's next-tile prefetch is the thread's own next tile.
#pragma omp parallel num_threads(num_threads_)
  {
    const int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
    if (job.bf16act != nullptr) {  // every thread rounds a share of x's rows, all read them all
      const int64_t r0 = n * tid / nt, r1 = n * (tid + 1) / nt;
      kernels_.round_bf16(x + r0 * k, act_bf16_.data() + r0 * k, (r1 - r0) * k);
#pragma omp barrier
    }
    const int64_t t0 = num_tiles * tid / nt, t1 = num_tiles * (tid + 1) / nt;
    if (vex) {
      RunTileRangeAvx2(job, t0, t1);
    } else {
      RunTileRangeBaseline(job, t0, t1);
    }
  }
}

void CpuMatMul::RunBlas(const float* x, int64_t n, int64_t k, const Tensor& w, float* out,
                        int64_t m) {
  const DType wt = w.dtype();
  const char* wbase = static_cast<const char*>(w.data());
  const size_t row_bytes = w.row_bytes();
  const int64_t num_tiles = (m + kBlasTileRows - 1) / kBlasTileRows;
#pragma omp parallel num_threads(num_threads_)
  {
    std::vector<float>& tile = blas_tiles_[static_cast<size_t>(omp_get_thread_num())];
    if (wt != DType::kF32) tile.resize(static_cast<size_t>(kBlasTileRows * k));
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < num_tiles; ++t) {
      const int64_t j0 = t * kBlasTileRows;
      const int rows = static_cast<int>(std::min(kBlasTileRows, m - j0));
      const float* wf;
      if (wt == DType::kF32) {
        wf = reinterpret_cast<const float*>(wbase + static_cast<size_t>(j0) * row_bytes);
      } else {
        for (int r = 0; r < rows; ++r) {
          DequantizeRow(wt, wbase + static_cast<size_t>(j0 + r) * row_bytes, tile.data() + r * k,
                        k);
        }
        wf = tile.data();
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), rows,
                  static_cast<int>(k), 1.0f, x, static_cast<int>(k), wf, static_cast<int>(k), 0.0f,
                  out + j0, static_cast<int>(m));
    }
  }
}

}  // namespace loom::cpu
