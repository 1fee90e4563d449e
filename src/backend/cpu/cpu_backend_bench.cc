// cpu_backend_bench: decode GEMV bandwidth (GB/s of weight bytes streamed) per weight dtype at
// 4096 x 4096 with 1 and 2 threads, next to a plain read-bandwidth baseline, and prefill
// throughput (GFLOP/s) at n = 512 for the kernel path and the OpenBLAS sgemm path.
// --batched: only batched decode instead: rows/s through a 4096 x 4096 MatMul at n = 1..16 rows
// for each number of activation rows per kernel call (act_rows 1 = one row per call, the
// pre-multi-row kernels), 1 thread, to choose DotKernels' act_rows.
// --isa=auto|avx512|avx2|scalar caps the kernels (as `loom --cpu-isa`; --scalar = --isa=scalar).
//   usage: cpu_backend_bench [--scalar] [--isa=ISA] [--batched]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "tensor/quant.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

Tensor RandomTensor(DType dt, int64_t rows, int64_t cols, float stddev, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> row(static_cast<size_t>(cols));
  Tensor t = HostTensor(dt, Shape{rows, cols});
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    QuantizeRow(dt, row.data(), static_cast<char*>(t.data()) + r * t.row_bytes(), cols);
  }
  return t;
}

// Baseline: GB/s of summing a 512 MiB buffer (the bandwidth a memory-bound GEMV can reach).
double ReadBandwidth(int threads) {
  const size_t n = (512u << 20) / 8;
  static std::vector<uint64_t> buf(n, 1);
  uint64_t total = 0;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
    for (size_t i = 0; i < n; ++i) total += buf[i];
    best = std::max(best, n * 8.0 / Seconds(t0, Clock::now()) / 1e9);
  }
  if (total == 42) std::printf(" ");
  return best;
}

double GemvGBs(CpuBackend& backend, const Tensor& w, const Tensor& x, const Tensor& out) {
  backend.MatMul(x, w, Tensor(), out);  // warm up
  int iters = 0;
  auto t0 = Clock::now();
  double secs = 0;
  while (secs < 1.0) {
    backend.MatMul(x, w, Tensor(), out);
    ++iters;
    secs = Seconds(t0, Clock::now());
  }
  return static_cast<double>(w.nbytes()) * iters / secs / 1e9;
}

double PrefillGflops(CpuBackend& backend, const Tensor& w, const Tensor& x, const Tensor& out) {
  backend.MatMul(x, w, Tensor(), out);  // warm up
  auto t0 = Clock::now();
  backend.MatMul(x, w, Tensor(), out);
  const double secs = Seconds(t0, Clock::now());
  return 2.0 * x.rows() * x.cols() * w.rows() / secs / 1e9;
}

// Activation rows per second through w at n rows, act_rows rows per kernel call.
double BatchedRowsPerSec(const cpu::DotKernels& base, int act_rows, const Tensor& w, int64_t n) {
  cpu::DotKernels kernels = base;
  kernels.plain_act_rows = kernels.quant_act_rows = act_rows;
  cpu::CpuMatMul matmul(kernels, /*num_threads=*/1, /*blas_min_rows=*/0);
  Tensor x = RandomTensor(DType::kF32, n, w.cols(), 1.0f, 5);
  Tensor out = HostTensor(DType::kF32, Shape{n, w.rows()});
  matmul.Run(x, w, Tensor(), out);  // warm up
  int iters = 0;
  auto t0 = Clock::now();
  double secs = 0;
  while (secs < 0.3) {
    matmul.Run(x, w, Tensor(), out);
    ++iters;
    secs = Seconds(t0, Clock::now());
  }
  return static_cast<double>(n) * iters / secs;
}

