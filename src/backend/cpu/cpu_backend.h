// CpuBackend: the reference Backend (backend.h) on x86 CPUs. f32 activations; weights in any
// DType decoded inside the kernels (mmap'd weights are used in place); K/V pools in f32, f16 or
// bf16. Data-parallel work runs on OpenMP threads (num_threads). Kernels: AVX2+FMA+F16C, with
// AVX-512 VNNI ones for quantized weights where the CPU has it (bit-identical to AVX2), selected
// at runtime (LOOM_CPU_ISA=avx2|scalar caps it); portable scalar fallbacks (same numerics up to
// f32 rounding).
//
// Determinism: every op computes each output row the same way whatever the other rows of the
// batch are (with blas_min_rows = 0, the default), so a sequence's logits alone equal its logits
// in a mixed batch bit for bit.
//
// Thread-safety: one caller at a time (ops share scratch buffers).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/dot_kernels.h"
#include "backend/cpu/matmul.h"

namespace loom {

struct CpuBackendOptions {
  int num_threads = 1;        // OpenMP threads for data-parallel ops (>= 1)
  bool force_scalar = false;  // use the portable kernels even when AVX2 is available
  // When set, these kernels instead of SelectDotKernels' choice (tests, benchmarks).
  const cpu::DotKernels* kernels = nullptr;
  // MatMul with at least this many rows dequantizes weight tiles and uses OpenBLAS sgemm
  // (faster prefill, not batch-invariant); 0 = never.
  int blas_min_rows = 0;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int num_threads) : CpuBackend(CpuBackendOptions{num_threads}) {}
  explicit CpuBackend(const CpuBackendOptions& options);

  Device device() const override { return Device::kCpu; }
  std::string name() const override;  // "cpu (avx2, 2 threads)"
  DType act_dtype() const override { return DType::kF32; }
  int num_threads() const { return options_.num_threads; }
  const char* isa() const { return kernels_.isa; }

  Tensor Alloc(DType dtype, Shape shape) override;
  Tensor AllocScratch(DType dtype, Shape shape) override;  // not zero-filled
  Tensor Upload(const Tensor& host) override;
  void CopyToHost(const Tensor& src, void* dst) override;
  void CopyFromHost(const void* src, const Tensor& dst) override;

  void Embed(const Tensor& table, const Tensor& ids, float scale, const Tensor& out) override;
  void MatMul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) override;
  void RmsNorm(const Tensor& x, const Tensor& w, float eps, float weight_offset,
               const Tensor& out) override;
  void Add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void Scale(const Tensor& x, float s) override;
  void Rope(const Tensor& x, const Tensor& positions, const RopeTable& rope, int num_heads,
            int head_dim) override;
  void SiluMul(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void GeluTanhMul(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void SoftCap(const Tensor& x, float cap) override;
  void StoreKv(const Tensor& k, const Tensor& v, const AttentionMeta& meta,
               const KvLayer& layer) override;
  void Attention(const Tensor& q, const KvLayer& layer, const AttentionMeta& meta,
                 const AttentionParams& params, const Tensor& out) override;
  void GatherRows(const Tensor& x, const Tensor& rows, const Tensor& out) override;
  void CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col,
                   int64_t num_cols) override;

 private:
  CpuBackendOptions options_;
  const cpu::DotKernels& kernels_;
  cpu::CpuMatMul matmul_;
};

}  // namespace loom
