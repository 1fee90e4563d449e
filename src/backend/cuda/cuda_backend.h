// CudaBackend: the Backend (backend.h) on one NVIDIA GPU. bf16 activations, f32 accumulation.
//
// Memory and dtypes:
//   - Alloc: zero-filled device tensor of any dtype, from the caching DeviceAllocator (the only
//     cudaMalloc). All work is enqueued on the backend's one stream.
//   - Upload(host): i32 stays i32; 1-D f32/f16/bf16 tensors (norm weights, biases, RoPE
//     inv_freq) become f32; every other float or quantized tensor (weights, activations) becomes
//     bf16. Quantized GGUF weights (q8_0/q4_0/q4_K/q6_K) are dequantized to bf16 on upload for
//     now (no quantized GEMM kernels yet: 2-4x more device memory and bandwidth than needed).
//   - CopyToHost / CopyFromHost: raw bytes in the tensor's own dtype (src.nbytes()), synchronous.
//     Logits: allocate the logits tensor in f32 (MatMul supports an f32 `out` with bf16 inputs,
//     cuBLAS writes f32 from its f32 accumulators) and CopyToHost gives floats.
//
// Ops: x/activations bf16; MatMul weights bf16 (as Upload leaves them), out bf16 or f32 (cuBLASLt,
// or small_batch_gemm.cuh for decode-sized batches), or quantized (quant_gemv.cuh: a quantized
// GEMV for decode-sized batches, else dequantized chunks for cuBLASLt); Embed tables too; RmsNorm
// weights f32 or bf16; SoftCap/Scale/Add/GatherRows also on f32 tensors (logits); KV pools bf16.
// Attention: paged_attention.cuh (GQA grouping, split-KV, causal + sliding window + softcap).
//
// Kernel variants: CudaBackendOptions::tuning (backend/cuda_tuning.h; the CLI's --cuda-tune).
// options.profile (--cuda-profile): per-op GPU time table on stderr at exit (eager steps only;
// op_profiler.h).
//
// Thread-safety: one caller at a time.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/qkv_rope_store.cuh"
#include "backend/cuda/small_batch_gemm.cuh"
#include "backend/cuda_tuning.h"
#include "base/status.h"

namespace loom::cuda {
class DeviceAllocator;
class CublasLtGemm;
class CudaEvent;
class CudaStream;
class OpProfiler;
class PinnedHostBuffer;
}  // namespace loom::cuda

namespace loom {

struct CudaBackendOptions {
  int device = 0;
  // MatMuls with at most this many rows (decode) use the bandwidth-bound small-batch kernel
  // (small_batch_gemm.cuh) instead of cuBLASLt; 0 = always cuBLASLt. At most 8. Default 1:
  // on the H200 it beats cuBLASLt at n = 1 (157 vs 146 tok/s for 8B decode) but is 2.6x slower
  // at n = 8 (tools/cuda/NOTES.md).
  int small_batch_gemm_rows = 1;
  // The kernels' A/B switches (validated by Create); defaults are the measured choices.
  CudaTuning tuning = {};
  // Per-op GPU timing printed when the backend is destroyed, and each new cuBLASLt plan's
  // candidates (op_profiler.h; the CLI's --cuda-profile).
  bool profile = false;
  // Diagnostic builds (-DLOOM_CUDA_KTRACE=ON): the kernel timeline is written to this file when
  // the backend is destroyed (ktrace.cuh; the CLI's --ktrace-file). "" = not written.
  std::string ktrace_file = {};
};

class CudaBackend final : public Backend {
 public:
  // Number of visible CUDA devices; 0 when there is no driver or no GPU (never fails).
  static int DeviceCount();
  // OK when `device` is visible and this build's kernels run on it (compute capability 9.0 or
  // newer: they use Hopper's TMA, thread-block clusters and programmatic dependent launch);
  // otherwise FailedPrecondition naming the device and why. Never fails hard.
  static Status CheckGpu(int device = 0);
  // Free and total device memory in bytes (cudaMemGetInfo on this backend's device).
  void MemoryInfo(size_t* free_bytes, size_t* total_bytes) const;
  // Fails (FailedPrecondition, naming the device) when CheckGpu does, and (InvalidArgument)
  // when options.tuning does not validate.
  static StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options = {});
  ~CudaBackend() override;