void BatchedDecode(cpu::CpuIsa isa) {
  const int64_t m = 4096, k = 4096;
  const cpu::DotKernels& kernels = cpu::SelectDotKernels(isa);
  std::printf("batched decode 4096x4096, 1 thread, %s: rows/s at n rows (act_rows per call)\n",
              kernels.isa);
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K,
                   DType::kQ5_K, DType::kQ6_K}) {
    Tensor w = RandomTensor(dt, m, k, 0.05f, 2);
    for (int act_rows = 1; act_rows <= cpu::kDotMaxActRows; ++act_rows) {
      std::printf("  %-5s act_rows %d:", std::string(DTypeName(dt)).c_str(), act_rows);
      for (int64_t n : {1, 2, 3, 4, 6, 8, 16}) {
        std::printf("  n=%-2lld %6.0f", static_cast<long long>(n),
                    BatchedRowsPerSec(kernels, act_rows, w, n));
      }
      std::printf("\n");
    }
  }
}

int Main(int argc, char** argv) {
  bool batched = false;
  cpu::CpuIsa isa = cpu::CpuIsa::kAuto;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--scalar") == 0) isa = cpu::CpuIsa::kScalar;
    batched |= std::strcmp(argv[i], "--batched") == 0;
    if (std::strncmp(argv[i], "--isa=", 6) == 0) {
      const std::optional<cpu::CpuIsa> parsed = cpu::ParseCpuIsa(argv[i] + 6);
      if (!parsed) {
        std::fprintf(stderr, "%s: expected --isa=auto|avx512|avx2|scalar\n", argv[i]);
        return 2;
      }
      isa = *parsed;
    }
  }
  if (batched) {
    BatchedDecode(isa);
    return 0;
  }
  const int64_t m = 4096, k = 4096;
  Tensor x1 = RandomTensor(DType::kF32, 1, k, 1.0f, 1);
  Tensor out1 = HostTensor(DType::kF32, Shape{1, m});
  std::printf("GEMV 4096x4096 (n=1), GB/s of weights [tok/s-equivalent for this matrix]\n");
  const DType types[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                         DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kFP8,  DType::kMXFP4};
  for (DType dt : types) {
    Tensor w = RandomTensor(dt, m, k, 0.05f, 2);
    std::printf("  %-5s %6.1f MiB:", std::string(DTypeName(dt)).c_str(), w.nbytes() / 1048576.0);
    for (int threads : {1, 2}) {
      CpuBackend backend(CpuBackendOptions{.num_threads = threads, .isa = isa});
      const double gbs = GemvGBs(backend, w, x1, out1);
      std::printf("  %d thr %6.1f GB/s [%7.1f/s]", threads, gbs, gbs * 1e9 / w.nbytes());
    }
    std::printf("\n");
  }
  const int64_t n = 512;
  Tensor xn = RandomTensor(DType::kF32, n, k, 1.0f, 3);
  Tensor outn = HostTensor(DType::kF32, Shape{n, m});
  std::printf(
      "prefill n=%lld 4096x4096, GFLOP/s (2 threads): kernels (batch-invariant) | "
      "OpenBLAS sgemm on dequantized tiles\n",
      static_cast<long long>(n));
  for (DType dt : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_K}) {  // NOLINT
    Tensor w = RandomTensor(dt, m, k, 0.05f, 4);
    CpuBackend kern(CpuBackendOptions{.num_threads = 2, .isa = isa});
    CpuBackend blas(CpuBackendOptions{.num_threads = 2, .isa = isa, .blas_min_rows = 32});
    const double a = PrefillGflops(kern, w, xn, outn);
    const double b = PrefillGflops(blas, w, xn, outn);
    std::printf("  %-5s %6.1f | %6.1f\n", std::string(DTypeName(dt)).c_str(), a, b);
  }
  std::printf("read bandwidth baseline: 1 thread %.1f GB/s, 2 threads %.1f GB/s\n",
              ReadBandwidth(1), ReadBandwidth(2));
  return 0;
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) { return loom::Main(argc, argv); }
