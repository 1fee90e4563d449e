#include "backend/cpu/matmul.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

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

CpuMatMul::CpuMatMul(const DotKernels& kernels, int num_threads, int blas_min_rows)
    : kernels_(kernels), num_threads_(num_threads), blas_min_rows_(blas_min_rows) {
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
    CHECK(bias.dtype() == DType::kF32 && bias.numel() == m) << "MatMul: bias " << bias.DebugString();
    const float* b = bias.data_as<const float>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) op[i * m + j] += b[j];
    }
  }
}

void CpuMatMul::RunKernels(const float* x, int64_t n, int64_t k, const Tensor& w, float* out,
                           int64_t m) {
  const DType wt = w.dtype();
  const DotTileF plain = PlainKernel(kernels_, wt);
  const DotTileQ quant = QuantKernel(kernels_, wt);
  const DotKernels& one_row_set = kernels_.one_row != nullptr ? *kernels_.one_row : kernels_;
  const DotTileF plain1 = PlainKernel(one_row_set, wt);
  const DotTileQ quant1 = QuantKernel(one_row_set, wt);
  CHECK(plain != nullptr || quant != nullptr) << "MatMul: unsupported weight dtype "
                                              << DTypeName(wt);
  if (quant != nullptr) {
    CHECK_EQ(k % 32, 0) << "MatMul: k must be a multiple of 32 for quantized weights";
    act_qs_.resize(static_cast<size_t>(n * k));
    act_d_.resize(static_cast<size_t>(n * k / 32));
    act_ds_.resize(static_cast<size_t>(n * k / 32));
#pragma omp parallel for num_threads(num_threads_) schedule(static) if (n > 1)
    for (int64_t i = 0; i < n; ++i) {
      kernels_.quantize_act(x + i * k, k, act_qs_.data() + i * k, act_d_.data() + i * (k / 32),
                     act_ds_.data() + i * (k / 32));
    }
  }
  const int act_rows = quant != nullptr ? kernels_.quant_act_rows : kernels_.plain_act_rows;
  CHECK(act_rows >= 1 && act_rows <= kDotMaxActRows) << "MatMul: act_rows " << act_rows;
  const char* wbase = static_cast<const char*>(w.data());
  const size_t row_bytes = w.row_bytes();
  const int64_t num_tiles = (m + kDotTileRows - 1) / kDotTileRows;
  // Threads split the weight tiles, not the activation rows: a decode batch is a few rows, and
  // splitting them would make every thread stream all the weights.
  const int64_t row_block = (kRowBlock + act_rows - 1) / act_rows * act_rows;
#pragma omp parallel num_threads(num_threads_)
  for (int64_t i0 = 0; i0 < n; i0 += row_block) {
    const int64_t i1 = std::min(n, i0 + row_block);
    // The block's rows in groups of at most act_rows, as even as possible (8 rows by 3: 3, 3, 2;
    // 4 by 3: 2, 2), since a short leftover group decodes the weights for few rows.
    const int64_t num_groups = (i1 - i0 + act_rows - 1) / act_rows;
    const int64_t small = (i1 - i0) / num_groups;
    const int64_t num_big = (i1 - i0) % num_groups;  // groups of small + 1 rows, first
#pragma omp for schedule(static)
    for (int64_t t = 0; t < num_tiles; ++t) {
      const void* rows[kDotTileRows];
      const int64_t j0 = t * kDotTileRows;
      const int64_t valid = std::min<int64_t>(kDotTileRows, m - j0);
      for (int r = 0; r < kDotTileRows; ++r) {
        rows[r] = wbase + static_cast<size_t>(j0 + std::min<int64_t>(r, valid - 1)) * row_bytes;
      }
      float tile_out[kDotMaxActRows * kDotTileRows];  // [num_x][kDotTileRows]
      // The next tile (tiles are consecutive rows), an even share per group: one call bringing
      // all of it in while the others find theirs cached made the stream bursty (134M F16,
      // concurrency 8, 2 threads: 438-482 -> 475-539 tok/s).
      const char* next_tile = wbase + static_cast<size_t>(j0 + kDotTileRows) * row_bytes;
      const int64_t tile_bytes = kDotTileRows * static_cast<int64_t>(row_bytes);
      int64_t i = i0;
      for (int64_t g = 0; g < num_groups; ++g) {
        const int num_x = static_cast<int>(g < num_big ? small + 1 : small);
        const int64_t pf_begin = g * tile_bytes / num_groups;
        const DotPrefetch pf{next_tile + pf_begin, (g + 1) * tile_bytes / num_groups - pf_begin};
        if (quant != nullptr) {
          ActQ8Row acts[kDotMaxActRows];
          for (int a = 0; a < num_x; ++a) {
            acts[a] = ActQ8Row{act_qs_.data() + (i + a) * k, act_d_.data() + (i + a) * (k / 32),
                               act_ds_.data() + (i + a) * (k / 32)};
          }
          (num_x == 1 ? quant1 : quant)(rows, acts, num_x, k, pf, tile_out);
        } else {
          const float* xs[kDotMaxActRows];
          for (int a = 0; a < num_x; ++a) xs[a] = x + (i + a) * k;
          (num_x == 1 ? plain1 : plain)(rows, xs, num_x, k, pf, tile_out);
        }
        for (int a = 0; a < num_x; ++a) {
          const float* row_out = tile_out + a * kDotTileRows;
          float* dst = out + (i + a) * m + j0;
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