  Device device() const override { return Device::kCuda; }
  std::string name() const override;  // "cuda (NVIDIA H200, sm_90, 132 SMs)"
  DType act_dtype() const override { return DType::kBF16; }
  Status CheckHeadDim(int head_dim) const override;  // cuda::kPagedAttentionHeadDims

  Tensor Alloc(DType dtype, Shape shape) override;
  Tensor AllocScratch(DType dtype, Shape shape) override;  // no memset
  Tensor Upload(const Tensor& host) override;
  void CopyToHost(const Tensor& src, void* dst) override;
  void CopyFromHost(const void* src, const Tensor& dst) override;
  void Synchronize() override;
  // Page-locked (cudaMallocHost).
  std::shared_ptr<Buffer> AllocHostStaging(size_t bytes) override;
  // One launch per up to 64 MiB of blocks (kv_copy.cuh): page-locked host blocks are read and
  // written in place, others through a page-locked bounce buffer.
  void CopyKvBlocks(const std::vector<KvLayer>& kv, std::span<const int32_t> blocks,
                    std::span<uint8_t* const> hosts, bool to_host) override;
  // Into page-locked host memory: a gather of the blocks into a device staging ring on the
  // compute stream (in order with the steps), then the copy engine on a side stream, overlapping
  // the next steps. Other host memory: CopyKvBlocks (ticket 0).
  uint64_t StartKvCopyToHost(const std::vector<KvLayer>& kv, std::span<const int32_t> blocks,
                             std::span<uint8_t* const> hosts) override;
  void WaitKvCopy(uint64_t ticket) override;
  bool KvCopyDone(uint64_t ticket) override;

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
  // PlanPagedAttention's choice for the step, its query-tile table (one TileStartKernel launch,
  // not one a layer) and the split scratch the layers share.
  std::shared_ptr<const AttentionPlan> PlanAttention(const AttentionMeta& meta,
                                                     const AttentionShape& shape) override;
  void GatherRows(const Tensor& x, const Tensor& rows, const Tensor& out) override;
  void CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col,
                   int64_t num_cols) override;
  // Fused ops (one kernel each; tuning.cuda_fuse = false turns fused weights and folded ops off
  // for A/B runs).
  bool prefers_fused_ops() const override;
  Tensor ConcatRows(const std::vector<Tensor>& parts) override;
  void TrimMemory() override;
  void MatMulAdd(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& acc) override;
  void RmsNormMatMul(const Tensor& x, const NormSpec& norm, const Tensor& w, const Tensor& bias,
                     const Tensor& out) override;
  void RmsNormMatMulGated(const Tensor& x, const NormSpec& norm, const Tensor& w_gate_up,
                          GatedAct act, const Tensor& out) override;
  void QkvRopeStore(const Tensor& qkv, const Tensor& positions, const RopeTable& rope,
                    const QkvLayout& layout, const AttentionMeta& meta, const KvLayer& layer,
                    const Tensor& q_out) override;
  void RmsNormQkvRopeStore(const Tensor& x, const NormSpec& norm, const Tensor& w_qkv,
                           const Tensor& bias, const Tensor& positions, const RopeTable& rope,
                           const QkvLayout& layout, const AttentionMeta& meta, const KvLayer& layer,
                           const Tensor& qkv, const Tensor& q_out) override;
  // (gate, up) row pairs: rows 2j and 2j + 1 are gate row j and up row j, so the small-batch GEMV
  // finds both halves of an output in one block and applies the activation in its epilogue.
  Tensor FuseGateUp(const Tensor& w_gate, const Tensor& w_up) override;
  void MatMulGated(const Tensor& x, const Tensor& w_gate_up, GatedAct act,
                   const Tensor& out) override;

  // Routed experts on the device (moe.cuh): every launch shape fixed by the row count, so decode
  // steps of MoE models run in CUDA graphs. Expert weights bf16 (Upload converts others).
  bool has_moe() const override { return true; }
  bool has_moe_biases() const override { return true; }
  bool has_attention_sinks() const override { return true; }
  // fp8, int8, int4; not the rotated (turbo) schemes.
  bool SupportsKvQuant(KvQuant q) const override { return !KvQuantRotated(q); }
  Status CheckMoe(int64_t hidden, int64_t expert_width, int num_experts, int top_k) const override;
  void MoeMlp(const Tensor& x, const MoeWeights& w, const MoeParams& params,
              const Tensor& router_logits, const Tensor& expert_ids, const Tensor& out) override;

  bool has_argmax_rows() const override { return true; }
  void ArgmaxRows(const Tensor& x, const Tensor& out) override;  // argmax.cuh
  bool has_edit_logits() const override { return true; }
  void EditLogits(const Tensor& x, std::span<const LogitEdit> edits) override;  // logit_edits.cuh
  bool has_mask_logits() const override { return true; }
  void MaskLogits(const Tensor& x, std::span<const int32_t> rows,
                  std::span<const std::span<const uint32_t>> masks) override;  // logit_edits.cuh
  bool has_logprob_rows() const override { return true; }
  void LogprobRows(const Tensor& x, std::span<const LogprobRow> rows, const Tensor& ids, int top_k,
                   const Tensor& out) override;        // logprob_rows.cuh
  bool has_sample_rows(int64_t vocab) const override;  // sample_rows.cuh
  void SampleRows(const Tensor& x, std::span<const int32_t> rows,
                  std::span<const DrawParams> params, const Tensor& out) override;

  // On the device, for bf16 or f32 tensors.
  void FillUniform(const Tensor& t, uint64_t seed, float lo, float scale) override;

  // ---- CUDA-specific ----
  cudaStream_t stream() const;
  void set_small_batch_gemm_rows(int rows);
  // One-row GEMVs take the TMA-streamed kernel (stream_gemv.cuh) on Hopper; false: the
  // small-batch kernel (tuning.gemv_stream; tests of both).
  void set_stream_gemv(bool on) { options_.tuning.gemv_stream = on; }
  const CudaTuning& tuning() const { return options_.tuning; }
  // Replaces the kernel variants for later calls (tests and benchmarks; CHECKs that it
  // validates). Not while a graph that baked the old ones is replayed.
  void set_tuning(const CudaTuning& tuning);
  int num_sms() const { return num_sms_; }
  cuda::DeviceAllocator& allocator() { return *allocator_; }

 private:
  CudaBackend(const CudaBackendOptions& options, const cudaDeviceProp& prop);
  // Whether x @ w^T takes the small-batch GEMV (at most small_batch_gemm_rows rows, aligned),
  // or for a quantized w the quantized one (UseQuantGemv without a norm).
  bool UseGemv(const Tensor& x, const Tensor& w) const;
  // Whether x @ w^T for a quantized w takes the quantized GEMV (at most
  // tuning.quant_gemv_rows rows; `norm`: with the RMSNorm prologue).
  bool UseQuantGemv(const Tensor& x, const Tensor& w, bool norm) const;
  // x @ w^T for a quantized w (quant_gemv.cuh) under `epilogue` into out: the quantized GEMV
  // (always when `norm` is given: the caller checked UseQuantGemv(x, w, true)), or the weight
  // dequantized chunk by chunk into bf16 scratch for cuBLASLt.
  void QuantMatMul(const Tensor& x, const Tensor& w, const Tensor& out, cuda::GemvEpilogue epilogue,
                   const cuda::GemvNorm* norm);
  // The QkvRopeStore kernel's arguments (checks shapes and dtypes).
  cuda::QkvRopeStoreArgs RopeStoreArgs(int64_t qkv_cols, int64_t n, const Tensor& positions,
                                       const RopeTable& rope, const QkvLayout& layout,
                                       const AttentionMeta& meta, const KvLayer& layer,
                                       const Tensor& q_out) const;
  // Fills *out and returns true when the small-batch GEMV can RMSNorm x in its prologue.
  bool GemvNormFor(const Tensor& x, const NormSpec& norm, const Tensor& w,
                   cuda::GemvNorm* out) const;
  // Whether kernels launch with programmatic dependent launch (tuning.cuda_pdl).
  bool pdl() const { return options_.tuning.cuda_pdl; }
  // The logits GEMV's work queue, or null when tuning.gemv_queue is off.
  unsigned* GemvQueue() const {
    return options_.tuning.gemv_queue ? static_cast<unsigned*>(gemv_queue_.data()) : nullptr;
  }

  CudaBackendOptions options_;
  int device_;
  int num_sms_;
  std::string name_;
  std::shared_ptr<cuda::DeviceAllocator> allocator_;
  std::unique_ptr<cuda::CudaStream> stream_;
  std::unique_ptr<cuda::CublasLtGemm> gemm_;
  std::unique_ptr<cuda::OpProfiler> prof_;  // options_.profile (op_profiler.h)
  // u32 [2], zero between launches: the streamed GEMV's work queue for logits (stream_gemv.cuh).
  Tensor gemv_queue_;
  // EditLogits' upload: page-locked staging grown on demand, and the event after its last copy
  // out (the next call waits for it before rewriting the staging).
  std::unique_ptr<cuda::PinnedHostBuffer> edit_staging_;
  std::unique_ptr<cuda::CudaEvent> edit_staged_;
  // MaskLogits' upload (rows, each row's mask index, the distinct masks), the same way, and its
  // host scratch: [rows] mask indices, the distinct masks.
  std::unique_ptr<cuda::PinnedHostBuffer> mask_staging_;
  std::unique_ptr<cuda::CudaEvent> mask_staged_;
  std::vector<int32_t> mask_of_;
  // CopyKvBlocks' bounce buffer and its segment table, page-locked, grown on demand.
  std::unique_ptr<cuda::PinnedHostBuffer> kv_bounce_;
  std::unique_ptr<cuda::PinnedHostBuffer> kv_segments_;
  // The bytes of one block across the pools of `kv` (CHECKs they are on this device, 16-aligned).
  size_t KvBlockBytes(const std::vector<KvLayer>& kv);
  // Allocates the staging ring (and its side streams) for blocks of `block_bytes` in `parts` parts.
  void EnsureKvStage(size_t block_bytes, int parts);
  // The first slot of `n` free ones in the staging ring (waiting for the batches still using
  // them), from kv_stage_head_ on, wrapping to 0.
  int TakeKvStageSlots(int n);
  // CopyKvBlocks into the pools from page-locked `hosts` through the staging ring
  // (kv_upload_engine): the copy engine brings runs of consecutive host blocks into the ring on
  // kv_upload_stream_, a kernel on the compute stream scatters each chunk into the pools; returns
  // once the host bytes are read.
  void UploadKvBlocks(const std::vector<KvLayer>& kv, std::span<const int32_t> blocks,
                      std::span<uint8_t* const> hosts);
  // StartKvCopyToHost's staging ring of kv_stage_slots_ blocks on the device, its gather
  // segments (page-locked, kv_parts_ a slot), the side stream, and the batches in flight (a slot
  // range each, done when its event is).
  struct KvStageBatch {
    int first = 0;
    int count = 0;
    uint64_t ticket = 0;
    std::unique_ptr<cuda::CudaEvent> done;
  };
  Tensor kv_stage_;
  std::unique_ptr<cuda::PinnedHostBuffer> kv_stage_segments_;
  std::unique_ptr<cuda::CudaStream> kv_copy_stream_;
  std::unique_ptr<cuda::CudaStream> kv_upload_stream_;
  std::unique_ptr<cuda::CudaEvent> kv_gathered_;
  std::vector<KvStageBatch> kv_stage_batches_;
  size_t kv_stage_block_bytes_ = 0;
  int kv_stage_slots_ = 0;
  int kv_stage_head_ = 0;
  uint64_t kv_copy_tickets_ = 0;
  std::vector<std::span<const uint32_t>> distinct_masks_;
  // `staging` grown to >= `bytes` once its last upload (`staged`) is done; its host pointer.
  static void* StagingFor(std::unique_ptr<cuda::PinnedHostBuffer>& staging,
                          std::unique_ptr<cuda::CudaEvent>& staged, size_t bytes);
};

}  // namespace loom
