// CpuBackend: the reference Backend (backend.h) on x86 CPUs. f32 activations; weights in any
// DType decoded inside the kernels, copied at load into huge-page memory (UploadWeight; or used
// in place from the file mapping with weights_in_huge_pages = false); K/V pools in f32, f16 or
// bf16. Data-parallel work runs on OpenMP threads (num_threads). Kernels: AVX2+FMA+F16C, with
// AVX-512 VNNI ones for quantized weights where the CPU has it (bit-identical to AVX2), selected
// at runtime (CpuBackendOptions::isa, the CLI's --cpu-isa avx2|scalar, caps it); portable scalar
// fallbacks (same numerics up to f32 rounding).
//
// Determinism: every op computes each output row the same way whatever the other rows of the
// batch are (with blas_min_rows = 0, the default), so a sequence's logits alone equal its logits
// in a mixed batch bit for bit.
//
// Thread-safety: one caller at a time (ops share scratch buffers).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/dot_kernels.h"
#include "backend/cpu/matmul.h"

namespace loom {

struct CpuBackendOptions {
  int num_threads = 1;        // OpenMP threads for data-parallel ops (>= 1)
  bool force_scalar = false;  // use the portable kernels even when AVX2 is available
  // Caps the kernels SelectDotKernels picks (A/B runs: avx2 against AVX-512; the CLI's
  // --cpu-isa). kAuto: the best the CPU has.
  cpu::CpuIsa isa = cpu::CpuIsa::kAuto;
  // When set, these kernels instead of SelectDotKernels' choice (tests, benchmarks).
  const cpu::DotKernels* kernels = nullptr;
  // MatMul with at least this many rows dequantizes weight tiles and uses OpenBLAS sgemm
  // (faster prefill, not batch-invariant); 0 = never.
  int blas_min_rows = 0;
  // Weights are copied out of the file mapping into memory backed by 2 MiB pages (UploadWeight;
  // see cpu_backend.cc); false: used in place from the mapping (4 KiB page-cache pages).
  bool weights_in_huge_pages = true;
  // bf16 weights meet activations rounded to bf16 (AVX512-BF16 dot products, dot_kernels.h's
  // DotTileB) instead of f32 FMAs: twice the multiply-adds per instruction, for batched decode;
  // numerics no longer those of the f32 reference (still batch-invariant). Ignored without
  // AVX512-BF16. The CLI's --bf16-activations.
  bool bf16_activations = false;
};

// Not final: tests derive fakes of a device backend from it (engine_test.cc).
class CpuBackend : public Backend {
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
  Tensor UploadWeight(const Tensor& host) override;
  // Whether the kernel offers transparent huge pages (THP mode other than "never"); without
  // them UploadWeight keeps weights where they are.
  static bool TransparentHugePagesAvailable();
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
  bool has_moe() const override { return true; }
  bool has_moe_biases() const override { return true; }
  bool has_attention_sinks() const override { return true; }
  bool SupportsKvQuant(KvQuant) const override { return true; }
  void MoeMlp(const Tensor& x, const MoeWeights& w, const MoeParams& params,
              const Tensor& router_logits, const Tensor& expert_ids, const Tensor& out) override;

 private:
  CpuBackendOptions options_;
  const cpu::DotKernels& kernels_;
  cpu::CpuMatMul matmul_;
  // UploadWeight's arena: the chunk it fills and the bytes used of it.
  std::shared_ptr<void> weight_chunk_;
  size_t weight_chunk_size_ = 0, weight_chunk_used_ = 0;
};

}  // namespace loom
