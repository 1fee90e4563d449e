#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "backend/cuda/argmax.cuh"
#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_allocator.h"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/fp8_gemv.cuh"
#include "backend/cuda/ktrace.cuh"
#include "backend/cuda/kv_copy.cuh"
#include "backend/cuda/logit_edits.cuh"
#include "backend/cuda/logprob_rows.cuh"
#include "backend/cuda/moe.cuh"
#include "backend/cuda/op_profiler.h"
#include "backend/cuda/paged_attention.cuh"
#include "backend/cuda/qkv_rope_store.cuh"
#include "backend/cuda/quant_gemv.cuh"
#include "backend/cuda/quant_layout.h"
#include "backend/cuda/rms_norm.cuh"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/rows.cuh"
#include "backend/cuda/sample_rows.cuh"
#include "backend/cuda/small_batch_gemm.cuh"
#include "backend/cuda/stream_gemv.cuh"
#include "base/logging.h"
#include "tensor/quant.h"

namespace loom {
namespace {

// Elements converted per staging round trip in Upload (64 MB of f32).
constexpr int64_t kUploadChunkElems = int64_t{16} << 20;

std::string Describe(const Tensor& t) { return t.defined() ? t.DebugString() : "undefined"; }

void CheckDevice(const Tensor& t, const char* op, const char* what) {
  CHECK(t.defined() && t.device() == Device::kCuda)
      << op << ": " << what << " must be a CUDA tensor, got " << Describe(t);
}

void CheckAct(const Tensor& t, const char* op, const char* what) {
  CheckDevice(t, op, what);
  CHECK(t.dtype() == DType::kBF16) << op << ": " << what << " must be bf16, got " << Describe(t);
}

// The K and V pools of `layer` for kv_heads x head_dim: bf16 rows, or quantized blocks
// (--kv-quant: u8 [blocks, block_size, kv heads, KvQuantRowBytes], tensor/kv_quant.h).
struct KvPools {
  cuda::KvPoolDesc k, v;
};
KvPools CheckKvPools(const KvLayer& layer, int64_t kv_heads, int64_t head_dim, const char* op) {
  const Tensor& kp = layer.k;
  for (const auto& [pool, quant] : {std::pair<const Tensor*, KvQuant>{&layer.k, layer.k_quant},
                                    std::pair<const Tensor*, KvQuant>{&layer.v, layer.v_quant}}) {
    CheckDevice(*pool, op, "KV pool");
    CHECK(!KvQuantRotated(quant)) << op << ": " << KvQuantName(quant) << " KV pools are CPU only";
    const bool plain = quant == KvQuant::kNone;
    CHECK(pool->ndim() == 4 && kp.ndim() == 4 && pool->dim(0) == kp.dim(0) &&
          pool->dim(1) == kp.dim(1) && pool->dim(2) == kv_heads &&
          (plain ? pool->dtype() == DType::kBF16 && pool->dim(3) == head_dim
                 : pool->dtype() == DType::kU8 &&
                       pool->dim(3) == static_cast<int64_t>(
                                           KvQuantRowBytes(quant, static_cast<int>(head_dim)))))
        << op << ": pools " << Describe(kp) << " / " << Describe(layer.v) << " ("
        << KvQuantName(layer.k_quant) << " / " << KvQuantName(layer.v_quant) << ") for " << kv_heads
        << " kv heads x " << head_dim;
  }
  const int bs = static_cast<int>(kp.dim(1)), kvh = static_cast<int>(kv_heads),
            d = static_cast<int>(head_dim);
  return {cuda::KvPoolDesc(layer.k_quant, d, bs, kvh), cuda::KvPoolDesc(layer.v_quant, d, bs, kvh)};
}

// A MatMul weight: bf16, or GGUF-quantized in the device layout (Upload, quant_layout.h).
void CheckWeight(const Tensor& t, const char* op, const char* what) {
  CheckDevice(t, op, what);
  CHECK(t.dtype() == DType::kBF16 || cuda::KeepsQuantized(t.dtype()))
      << op << ": " << what << " must be bf16 or q8_0/q4_0/q4_K/q6_K, got " << Describe(t);
}

bool Quantized(const Tensor& w) { return cuda::KeepsQuantized(w.dtype()); }

void CheckFloat(const Tensor& t, const char* op, const char* what) {
  CheckDevice(t, op, what);
  CHECK(t.dtype() == DType::kBF16 || t.dtype() == DType::kF32)
      << op << ": " << what << " must be bf16 or f32, got " << Describe(t);
}

void CheckI32(const Tensor& t, int64_t numel, const char* op, const char* what) {
  CheckDevice(t, op, what);
  CHECK(t.dtype() == DType::kI32 && t.numel() == numel)
      << op << ": " << what << " must be i32[" << numel << "], got " << Describe(t);
}

// Page-locked host memory owned as a Buffer (AllocHostStaging).
class PinnedBuffer final : public Buffer {
 public:
  PinnedBuffer(void* data, size_t bytes) : Buffer(data, bytes, Device::kCpu) {}
  ~PinnedBuffer() override { (void)cudaFreeHost(data()); }
};

}  // namespace

// options_.profile (--cuda-profile): times the rest of the enclosing op (op_profiler.h); the
// label and byte count are only evaluated when profiling.
#define LOOM_PROFILE_OP(label, bytes)                                                \
  const bool prof_on_ = prof_ != nullptr && prof_->enabled();                        \
  cuda::OpProfiler::Scope prof_scope_(prof_on_ ? prof_.get() : nullptr,              \
                                      prof_on_ ? std::string(label) : std::string(), \
                                      prof_on_ ? static_cast<double>(bytes) : 0.0)

namespace {
std::string Sh(const Tensor& t) {
  std::string s;
  for (int i = 0; i < t.ndim(); ++i) s += (i ? "x" : "") + std::to_string(t.dim(i));
  return s + (t.dtype() == DType::kF32 ? " f32" : "");
}
}  // namespace

int CudaBackend::DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

Status CudaBackend::CheckGpu(int device) {
  const int count = DeviceCount();
  const std::string which = "CUDA device " + std::to_string(device);
  if (device < 0 || device >= count) {
    return FailedPreconditionError(which + " not available (" + std::to_string(count) +
                                   " CUDA devices visible)");
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    return FailedPreconditionError(which + ": " + cudaGetErrorString(cudaGetLastError()));
  }
  if (prop.major < 9) {
    return FailedPreconditionError(
        which + " (" + prop.name + ", compute capability " + std::to_string(prop.major) + "." +
        std::to_string(prop.minor) +
        "): loom's CUDA kernels need compute capability 9.0 or newer (Hopper or later)");
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const CudaBackendOptions& options) {
  RETURN_IF_ERROR(options.tuning.Validate());
  RETURN_IF_ERROR(CheckGpu(options.device));
  CUDA_CHECK(cudaSetDevice(options.device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, options.device));
  return std::unique_ptr<CudaBackend>(new CudaBackend(options, prop));
}

CudaBackend::CudaBackend(const CudaBackendOptions& options, const cudaDeviceProp& prop)
    : options_(options), device_(options.device), num_sms_(prop.multiProcessorCount) {
  set_small_batch_gemm_rows(options.small_batch_gemm_rows);
  std::ostringstream ss;
  ss << "cuda (" << prop.name << ", sm_" << prop.major << prop.minor << ", " << num_sms_ << " SMs)";
  name_ = ss.str();
  allocator_ = std::make_shared<cuda::DeviceAllocator>(device_);
  stream_ = std::make_unique<cuda::CudaStream>();
  gemm_ = std::make_unique<cuda::CublasLtGemm>(*allocator_, stream_->get(),
                                               options_.tuning.cublaslt_tune, options_.profile);
  prof_ = std::make_unique<cuda::OpProfiler>(stream_->get(), options_.profile);
  gemv_queue_ = Alloc(DType::kI32, Shape{2});
  cuda::KTraceInit();  // nothing outside diagnostic builds (ktrace.cuh)
  if (!options_.ktrace_file.empty() && !cuda::KTraceBuilt()) {
    LOG(WARNING) << "--ktrace-file " << options_.ktrace_file
                 << ": this build records no kernel timeline (configure with "
                    "-DLOOM_CUDA_KTRACE=ON); nothing will be written";
  }
}

CudaBackend::~CudaBackend() {
  if (stream_) (void)cudaStreamSynchronize(stream_->get());
  prof_.reset();  // prints the --cuda-profile table
  gemm_.reset();
  if (!options_.ktrace_file.empty()) cuda::KTraceDump(options_.ktrace_file.c_str());
}

void CudaBackend::set_tuning(const CudaTuning& tuning) {
  const Status valid = tuning.Validate();
  CHECK(valid.ok()) << valid.message();
  options_.tuning = tuning;
}

std::string CudaBackend::name() const { return name_; }

Status CudaBackend::CheckHeadDim(int head_dim) const {
  const auto& dims = cuda::kPagedAttentionHeadDims;
  if (std::find(std::begin(dims), std::end(dims), head_dim) != std::end(dims)) return OkStatus();
  std::string built;
  for (int d : dims) built += (built.empty() ? "" : ", ") + std::to_string(d);
  return UnimplementedError("head_dim " + std::to_string(head_dim) +
                            ": the CUDA backend has attention kernels for head_dim " + built +
                            " (--device cpu runs any head_dim)");
}
Status CudaBackend::CheckMoe(int64_t hidden, int64_t expert_width, int num_experts,
                             int top_k) const {
  if (hidden % 16 != 0 || expert_width % 16 != 0) {
    return UnimplementedError("hidden size " + std::to_string(hidden) + " and expert width " +
                              std::to_string(expert_width) +
                              ": the CUDA backend's expert kernels need multiples of 16 "
                              "(--device cpu runs any size)");
  }
  if (num_experts > cuda::kMoeMaxExperts || top_k < 1 || top_k > num_experts) {
    return UnimplementedError("top " + std::to_string(top_k) + " of " +
                              std::to_string(num_experts) + " experts: the CUDA backend routes " +
                              "at most " + std::to_string(cuda::kMoeMaxExperts) +
                              " experts (--device cpu runs any number)");
  }
  return OkStatus();
}

cudaStream_t CudaBackend::stream() const { return stream_->get(); }

void CudaBackend::set_small_batch_gemm_rows(int rows) {
  CHECK(rows >= 0 && rows <= cuda::kSmallBatchMaxRows) << "small_batch_gemm_rows " << rows;
  options_.small_batch_gemm_rows = rows;
}
void CudaBackend::Synchronize() {
  stream_->Synchronize();
  if (prof_ != nullptr && prof_->enabled()) prof_->Flush();
}

void CudaBackend::MemoryInfo(size_t* free_bytes, size_t* total_bytes) const {
  CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

Tensor CudaBackend::Alloc(DType dtype, Shape shape) {
  LOOM_PROFILE_OP("alloc+memset " +
                      std::to_string(shape.numel() ? RowBytes(dtype, shape[shape.ndim() - 1]) *
                                                         (shape.numel() / shape[shape.ndim() - 1])
                                                   : 0) +
                      " B",
                  0);
  const int64_t cols = shape.ndim() == 0 ? 0 : shape[shape.ndim() - 1];
  const size_t bytes =
      shape.numel() == 0 ? 0 : RowBytes(dtype, cols) * static_cast<size_t>(shape.numel() / cols);
  Tensor t(dtype, shape, allocator_->NewBuffer(bytes));
  if (bytes > 0) CUDA_CHECK(cudaMemsetAsync(t.data(), 0, bytes, stream()));
  return t;
}

Tensor CudaBackend::AllocScratch(DType dtype, Shape shape) {
  const int64_t cols = shape.ndim() == 0 ? 0 : shape[shape.ndim() - 1];
  const size_t bytes =
      shape.numel() == 0 ? 0 : RowBytes(dtype, cols) * static_cast<size_t>(shape.numel() / cols);
  return Tensor(dtype, shape, allocator_->NewBuffer(bytes));
}

bool CudaBackend::prefers_fused_ops() const { return options_.tuning.cuda_fuse; }

Tensor CudaBackend::ConcatRows(const std::vector<Tensor>& parts) {
  const Shape shape = ConcatRowsShape(parts);
  const DType dtype = parts.front().dtype();
  Tensor out(dtype, shape, allocator_->NewBuffer(RowBytes(dtype, shape.numel())));
  char* dst = static_cast<char*>(out.data());
  for (const Tensor& p : parts) {
    CheckDevice(p, "ConcatRows", "part");
    CUDA_CHECK(cudaMemcpyAsync(dst, p.data(), p.nbytes(), cudaMemcpyDeviceToDevice, stream()));
    dst += p.nbytes();
  }
  return out;
}

void CudaBackend::TrimMemory() {
  Synchronize();  // the copies out of blocks about to be freed must be done
  allocator_->EmptyCache();
}

Tensor CudaBackend::Upload(const Tensor& host) {
  CHECK(host.defined() && host.device() == Device::kCpu) << "Upload: " << Describe(host);
  const DType src = host.dtype();
  const bool quantized = GetDTypeInfo(src).quantized;
  auto raw_copy = [&](const Tensor& h) {
    Tensor t(h.dtype(), h.shape(), allocator_->NewBuffer(h.nbytes()));
    CUDA_CHECK(cudaMemcpyAsync(t.data(), h.data(), h.nbytes(), cudaMemcpyHostToDevice, stream()));
    return t;
  };
  if (src == DType::kI32) return raw_copy(host);
  if (host.ndim() == 1 && !quantized) {  // norms, biases, inv_freq: f32
    if (src == DType::kF32) return raw_copy(host);
    Tensor f = HostTensor(DType::kF32, host.shape());
    DequantizeRow(src, host.data(), f.data_as<float>(), host.numel());
    return raw_copy(f);
  }
  if (src == DType::kBF16) return raw_copy(host);
  if (quantized && options_.tuning.quant_weights && cuda::KeepsQuantized(src) &&
      (src != DType::kQ5_K || options_.tuning.quant_q5k) &&
      (src != DType::kFP8 || options_.tuning.quant_fp8) && host.ndim() == 2 &&
      host.cols() % cuda::QuantRowMultiple(src) == 0) {
    // Kept quantized: rows repacked into the device layout (quant_layout.h), chunk by chunk.
    Tensor out(src, host.shape(), allocator_->NewBuffer(host.nbytes()));
    const int64_t rows = host.rows(), cols = host.cols();
    const size_t rb = host.row_bytes();
    const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{64} << 20) / static_cast<int64_t>(rb));
    std::vector<uint8_t> packed(rb * static_cast<size_t>(std::min(rows, chunk_rows)));
    for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
      const int64_t nr = std::min(chunk_rows, rows - r0);
      cuda::RepackRows(src, static_cast<const char*>(host.data()) + r0 * rb, packed.data(), nr,
                       cols);
      // From pageable memory: returns once the source is staged, so `packed` may be reused.
      CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(out.data()) + r0 * rb, packed.data(),
                                 rb * static_cast<size_t>(nr), cudaMemcpyHostToDevice, stream()));
    }
    return out;
  }

  // f32 / f16 / quantized -> bf16, converted on the device chunk by chunk.
  Tensor out(DType::kBF16, host.shape(),
             allocator_->NewBuffer(RowBytes(DType::kBF16, host.numel())));
  const int64_t rows = host.rows(), cols = host.cols();
  const int64_t chunk_rows = std::max<int64_t>(1, kUploadChunkElems / std::max<int64_t>(cols, 1));
  const DType stage_t = quantized ? DType::kF32 : src;
  Tensor stage(stage_t, Shape{std::min(rows, chunk_rows), cols},
               allocator_->NewBuffer(RowBytes(stage_t, cols) * std::min(rows, chunk_rows)));
  std::vector<float> deq;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
    const int64_t nr = std::min(chunk_rows, rows - r0);
    const void* chunk_src = static_cast<const char*>(host.data()) + r0 * host.row_bytes();
    if (quantized) {
      deq.resize(static_cast<size_t>(nr * cols));
      for (int64_t r = 0; r < nr; ++r) {
        DequantizeRow(src, static_cast<const char*>(chunk_src) + r * host.row_bytes(),
                      deq.data() + r * cols, cols);
      }
      chunk_src = deq.data();
    }
    // From pageable memory: returns once the source is staged, so `deq` may be reused.
    CUDA_CHECK(cudaMemcpyAsync(stage.data(), chunk_src, RowBytes(stage_t, cols) * nr,
                               cudaMemcpyHostToDevice, stream()));
    cuda::LaunchConvertToBf16(stage.data(), stage_t,
                              static_cast<char*>(out.data()) + r0 * out.row_bytes(), nr * cols,
                              stream());
  }
  return out;
}

void CudaBackend::CopyToHost(const Tensor& src, void* dst) {
  CheckDevice(src, "CopyToHost", "src");
  CUDA_CHECK(cudaMemcpyAsync(dst, src.data(), src.nbytes(), cudaMemcpyDeviceToHost, stream()));
  Synchronize();
}

std::shared_ptr<Buffer> CudaBackend::AllocHostStaging(size_t bytes) {
  void* p = nullptr;
  CUDA_CHECK(cudaMallocHost(&p, bytes == 0 ? 1 : bytes));
  return std::make_shared<PinnedBuffer>(p, bytes);
}

namespace {

// The device address of page-locked host memory (read and written by kernels in place); null for
// other memory.
uint8_t* PinnedDeviceView(void* host) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, host) == cudaSuccess && attr.type == cudaMemoryTypeHost &&
      attr.devicePointer != nullptr) {
    return static_cast<uint8_t*>(attr.devicePointer);
  }
  (void)cudaGetLastError();  // an unregistered pointer is an answer, not an error
  return nullptr;
}

}  // namespace

size_t CudaBackend::KvBlockBytes(const std::vector<KvLayer>& kv) {
  size_t block_bytes = 0;
  for (const KvLayer& layer : kv) {
    CheckDevice(layer.k, "CopyKvBlocks", "k");
    CheckDevice(layer.v, "CopyKvBlocks", "v");
    for (const Tensor* t : {&layer.k, &layer.v}) {
      CHECK_EQ(t->Slice(0, 1).nbytes() % 16, 0u) << "CopyKvBlocks: " << Describe(*t);
      block_bytes += t->Slice(0, 1).nbytes();
    }
  }
  return block_bytes;
}

void CudaBackend::CopyKvBlocks(const std::vector<KvLayer>& kv, std::span<const int32_t> blocks,
                               std::span<uint8_t* const> hosts, bool to_host) {
  CHECK_EQ(hosts.size(), blocks.size()) << "CopyKvBlocks: one host pointer a block";
  if (blocks.empty() || kv.empty()) return;
  if (!to_host && options_.tuning.kv_upload_engine &&
      std::all_of(hosts.begin(), hosts.end(),
                  [&](uint8_t* h) { return PinnedDeviceView(h) != nullptr; })) {
    UploadKvBlocks(kv, blocks, hosts);
    return;
  }
  const size_t block_bytes = KvBlockBytes(kv);
  constexpr size_t kBounceBytes = size_t{64} << 20;
  const size_t per_launch = std::max<size_t>(1, kBounceBytes / block_bytes);
  const size_t parts = 2 * kv.size();
  if (kv_bounce_ == nullptr || kv_bounce_->size() < per_launch * block_bytes) {
    kv_bounce_ = std::make_unique<cuda::PinnedHostBuffer>(per_launch * block_bytes);
    kv_segments_ =
        std::make_unique<cuda::PinnedHostBuffer>(per_launch * parts * sizeof(cuda::CopySegment));
  }
  // Page-locked host memory (AllocHostStaging: the host tier's blocks, the SSD tier's restore
  // slots) is read and written by the kernel in place (through its device address); other memory
  // goes through the bounce buffer. One lookup per allocation run: consecutive blocks of one
  // allocation share it.
  std::vector<uint8_t*> device_view(blocks.size(), nullptr);
  for (size_t i = 0; i < blocks.size(); ++i) device_view[i] = PinnedDeviceView(hosts[i]);
  auto* segments = static_cast<cuda::CopySegment*>(kv_segments_->data());
  auto* bounce = static_cast<uint8_t*>(kv_bounce_->data());
  for (size_t first = 0; first < blocks.size(); first += per_launch) {
    const size_t n = std::min(per_launch, blocks.size() - first);
    size_t seg = 0;
    size_t bounced = 0;  // blocks of this launch through the bounce buffer
    for (size_t i = first; i < first + n; ++i) {
      uint8_t* at = device_view[i];
      if (at == nullptr) {
        at = bounce + bounced * block_bytes;
        if (!to_host) std::memcpy(at, hosts[i], block_bytes);
        ++bounced;
      }
      size_t offset = 0;
      for (const KvLayer& layer : kv) {
        for (const Tensor* t : {&layer.k, &layer.v}) {
          const Tensor part = t->Slice(blocks[i], 1);
          cuda::CopySegment& s = segments[seg++];
          s.src = to_host ? part.data() : at + offset;
          s.dst = to_host ? static_cast<void*>(at + offset) : part.data();
          s.bytes = part.nbytes();
          offset += part.nbytes();
        }
      }
    }
    cuda::LaunchCopySegments(segments, static_cast<int>(seg), stream());
    Synchronize();  // the bounce and the segment table are reused by the next launch
    if (to_host && bounced > 0) {
      size_t k = 0;
      for (size_t i = first; i < first + n; ++i) {
        if (device_view[i] != nullptr) continue;
        std::memcpy(hosts[i], bounce + k * block_bytes, block_bytes);
        ++k;
      }
    }
  }
}

namespace {

// How many of the first `n` host blocks (at most) follow each other in memory from hosts[0].
int HostRun(std::span<uint8_t* const> hosts, int n, size_t block_bytes) {
  int run = 1;
  while (run < n &&
         hosts[static_cast<size_t>(run)] == hosts[0] + static_cast<size_t>(run) * block_bytes) {
    ++run;
  }
  return run;
}

}  // namespace

void CudaBackend::EnsureKvStage(size_t block_bytes, int parts) {
  if (kv_stage_block_bytes_ == block_bytes) return;  // one KV layout per backend in practice
  for (const KvStageBatch& b : kv_stage_batches_) b.done->Synchronize();
  kv_stage_batches_.clear();
  constexpr size_t kStageBytes = size_t{256} << 20;
  kv_stage_slots_ = static_cast<int>(std::max<size_t>(1, kStageBytes / block_bytes));
  kv_stage_ =
      Alloc(DType::kBF16,
            Shape{static_cast<int64_t>(static_cast<size_t>(kv_stage_slots_) * block_bytes / 2)});
  kv_stage_segments_ = std::make_unique<cuda::PinnedHostBuffer>(
      static_cast<size_t>(kv_stage_slots_ * parts) * sizeof(cuda::CopySegment));
  kv_copy_stream_ = std::make_unique<cuda::CudaStream>();
  kv_upload_stream_ = std::make_unique<cuda::CudaStream>();
  kv_gathered_ = std::make_unique<cuda::CudaEvent>();
  kv_stage_block_bytes_ = block_bytes;
  kv_stage_head_ = 0;
}

uint64_t CudaBackend::StartKvCopyToHost(const std::vector<KvLayer>& kv,
                                        std::span<const int32_t> blocks,
                                        std::span<uint8_t* const> hosts) {
  CHECK_EQ(hosts.size(), blocks.size()) << "StartKvCopyToHost: one host pointer a block";
  if (blocks.empty() || kv.empty()) return 0;
  for (uint8_t* host : hosts) {
    // The copy engine needs page-locked memory; kv_copy_engine = 0: the kernel, synchronously.
    if (!options_.tuning.kv_copy_engine || PinnedDeviceView(host) == nullptr) {
      CopyKvBlocks(kv, blocks, hosts, /*to_host=*/true);
      return 0;
    }
  }
  const size_t block_bytes = KvBlockBytes(kv);
  const int parts = static_cast<int>(2 * kv.size());
  EnsureKvStage(block_bytes, parts);
  const uint64_t ticket = ++kv_copy_tickets_;
  auto* stage = static_cast<uint8_t*>(kv_stage_.data());
  auto* segments = static_cast<cuda::CopySegment*>(kv_stage_segments_->data());
  for (size_t first = 0; first < blocks.size();) {
    const int n = static_cast<int>(std::min<size_t>(kv_stage_slots_, blocks.size() - first));
    const int head = TakeKvStageSlots(n);
    cuda::CopySegment* seg = segments + static_cast<size_t>(head * parts);
    for (int i = 0; i < n; ++i) {
      uint8_t* at = stage + static_cast<size_t>(head + i) * block_bytes;
      for (const KvLayer& layer : kv) {
        for (const Tensor* t : {&layer.k, &layer.v}) {
          const Tensor part = t->Slice(blocks[first + static_cast<size_t>(i)], 1);
          *seg++ = {part.data(), at, part.nbytes()};
          at += part.nbytes();
        }
      }
    }
    cuda::LaunchCopySegments(segments + static_cast<size_t>(head * parts), n * parts, stream());
    kv_gathered_->Record(stream());
    CUDA_CHECK(cudaStreamWaitEvent(kv_copy_stream_->get(), kv_gathered_->get(), 0));
    // One copy per run of host blocks that are consecutive in memory.
    for (int i = 0; i < n;) {
      const int run = HostRun(hosts.subspan(first + static_cast<size_t>(i)), n - i, block_bytes);
      CUDA_CHECK(cudaMemcpyAsync(hosts[first + static_cast<size_t>(i)],
                                 stage + static_cast<size_t>(head + i) * block_bytes,
                                 static_cast<size_t>(run) * block_bytes, cudaMemcpyDeviceToHost,
                                 kv_copy_stream_->get()));
      i += run;
    }
    KvStageBatch batch{head, n, ticket, std::make_unique<cuda::CudaEvent>()};
    batch.done->Record(kv_copy_stream_->get());
    kv_stage_batches_.push_back(std::move(batch));
    first += static_cast<size_t>(n);
  }
  return ticket;
}

int CudaBackend::TakeKvStageSlots(int n) {
  CHECK_LE(n, kv_stage_slots_);
  if (kv_stage_head_ + n > kv_stage_slots_) kv_stage_head_ = 0;
  const int head = kv_stage_head_;
  // Slots still in flight in [head, head + n): their copies read those slots (and their
  // segments) until done. Only when the copies lag a whole ring behind does this wait.
  std::erase_if(kv_stage_batches_, [&](const KvStageBatch& b) {
    if (b.first >= head + n || head >= b.first + b.count) return false;
    b.done->Synchronize();
    return true;
  });
  kv_stage_head_ = head + n;
  return head;
}

void CudaBackend::UploadKvBlocks(const std::vector<KvLayer>& kv, std::span<const int32_t> blocks,
                                 std::span<uint8_t* const> hosts) {
  const size_t block_bytes = KvBlockBytes(kv);
  const int parts = static_cast<int>(2 * kv.size());
  EnsureKvStage(block_bytes, parts);
  auto* stage = static_cast<uint8_t*>(kv_stage_.data());
  auto* segments = static_cast<cuda::CopySegment*>(kv_stage_segments_->data());
  // Half a ring a chunk: the copy engine fills one half while the kernel scatters the other.
  const int chunk = std::max(1, kv_stage_slots_ / 2);
  cuda::CudaEvent landed;
  for (size_t first = 0; first < blocks.size();) {
    const int n = static_cast<int>(std::min<size_t>(chunk, blocks.size() - first));
    const int head = TakeKvStageSlots(n);
    // One copy per run of host blocks that are consecutive in memory.
    for (int i = 0; i < n;) {
      const int run = HostRun(hosts.subspan(first + static_cast<size_t>(i)), n - i, block_bytes);
      CUDA_CHECK(cudaMemcpyAsync(stage + static_cast<size_t>(head + i) * block_bytes,
                                 hosts[first + static_cast<size_t>(i)],
                                 static_cast<size_t>(run) * block_bytes, cudaMemcpyHostToDevice,
                                 kv_upload_stream_->get()));
      i += run;
    }
    landed.Record(kv_upload_stream_->get());
    CUDA_CHECK(cudaStreamWaitEvent(stream(), landed.get(), 0));
    cuda::CopySegment* seg = segments + static_cast<size_t>(head * parts);
    for (int i = 0; i < n; ++i) {
      const uint8_t* at = stage + static_cast<size_t>(head + i) * block_bytes;
      for (const KvLayer& layer : kv) {
        for (const Tensor* t : {&layer.k, &layer.v}) {
          const Tensor part = t->Slice(blocks[first + static_cast<size_t>(i)], 1);
          *seg++ = {at, part.data(), part.nbytes()};
          at += part.nbytes();
        }
      }
    }
    cuda::LaunchCopySegments(segments + static_cast<size_t>(head * parts), n * parts, stream());
    // The slots (and their segments) are free again once the scatter has run.
    KvStageBatch batch{head, n, ++kv_copy_tickets_, std::make_unique<cuda::CudaEvent>()};
    batch.done->Record(stream());
    kv_stage_batches_.push_back(std::move(batch));
    first += static_cast<size_t>(n);
  }
  // The host bytes are read: the caller may hand the host blocks to other copies.
  kv_upload_stream_->Synchronize();
}

void CudaBackend::WaitKvCopy(uint64_t ticket) {
  if (ticket == 0) return;
  // The side stream runs its copies in order: every batch of a ticket <= `ticket` is done once
  // the last of them is.
  std::erase_if(kv_stage_batches_, [&](const KvStageBatch& b) {
    if (b.ticket > ticket) return false;
    b.done->Synchronize();
    return true;
  });
}

bool CudaBackend::KvCopyDone(uint64_t ticket) {
  if (ticket == 0) return true;
  // In order on the side stream: the ticket's last batch done means all of its batches are.
  for (auto it = kv_stage_batches_.rbegin(); it != kv_stage_batches_.rend(); ++it) {
    if (it->ticket <= ticket) return it->done->Done();
  }
  return true;
}

void CudaBackend::CopyFromHost(const void* src, const Tensor& dst) {
  CheckDevice(dst, "CopyFromHost", "dst");
  CUDA_CHECK(cudaMemcpyAsync(dst.data(), src, dst.nbytes(), cudaMemcpyHostToDevice, stream()));
  Synchronize();
}

void CudaBackend::Embed(const Tensor& table, const Tensor& ids, float scale, const Tensor& out) {
  LOOM_PROFILE_OP("embed " + Sh(out), 0);
  CheckAct(out, "Embed", "out");
  CheckI32(ids, out.rows(), "Embed", "ids");
  CHECK_EQ(table.cols(), out.cols())
      << "Embed: table " << Describe(table) << " out " << Describe(out);
  if (Quantized(table)) {
    CheckDevice(table, "Embed", "table");
    cuda::LaunchDequantRows(table.dtype(), table.data(), table.rows(), table.cols(),
                            ids.data_as<const int32_t>(), 0, out.rows(), scale, out.data(),
                            stream());
    return;
  }
  CheckFloat(table, "Embed", "table");
  cuda::LaunchEmbed(table.data(), table.dtype(), table.rows(), ids.data_as<const int32_t>(),
                    out.rows(), out.cols(), scale, out.data(), stream());
}

void CudaBackend::MatMul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  LOOM_PROFILE_OP((x.rows() <= options_.small_batch_gemm_rows ? "matmul(gemv) n=" : "matmul n=") +
                      std::to_string(x.rows()) + " m=" + std::to_string(w.rows()) + " k=" +
                      std::to_string(x.cols()) + (out.dtype() == DType::kF32 ? " ->f32" : ""),
                  w.nbytes() + x.nbytes() + out.nbytes());
  CheckAct(x, "MatMul", "x");
  CheckWeight(w, "MatMul", "w");
  CheckFloat(out, "MatMul", "out");
  const int64_t n = x.rows(), k = x.cols(), m = w.rows();
  CHECK(w.cols() == k && out.rows() == n && out.cols() == m)
      << "MatMul: x " << Describe(x) << " w " << Describe(w) << " out " << Describe(out);
  if (Quantized(w)) {
    QuantMatMul(x, w, out, cuda::GemvEpilogue::kNone, nullptr);
  } else if (UseGemv(x, w)) {
    cuda::LaunchSmallBatchGemm(x.data(), w.data(), out.data(), out.dtype(), n, m, k, stream(),
                               pdl(), cuda::GemvEpilogue::kNone, nullptr,
                               options_.tuning.gemv_stream, GemvQueue());
  } else {
    gemm_->Run(x.data(), w.data(), out.data(), out.dtype(), n, m, k);
  }
  if (bias.defined()) {
    CheckFloat(bias, "MatMul", "bias");
    CHECK_EQ(bias.numel(), m) << "MatMul: bias " << Describe(bias);
    cuda::LaunchAddBias(out.data(), out.dtype(), bias.data(), bias.dtype(), n, m, stream());
  }
}

void CudaBackend::RmsNorm(const Tensor& x, const Tensor& w, float eps, float weight_offset,
                          const Tensor& out) {
  LOOM_PROFILE_OP("rmsnorm " + Sh(x), 2 * x.nbytes());
  CheckAct(x, "RmsNorm", "x");
  CheckAct(out, "RmsNorm", "out");
  CheckFloat(w, "RmsNorm", "w");
  CHECK(out.shape() == x.shape() && w.numel() == x.cols())
      << "RmsNorm: x " << Describe(x) << " w " << Describe(w) << " out " << Describe(out);
  cuda::LaunchRmsNorm(x.data(), w.data(), w.dtype(), eps, weight_offset, x.rows(), x.cols(),
                      out.data(), stream(), pdl());
}

void CudaBackend::MatMulAdd(const Tensor& x, const Tensor& w, const Tensor& bias,
                            const Tensor& acc) {
  const int64_t n = x.rows(), k = x.cols(), m = w.rows();
  {
    LOOM_PROFILE_OP(
        "matmul_add n=" + std::to_string(n) + " m=" + std::to_string(m) + " k=" + std::to_string(k),
        w.nbytes() + x.nbytes() + 2 * acc.nbytes());
    CheckAct(x, "MatMulAdd", "x");
    CheckWeight(w, "MatMulAdd", "w");
    CheckAct(acc, "MatMulAdd", "acc");
    CHECK(w.cols() == k && acc.rows() == n && acc.cols() == m)
        << "MatMulAdd: x " << Describe(x) << " w " << Describe(w) << " acc " << Describe(acc);
    if (!bias.defined()) {  // one launch: the GEMV's epilogue or cuBLASLt's beta = 1
      if (Quantized(w)) {
        QuantMatMul(x, w, acc, cuda::GemvEpilogue::kAddTo, nullptr);
      } else if (UseGemv(x, w)) {
        cuda::LaunchSmallBatchGemm(x.data(), w.data(), acc.data(), DType::kBF16, n, m, k, stream(),
                                   pdl(), cuda::GemvEpilogue::kAddTo, nullptr,
                                   options_.tuning.gemv_stream);
      } else {
        gemm_->Run(x.data(), w.data(), acc.data(), DType::kBF16, n, m, k, /*accumulate=*/true);
      }
      return;
    }
  }
  Backend::MatMulAdd(x, w, bias, acc);
}

bool CudaBackend::UseGemv(const Tensor& x, const Tensor& w) const {
  if (Quantized(w)) return UseQuantGemv(x, w, false);
  return x.rows() <= options_.small_batch_gemm_rows &&
         cuda::SmallBatchGemmApplies(x.data(), w.data(), x.rows(), x.cols());
}

// The GEMV norm prologue when it applies (one row, bf16 x, f32 norm weights of x's width).
bool CudaBackend::GemvNormFor(const Tensor& x, const NormSpec& norm, const Tensor& w,
                              cuda::GemvNorm* out) const {
  // 16-byte aligned norm weights: the streamed GEMV loads them as float4.
  if (!UseGemv(x, w) || norm.w.dtype() != DType::kF32 || norm.w.numel() != x.cols() ||
      reinterpret_cast<uintptr_t>(norm.w.data()) % 16 != 0) {
    return false;
  }
  if (Quantized(w) ? !UseQuantGemv(x, w, true)
                   : !cuda::SmallBatchGemmNormApplies(x.data(), w.data(), x.rows(), x.cols())) {
    return false;
  }
  out->w = norm.w.data_as<const float>();
  out->eps = norm.eps;
  out->offset = norm.weight_offset;
  return true;
}

void CudaBackend::RmsNormMatMul(const Tensor& x, const NormSpec& norm, const Tensor& w,
                                const Tensor& bias, const Tensor& out) {
  cuda::GemvNorm gn;
  // bf16 out, or f32 (logits: the final norm folded into the output projection).
  if (!bias.defined() && (out.dtype() == DType::kBF16 || out.dtype() == DType::kF32) &&
      GemvNormFor(x, norm, w, &gn)) {
    LOOM_PROFILE_OP(
        "rmsnorm_matmul(gemv) m=" + std::to_string(w.rows()) + " k=" + std::to_string(x.cols()),
        w.nbytes() + x.nbytes() + out.nbytes());
    CheckWeight(w, "RmsNormMatMul", "w");
    CheckFloat(out, "RmsNormMatMul", "out");
    CHECK(w.cols() == x.cols() && out.rows() == x.rows() && out.cols() == w.rows())
        << "RmsNormMatMul: x " << Describe(x) << " w " << Describe(w) << " out " << Describe(out);
    if (Quantized(w)) return QuantMatMul(x, w, out, cuda::GemvEpilogue::kNone, &gn);
    cuda::LaunchSmallBatchGemm(x.data(), w.data(), out.data(), out.dtype(), x.rows(), w.rows(),
                               x.cols(), stream(), pdl(), cuda::GemvEpilogue::kNone, &gn,
                               options_.tuning.gemv_stream, GemvQueue());
    return;
  }
  Backend::RmsNormMatMul(x, norm, w, bias, out);
}

void CudaBackend::RmsNormMatMulGated(const Tensor& x, const NormSpec& norm, const Tensor& w_gate_up,
                                     GatedAct act, const Tensor& out) {
  cuda::GemvNorm gn;
  if (GemvNormFor(x, norm, w_gate_up, &gn)) {
    LOOM_PROFILE_OP("rmsnorm_matmul_gated(gemv) m=" + std::to_string(w_gate_up.rows()) +
                        " k=" + std::to_string(x.cols()),
                    w_gate_up.nbytes() + x.nbytes() + out.nbytes());
    CheckWeight(w_gate_up, "RmsNormMatMulGated", "w_gate_up");
    CheckAct(out, "RmsNormMatMulGated", "out");
    CHECK(w_gate_up.cols() == x.cols() && w_gate_up.rows() == 2 * out.cols() &&
          out.rows() == x.rows())
        << "RmsNormMatMulGated: x " << Describe(x) << " w " << Describe(w_gate_up) << " out "
        << Describe(out);
    if (Quantized(w_gate_up)) {
      return QuantMatMul(x, w_gate_up, out,
                         act == GatedAct::kGeluTanh ? cuda::GemvEpilogue::kGeluTanhMul
                                                    : cuda::GemvEpilogue::kSiluMul,
                         &gn);
    }
    cuda::LaunchSmallBatchGemm(x.data(), w_gate_up.data(), out.data(), DType::kBF16, x.rows(),
                               w_gate_up.rows(), x.cols(), stream(), pdl(),
                               act == GatedAct::kGeluTanh ? cuda::GemvEpilogue::kGeluTanhMul
                                                          : cuda::GemvEpilogue::kSiluMul,
                               &gn, options_.tuning.gemv_stream);
    return;
  }
  Backend::RmsNormMatMulGated(x, norm, w_gate_up, act, out);
}

cuda::QkvRopeStoreArgs CudaBackend::RopeStoreArgs(int64_t qkv_cols, int64_t n,
                                                  const Tensor& positions, const RopeTable& rope,
                                                  const QkvLayout& l, const AttentionMeta& meta,
                                                  const KvLayer& layer, const Tensor& q_out) const {
  const int64_t D = l.head_dim;
  CheckAct(q_out, "QkvRopeStore", "q_out");
  CHECK(qkv_cols == (l.num_heads + 2 * int64_t{l.num_kv_heads}) * D && q_out.rows() == n &&
        q_out.cols() == l.num_heads * D)
      << "QkvRopeStore: qkv width " << qkv_cols << " q_out " << Describe(q_out) << " for "
      << l.num_heads << "+2x" << l.num_kv_heads << " heads x " << D;
  CheckI32(positions, n, "QkvRopeStore", "positions");
  CheckI32(meta.slot_mapping, n, "QkvRopeStore", "slot_mapping");
  const Tensor& kp = layer.k;
  const KvPools pools = CheckKvPools(layer, l.num_kv_heads, D, "QkvRopeStore");
  CHECK(rope.inv_freq.dtype() == DType::kF32 && rope.inv_freq.numel() == rope.rotary_dim / 2)
      << "QkvRopeStore: inv_freq " << Describe(rope.inv_freq) << " for rotary_dim "
      << rope.rotary_dim;
  for (const Tensor* norm : {&l.q_norm, &l.k_norm}) {
    if (!norm->defined()) continue;
    CheckDevice(*norm, "QkvRopeStore", "q/k norm");
    CHECK(norm->dtype() == DType::kF32 && norm->numel() == D)
        << "QkvRopeStore: per-head norm " << Describe(*norm) << " (Upload keeps norms f32)";
  }
  cuda::QkvRopeStoreArgs a;
  a.positions = positions.data_as<const int32_t>();
  a.inv_freq = rope.inv_freq.data_as<const float>();
  a.rotary_dim = rope.rotary_dim;
  a.attention_factor = rope.attention_factor;
  a.interleaved = rope.interleaved;
  a.q_norm = l.q_norm.defined() ? l.q_norm.data_as<const float>() : nullptr;
  a.k_norm = l.k_norm.defined() ? l.k_norm.data_as<const float>() : nullptr;
  a.eps = l.eps;
  a.norm_offset = l.norm_offset;
  a.num_heads = l.num_heads;
  a.num_kv_heads = l.num_kv_heads;
  a.head_dim = l.head_dim;
  a.n = n;
  a.slots = meta.slot_mapping.data_as<const int32_t>();
  a.num_slots = kp.dim(0) * kp.dim(1);
  a.q_out = q_out.data();
  a.k_pool = kp.data();
  a.v_pool = layer.v.data();
  a.k_desc = pools.k;
  a.v_desc = pools.v;
  a.block_size = static_cast<int>(kp.dim(1));
  return a;
}

void CudaBackend::QkvRopeStore(const Tensor& qkv, const Tensor& positions, const RopeTable& rope,
                               const QkvLayout& l, const AttentionMeta& meta, const KvLayer& layer,
                               const Tensor& q_out) {
  LOOM_PROFILE_OP("qkv_rope_store " + Sh(qkv), 2 * qkv.nbytes());
  CheckAct(qkv, "QkvRopeStore", "qkv");
  cuda::QkvRopeStoreArgs a =
      RopeStoreArgs(qkv.cols(), qkv.rows(), positions, rope, l, meta, layer, q_out);
  a.qkv = qkv.data();
  cuda::LaunchQkvRopeStore(a, stream(), pdl());
}

void CudaBackend::RmsNormQkvRopeStore(const Tensor& x, const NormSpec& norm, const Tensor& w_qkv,
                                      const Tensor& bias, const Tensor& positions,
                                      const RopeTable& rope, const QkvLayout& layout,
                                      const AttentionMeta& meta, const KvLayer& layer,
                                      const Tensor& qkv, const Tensor& q_out) {
  cuda::GemvNorm gn;
  if (x.rows() == 1 && !bias.defined() && options_.tuning.gemv_stream &&
      options_.tuning.gemv_rope && !Quantized(w_qkv) && GemvNormFor(x, norm, w_qkv, &gn)) {
    CheckAct(w_qkv, "RmsNormQkvRopeStore", "w_qkv");
    CHECK_EQ(w_qkv.cols(), x.cols())
        << "RmsNormQkvRopeStore: x " << Describe(x) << " w " << Describe(w_qkv);
    const cuda::QkvRopeStoreArgs a =
        RopeStoreArgs(w_qkv.rows(), 1, positions, rope, layout, meta, layer, q_out);
    if (cuda::StreamGemvRopeStoreApplies(x.data(), w_qkv.data(), x.cols(), a)) {
      LOOM_PROFILE_OP("rmsnorm_qkv_rope_store(gemv) m=" + std::to_string(w_qkv.rows()) +
                          " k=" + std::to_string(x.cols()),
                      w_qkv.nbytes() + x.nbytes() + 3 * q_out.nbytes());
      cuda::LaunchStreamGemvRopeStore(x.data(), w_qkv.data(), x.cols(), gn, a, stream(), pdl());
      return;
    }
  }
  Backend::RmsNormQkvRopeStore(x, norm, w_qkv, bias, positions, rope, layout, meta, layer, qkv,
                               q_out);
}

Tensor CudaBackend::FuseGateUp(const Tensor& w_gate, const Tensor& w_up) {
  CheckWeight(w_gate, "FuseGateUp", "w_gate");
  CheckWeight(w_up, "FuseGateUp", "w_up");
  CHECK(w_gate.ndim() == 2 && w_up.shape() == w_gate.shape() && w_up.dtype() == w_gate.dtype())
      << "FuseGateUp: " << Describe(w_gate) << " / " << Describe(w_up);
  const int64_t f = w_gate.rows();
  const size_t rb = w_gate.row_bytes();  // rows keep their bytes in the quantized layout too
  Tensor out(w_gate.dtype(), Shape{2 * f, w_gate.cols()}, allocator_->NewBuffer(2 * rb * f));
  char* dst = static_cast<char*>(out.data());
  CUDA_CHECK(
      cudaMemcpy2DAsync(dst, 2 * rb, w_gate.data(), rb, rb, f, cudaMemcpyDeviceToDevice, stream()));
  CUDA_CHECK(cudaMemcpy2DAsync(dst + rb, 2 * rb, w_up.data(), rb, rb, f, cudaMemcpyDeviceToDevice,
                               stream()));
  return out;
}

void CudaBackend::MatMulGated(const Tensor& x, const Tensor& w, GatedAct act, const Tensor& out) {
  LOOM_PROFILE_OP(
      (x.rows() <= options_.small_batch_gemm_rows ? "matmul_gated(gemv) n=" : "matmul_gated n=") +
          std::to_string(x.rows()) + " m=" + std::to_string(w.rows()) +
          " k=" + std::to_string(x.cols()),
      w.nbytes() + x.nbytes() + out.nbytes());
  CheckAct(x, "MatMulGated", "x");
  CheckWeight(w, "MatMulGated", "w_gate_up");
  CheckAct(out, "MatMulGated", "out");
  const int64_t n = x.rows(), k = x.cols(), f = out.cols();
  CHECK(w.cols() == k && w.rows() == 2 * f && out.rows() == n)
      << "MatMulGated: x " << Describe(x) << " w " << Describe(w) << " out " << Describe(out);
  const bool gelu = act == GatedAct::kGeluTanh;
  if (Quantized(w)) {
    return QuantMatMul(
        x, w, out, gelu ? cuda::GemvEpilogue::kGeluTanhMul : cuda::GemvEpilogue::kSiluMul, nullptr);
  }
  if (UseGemv(x, w)) {
    cuda::LaunchSmallBatchGemm(
        x.data(), w.data(), out.data(), DType::kBF16, n, 2 * f, k, stream(), pdl(),
        gelu ? cuda::GemvEpilogue::kGeluTanhMul : cuda::GemvEpilogue::kSiluMul, nullptr,
        options_.tuning.gemv_stream);
    return;
  }
  Tensor gate_up = AllocScratch(DType::kBF16, Shape{n, 2 * f});
  gemm_->Run(x.data(), w.data(), gate_up.data(), DType::kBF16, n, 2 * f, k);
  cuda::LaunchGatedAct(gate_up.data(), out.data(), n, f, gelu, stream(), pdl());
}

bool CudaBackend::UseQuantGemv(const Tensor& x, const Tensor& w, bool norm) const {
  return x.rows() <= options_.tuning.quant_gemv_rows &&
         cuda::QuantGemvApplies(w.dtype(), x.data(), w.data(), x.rows(), x.cols(), norm);
}

void CudaBackend::QuantMatMul(const Tensor& x, const Tensor& w, const Tensor& out,
                              cuda::GemvEpilogue epilogue, const cuda::GemvNorm* norm) {
  const int64_t n = x.rows(), k = x.cols(), m = w.rows();
  const bool gated =
      epilogue == cuda::GemvEpilogue::kSiluMul || epilogue == cuda::GemvEpilogue::kGeluTanhMul;
  if (norm != nullptr || UseQuantGemv(x, w, false)) {
    LOOM_PROFILE_OP("matmul_q(gemv) n=" + std::to_string(n) + " m=" + std::to_string(m) +
                        " k=" + std::to_string(k) + " " + std::string(DTypeName(w.dtype())),
                    w.nbytes() + x.nbytes() + out.nbytes());
    cuda::LaunchQuantGemv(w.dtype(), x.data(), w.data(), out.data(), out.dtype(), n, m, k, stream(),
                          pdl(), epilogue, norm);
    return;
  }
  LOOM_PROFILE_OP("matmul_q(dequant) n=" + std::to_string(n) + " m=" + std::to_string(m) +
                      " k=" + std::to_string(k) + " " + std::string(DTypeName(w.dtype())),
                  w.nbytes() + x.nbytes() + out.nbytes() + 4 * m * k);
  // Gated: the (gate, up) pairs' products into scratch, then the activation.
  Tensor gate_up;
  if (gated) gate_up = AllocScratch(DType::kBF16, Shape{n, m});
  const Tensor& dst = gated ? gate_up : out;
  // The weight dequantized a chunk of rows at a time into bf16 scratch (at most ~64 MB), each
  // chunk's columns of the product by cuBLASLt.
  const int64_t chunk = std::min<int64_t>(m, std::max<int64_t>(256, (int64_t{32} << 20) / k));
  Tensor wb = AllocScratch(DType::kBF16, Shape{chunk, k});
  const size_t out_elem = dst.dtype() == DType::kF32 ? 4 : 2;
  for (int64_t r0 = 0; r0 < m; r0 += chunk) {
    const int64_t rows = std::min(chunk, m - r0);
    cuda::LaunchDequantRows(w.dtype(), w.data(), m, k, nullptr, r0, rows, 1.f, wb.data(), stream());
    gemm_->Run(x.data(), wb.data(), static_cast<char*>(dst.data()) + r0 * out_elem, dst.dtype(), n,
               rows, k, epilogue == cuda::GemvEpilogue::kAddTo, m);
  }
  if (gated) {
    cuda::LaunchGatedAct(gate_up.data(), out.data(), n, m / 2,
                         epilogue == cuda::GemvEpilogue::kGeluTanhMul, stream(), pdl());
  }
}

void CudaBackend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  LOOM_PROFILE_OP("add " + Sh(a), 3 * a.nbytes());
  CheckFloat(a, "Add", "a");
  CHECK(a.shape() == b.shape() && a.shape() == out.shape() && b.dtype() == a.dtype() &&
        out.dtype() == a.dtype())
      << "Add: " << Describe(a) << " + " << Describe(b) << " -> " << Describe(out);
  cuda::LaunchAdd(a.data(), b.data(), out.data(), a.dtype(), a.numel(), stream(), pdl());
}

void CudaBackend::Scale(const Tensor& x, float s) {
  LOOM_PROFILE_OP("scale " + Sh(x), 2 * x.nbytes());
  CheckFloat(x, "Scale", "x");
  cuda::LaunchScale(x.data(), s, x.dtype(), x.numel(), stream());
}

void CudaBackend::Rope(const Tensor& x, const Tensor& positions, const RopeTable& rope,
                       int num_heads, int head_dim) {
  LOOM_PROFILE_OP("rope " + Sh(x), 2 * x.nbytes());
  CheckAct(x, "Rope", "x");
  CHECK_EQ(x.cols(), int64_t{num_heads} * head_dim) << "Rope: x " << Describe(x);
  CheckI32(positions, x.rows(), "Rope", "positions");
  CheckDevice(rope.inv_freq, "Rope", "inv_freq");
  CHECK(rope.inv_freq.dtype() == DType::kF32 && rope.inv_freq.numel() == rope.rotary_dim / 2)
      << "Rope: inv_freq " << Describe(rope.inv_freq) << " for rotary_dim " << rope.rotary_dim;
  cuda::LaunchRope(x.data(), positions.data_as<const int32_t>(),
                   rope.inv_freq.data_as<const float>(), rope.rotary_dim, rope.attention_factor,
                   rope.interleaved, x.rows(), num_heads, head_dim, stream());
}

void CudaBackend::MoeMlp(const Tensor& x, const MoeWeights& w, const MoeParams& params,
                         const Tensor& router_logits, const Tensor& expert_ids, const Tensor& out) {
  const int64_t n = x.rows(), hidden = x.cols();
  const int64_t num_experts = w.router.rows();
  const int k = params.top_k;
  LOOM_PROFILE_OP("moe_mlp n=" + std::to_string(n) + " e=" + std::to_string(num_experts) +
                      " k=" + std::to_string(k),
                  x.nbytes() + out.nbytes());
  CheckAct(x, "MoeMlp", "x");
  CheckAct(out, "MoeMlp", "out");
  CheckFloat(router_logits, "MoeMlp", "router_logits");
  CheckI32(expert_ids, n * k, "MoeMlp", "expert_ids");
  for (const Tensor* t : {&w.gate, &w.up, &w.down}) CheckAct(*t, "MoeMlp", "expert weights");
  const int64_t f = CheckMoeShapes(x, w, router_logits, out);
  const Status tiles = CheckMoe(hidden, f, static_cast<int>(num_experts), k);
  CHECK(tiles.ok()) << "MoeMlp: " << tiles.message();
  if (n == 0) return;
  MatMul(x, w.router, w.router_bias, router_logits);

  const int64_t pairs = n * k;
  const auto e = static_cast<int>(num_experts);
  Tensor ints = AllocScratch(DType::kI32, Shape{cuda::MoeWorkspaceInts(n, k, e)});
  Tensor weights = AllocScratch(DType::kF32, Shape{pairs});
  const cuda::MoeWorkspace ws =
      cuda::MoeWorkspaceAt(ints.data_as<int32_t>(), weights.data_as<float>(), n, k, e);
  const cuda::MoeTiling tiling = cuda::MoeTilingFor(n, k, e);
  {
    LOOM_PROFILE_OP("moe route n=" + std::to_string(n), 0);
    cuda::LaunchMoeRoute(router_logits.data(), router_logits.dtype(), n, e, k,
                         params.norm_topk_prob, tiling.tile_rows, expert_ids.data_as<int32_t>(), ws,
                         stream());
  }
  // Profiled bytes: the weights of min(pairs, E) experts, what a step reads at most.
  const double expert_bytes =
      static_cast<double>(std::min<int64_t>(pairs, e)) * static_cast<double>(f * hidden * 2);
  // Profiling labels only (LOOM_PROFILE_OP builds them when profiling): no string a step.
  const char* kind = tiling.gemv ? "(gemv)" : tiling.tile_rows == 16 ? "(mma16)" : "(mma64)";
  Tensor h = AllocScratch(DType::kBF16, Shape{pairs, f});
  {
    LOOM_PROFILE_OP(std::string("moe gate_up") + kind + " pairs=" + std::to_string(pairs),
                    2 * expert_bytes);
    cuda::MoeEpilogue ep;
    ep.bias0 = w.gate_bias.defined() ? w.gate_bias.data_as<const float>() : nullptr;
    ep.bias1 = w.up_bias.defined() ? w.up_bias.data_as<const float>() : nullptr;
    ep.gelu = params.act == GatedAct::kGeluTanh;
    ep.swiglu_limit = params.swiglu_limit;
    cuda::LaunchMoeGateUp(x.data_as<const __nv_bfloat16>(), w.gate.data_as<const __nv_bfloat16>(),
                          w.up.data_as<const __nv_bfloat16>(), ws, pairs, e, tiling, f, hidden, ep,
                          h.data_as<__nv_bfloat16>(), stream());
  }
  Tensor y = AllocScratch(DType::kF32, Shape{pairs, hidden});
  {
    LOOM_PROFILE_OP(std::string("moe down") + kind + " pairs=" + std::to_string(pairs),
                    expert_bytes);
    cuda::LaunchMoeDown(h.data_as<const __nv_bfloat16>(), w.down.data_as<const __nv_bfloat16>(),
                        w.down_bias.defined() ? w.down_bias.data_as<const float>() : nullptr, ws,
                        pairs, e, tiling, hidden, f, y.data_as<float>(), stream());
  }

  // The shared expert (Qwen2-MoE) through the dense ops, gated in the combine.
  Tensor shared, shared_gate;
  if (w.shared_gate.defined()) {
    const int64_t fs = w.shared_gate.rows();
    Tensor g = AllocScratch(DType::kBF16, Shape{n, fs});
    Tensor u = AllocScratch(DType::kBF16, Shape{n, fs});
    MatMul(x, w.shared_gate, Tensor(), g);
    MatMul(x, w.shared_up, Tensor(), u);
    if (params.act == GatedAct::kSilu) {
      SiluMul(g, u, g);
    } else {
      GeluTanhMul(g, u, g);
    }
    shared = AllocScratch(DType::kBF16, Shape{n, hidden});
    MatMul(g, w.shared_down, Tensor(), shared);
    shared_gate = AllocScratch(DType::kBF16, Shape{n, 1});
    MatMul(x, w.shared_router, Tensor(), shared_gate);
  }
  {
    LOOM_PROFILE_OP("moe combine n=" + std::to_string(n), 0);
    cuda::LaunchMoeCombine(y.data_as<const float>(), ws, n, k, hidden,
                           shared.defined() ? shared.data_as<const __nv_bfloat16>() : nullptr,
                           shared.defined() ? shared_gate.data_as<const __nv_bfloat16>() : nullptr,
                           out.data_as<__nv_bfloat16>(), stream());
  }
}

void CudaBackend::SiluMul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  LOOM_PROFILE_OP("silu_mul " + Sh(gate), 3 * gate.nbytes());
  CheckFloat(gate, "SiluMul", "gate");
  CHECK(gate.shape() == up.shape() && gate.shape() == out.shape() && up.dtype() == gate.dtype() &&
        out.dtype() == gate.dtype())
      << "SiluMul: " << Describe(gate) << " " << Describe(up) << " " << Describe(out);
  cuda::LaunchSiluMul(gate.data(), up.data(), out.data(), gate.dtype(), gate.numel(), stream(),
                      pdl());
}

void CudaBackend::GeluTanhMul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  LOOM_PROFILE_OP("gelu_mul " + Sh(gate), 3 * gate.nbytes());
  CheckFloat(gate, "GeluTanhMul", "gate");
  CHECK(gate.shape() == up.shape() && gate.shape() == out.shape() && up.dtype() == gate.dtype() &&
        out.dtype() == gate.dtype())
      << "GeluTanhMul: " << Describe(gate) << " " << Describe(up) << " " << Describe(out);
  cuda::LaunchGeluTanhMul(gate.data(), up.data(), out.data(), gate.dtype(), gate.numel(), stream(),
                          pdl());
}

void CudaBackend::SoftCap(const Tensor& x, float cap) {
  LOOM_PROFILE_OP("softcap " + Sh(x), 2 * x.nbytes());
  CheckFloat(x, "SoftCap", "x");
  cuda::LaunchSoftCap(x.data(), cap, x.dtype(), x.numel(), stream());
}

void CudaBackend::StoreKv(const Tensor& k, const Tensor& v, const AttentionMeta& meta,
                          const KvLayer& layer) {
  LOOM_PROFILE_OP("store_kv " + Sh(k), 4 * k.nbytes());
  CheckAct(k, "StoreKv", "k");
  CheckAct(v, "StoreKv", "v");
  CHECK(v.shape() == k.shape()) << "StoreKv: k " << Describe(k) << " v " << Describe(v);
  const int64_t n = k.rows();
  CheckI32(meta.slot_mapping, n, "StoreKv", "slot_mapping");
  const Tensor& kp = layer.k;
  CHECK(kp.ndim() == 4 && kp.dim(2) > 0 && k.cols() % kp.dim(2) == 0)
      << "StoreKv: pools " << Describe(kp) << " / " << Describe(layer.v) << " for rows "
      << Describe(k);
  const KvPools pools = CheckKvPools(layer, kp.dim(2), k.cols() / kp.dim(2), "StoreKv");
  const int64_t num_slots = kp.dim(0) * kp.dim(1);
  const int32_t* slots = meta.slot_mapping.data_as<const int32_t>();
  if (layer.quantized()) {
    cuda::StoreKvQuantArgs a;
    a.k = k.data();
    a.v = v.data();
    a.n = n;
    a.slots = slots;
    a.num_slots = num_slots;
    a.num_kv_heads = static_cast<int>(kp.dim(2));
    a.head_dim = static_cast<int>(k.cols() / kp.dim(2));
    a.block_size = static_cast<int>(kp.dim(1));
    a.k_desc = pools.k;
    a.v_desc = pools.v;
    a.k_pool = kp.data();
    a.v_pool = layer.v.data();
    cuda::LaunchStoreKvQuant(a, stream());
    return;
  }
  cuda::LaunchScatterRowPairs(k.data(), kp.data(), v.data(), layer.v.data(), n, slots, num_slots,
                              k.row_bytes(), stream());
}

namespace {

// CudaBackend's AttentionPlan.
struct CudaAttentionPlan final : AttentionPlan {
  cuda::PagedAttentionPlan kernel;
  Tensor tile_start;    // [num_seqs + 1] i32 (not for decode plans)
  Tensor partial, lse;  // split scratch (num_splits > 1)
};

// The step-level kernel arguments (no tensors of a layer, window, scale or soft-cap).
cuda::PagedAttentionArgs StepArgs(const AttentionMeta& meta, const AttentionShape& shape) {
  cuda::PagedAttentionArgs a;
  a.query_start = meta.query_start.data_as<const int32_t>();
  a.kv_len = meta.kv_len.data_as<const int32_t>();
  a.page_indptr = meta.page_indptr.data_as<const int32_t>();
  a.page_indices = meta.page_indices.data_as<const int32_t>();
  a.num_seqs = meta.num_seqs;
  a.num_tokens = meta.num_tokens;
  a.max_query_len = meta.max_query_len;
  a.max_kv_len = meta.max_kv_len;
  a.num_heads = shape.num_heads;
  a.num_kv_heads = shape.num_kv_heads;
  a.head_dim = shape.head_dim;
  a.block_size = meta.block_size;
  a.k_desc = cuda::KvPoolDesc(shape.k_quant, shape.head_dim, meta.block_size, shape.num_kv_heads);
  a.v_desc = cuda::KvPoolDesc(shape.v_quant, shape.head_dim, meta.block_size, shape.num_kv_heads);
  return a;
}

}  // namespace

std::shared_ptr<const AttentionPlan> CudaBackend::PlanAttention(const AttentionMeta& meta,
                                                                const AttentionShape& shape) {
  CheckI32(meta.query_start, meta.num_seqs + 1, "PlanAttention", "query_start");
  auto p = std::make_shared<CudaAttentionPlan>();
  p->shape = shape;
  const cuda::PagedAttentionArgs a = StepArgs(meta, shape);
  p->kernel = cuda::PlanPagedAttention(a, num_sms_, options_.tuning);
  // Scratch from the caching allocator, held by the plan until the step's forward has been
  // enqueued; reused only by later work on this stream.
  auto scratch = [&](DType dtype, int64_t n) {
    return Tensor(dtype, Shape{n}, allocator_->NewBuffer(static_cast<size_t>(n) * 4));
  };
  if (p->kernel.num_splits > 1) {
    p->partial = scratch(DType::kF32, p->kernel.partial_floats);
    p->lse = scratch(DType::kF32, p->kernel.lse_floats);
  }
  if (!p->kernel.decode) {
    // (Not zero-filled: TileStartKernel writes every entry; a memset would be one more launch.)
    p->tile_start = scratch(DType::kI32, p->kernel.tile_start_ints);
    cuda::LaunchTileStarts(a, p->kernel, p->tile_start.data_as<int32_t>(), stream(), pdl());
  }
  return p;
}

void CudaBackend::Attention(const Tensor& q, const KvLayer& layer, const AttentionMeta& meta,
                            const AttentionParams& params, const Tensor& out) {
  LOOM_PROFILE_OP(
      "attention tok=" + std::to_string(meta.num_tokens) +
          " seqs=" + std::to_string(meta.num_seqs) + " kvh=" + std::to_string(params.num_kv_heads) +
          " (GB/s: seqs x max_kv)",
      double(meta.num_seqs) * meta.max_kv_len * 2 * layer.k.dim(2) * layer.k.dim(3) * 2 +
          2 * q.nbytes());
  const int H = params.num_heads, KVH = params.num_kv_heads, D = params.head_dim;
  const int64_t n = meta.num_tokens;
  CheckAct(q, "Attention", "q");
  CheckAct(out, "Attention", "out");
  CHECK(q.rows() == n && q.cols() == int64_t{H} * D && out.shape() == q.shape())
      << "Attention: q " << Describe(q) << " out " << Describe(out) << " for " << n << " tokens x "
      << H << "x" << D;
  const Tensor& kp = layer.k;
  CheckKvPools(layer, KVH, D, "Attention");
  CHECK_EQ(kp.dim(1), meta.block_size)
      << "Attention: pools " << Describe(kp) << " vs block_size " << meta.block_size;
  CheckI32(meta.query_start, meta.num_seqs + 1, "Attention", "query_start");
  CheckI32(meta.kv_len, meta.num_seqs, "Attention", "kv_len");
  CheckI32(meta.page_indptr, meta.num_seqs + 1, "Attention", "page_indptr");
  CheckDevice(meta.page_indices, "Attention", "page_indices");

  const AttentionShape shape{H, KVH, D, layer.k_quant, layer.v_quant};
  std::shared_ptr<const AttentionPlan> own;  // the call's own plan when the step has none
  if (meta.plan == nullptr) own = PlanAttention(meta, shape);
  const auto* plan = dynamic_cast<const CudaAttentionPlan*>(own ? own.get() : meta.plan.get());
  CHECK(plan != nullptr && plan->shape == shape)
      << "Attention: meta.plan is not this backend's plan for " << H << " heads / " << KVH
      << " kv heads x " << D;
  cuda::PagedAttentionArgs a = StepArgs(meta, shape);
  a.q = q.data();
  a.k_pool = kp.data();
  a.v_pool = layer.v.data();
  a.sliding_window = params.sliding_window;
  a.scale = params.scale;
  a.softcap = params.logit_softcap;
  if (params.sinks.defined()) {
    CheckDevice(params.sinks, "Attention", "sinks");
    CHECK(params.sinks.dtype() == DType::kF32 && params.sinks.numel() == H)
        << "Attention: sinks " << Describe(params.sinks) << " for " << H << " heads";
    a.sinks = params.sinks.data_as<const float>();
  }
  a.out = out.data();
  auto ptr = [](const Tensor& t) { return t.defined() ? t.data_as<float>() : nullptr; };
  cuda::LaunchPagedAttention(
      a, plan->kernel, plan->tile_start.defined() ? plan->tile_start.data_as<int32_t>() : nullptr,
      ptr(plan->partial), ptr(plan->lse), stream(), pdl());
}

void CudaBackend::GatherRows(const Tensor& x, const Tensor& rows, const Tensor& out) {
  LOOM_PROFILE_OP("gather_rows " + Sh(out), 2 * out.nbytes());
  CheckDevice(x, "GatherRows", "x");
  CheckDevice(out, "GatherRows", "out");
  CheckI32(rows, out.rows(), "GatherRows", "rows");
  CHECK(out.cols() == x.cols() && out.dtype() == x.dtype())
      << "GatherRows: x " << Describe(x) << " out " << Describe(out);
  cuda::LaunchGatherRows(x.data(), x.rows(), rows.data_as<const int32_t>(), out.rows(),
                         x.row_bytes(), out.data(), stream(), pdl());
}

void CudaBackend::CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst,
                              int64_t dst_col, int64_t num_cols) {
  LOOM_PROFILE_OP("copy_columns " + Sh(dst), 0);
  CheckDevice(src, "CopyColumns", "src");
  CheckDevice(dst, "CopyColumns", "dst");
  CHECK(src.dtype() == dst.dtype() && !GetDTypeInfo(src.dtype()).quantized &&
        src.rows() == dst.rows() && src_col >= 0 && dst_col >= 0 && num_cols >= 0 &&
        src_col + num_cols <= src.cols() && dst_col + num_cols <= dst.cols())
      << "CopyColumns: " << Describe(src) << "[:, " << src_col << "+" << num_cols << "] -> "
      << Describe(dst) << "[:, " << dst_col << "]";
  if (num_cols == 0 || src.rows() == 0) return;
  const size_t elem = static_cast<size_t>(GetDTypeInfo(src.dtype()).block_bytes);
  CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(dst.data()) + dst_col * elem, dst.row_bytes(),
                               static_cast<const char*>(src.data()) + src_col * elem,
                               src.row_bytes(), num_cols * elem, src.rows(),
                               cudaMemcpyDeviceToDevice, stream()));
}

void CudaBackend::ArgmaxRows(const Tensor& x, const Tensor& out) {
  LOOM_PROFILE_OP("argmax " + Sh(x), x.nbytes());
  CheckFloat(x, "ArgmaxRows", "x");
  CHECK_EQ(x.ndim(), 2) << "ArgmaxRows: x " << Describe(x);
  CheckI32(out, x.rows(), "ArgmaxRows", "out");
  if (x.rows() == 0) return;
  const size_t scratch_bytes = cuda::ArgmaxScratchBytes(x.rows(), x.cols(), num_sms_);
  // Freed right after the enqueue (as Attention's scratch): reused only by later work on this
  // stream.
  std::shared_ptr<Buffer> scratch =
      scratch_bytes > 0 ? allocator_->NewBuffer(scratch_bytes) : nullptr;
  cuda::LaunchArgmaxRows(x.data(), x.dtype(), x.rows(), x.cols(), num_sms_,
                         scratch != nullptr ? scratch->data() : nullptr, out.data_as<int32_t>(),
                         stream(), pdl());
}

void* CudaBackend::StagingFor(std::unique_ptr<cuda::PinnedHostBuffer>& staging,
                              std::unique_ptr<cuda::CudaEvent>& staged, size_t bytes) {
  // Page-locked, so the copy is one asynchronous DMA (a pageable source is staged by the driver
  // first); the previous call's copy out of it has finished long before (every step waits for
  // its ids), the event makes sure.
  if (staged == nullptr) {
    staged = std::make_unique<cuda::CudaEvent>();
  } else {
    staged->Synchronize();
  }
  if (staging == nullptr || staging->size() < bytes) {
    const size_t grown = staging == nullptr ? 0 : 2 * staging->size();
    staging = std::make_unique<cuda::PinnedHostBuffer>(std::max(bytes, grown));
  }
  return staging->data();
}

void CudaBackend::EditLogits(const Tensor& x, std::span<const LogitEdit> edits) {
  LOOM_PROFILE_OP("edit_logits x" + std::to_string(edits.size()),
                  static_cast<int64_t>(edits.size() * sizeof(LogitEdit)));
  CheckDevice(x, "EditLogits", "x");
  CHECK(x.dtype() == DType::kF32 && x.ndim() == 2) << "EditLogits: x " << Describe(x);
  const int64_t n = static_cast<int64_t>(edits.size());
  if (n == 0) return;
  static_assert(sizeof(LogitEdit) % sizeof(int32_t) == 0);
  const size_t bytes = static_cast<size_t>(n) * sizeof(LogitEdit);
  auto* dst = static_cast<LogitEdit*>(StagingFor(edit_staging_, edit_staged_, bytes));
  for (int64_t i = 0; i < n; ++i) {
    const LogitEdit& e = edits[static_cast<size_t>(i)];
    CHECK(e.row >= 0 && e.row < x.rows() && e.token >= 0 && e.token < x.cols())
        << "EditLogits: row " << e.row << " token " << e.token << " of " << Describe(x);
    dst[i] = e;
  }
  // Freed right after the enqueue (as SampleRows' tasks): reused only by later work on this
  // stream.
  const Tensor dev(DType::kI32,
                   Shape{n * static_cast<int64_t>(sizeof(LogitEdit) / sizeof(int32_t))},
                   allocator_->NewBuffer(bytes));
  CUDA_CHECK(cudaMemcpyAsync(dev.data(), dst, bytes, cudaMemcpyHostToDevice, stream()));
  edit_staged_->Record(stream());
  cuda::LaunchEditLogits(x.data_as<float>(), x.cols(), static_cast<const LogitEdit*>(dev.data()), n,
                         stream());
}

void CudaBackend::MaskLogits(const Tensor& x, std::span<const int32_t> rows,
                             std::span<const std::span<const uint32_t>> masks) {
  const int64_t n = static_cast<int64_t>(rows.size());
  CHECK_EQ(masks.size(), rows.size()) << "MaskLogits: one mask per row";
  size_t words = 0;
  for (const auto& m : masks) words = std::max(words, m.size());
  LOOM_PROFILE_OP("mask_logits x" + std::to_string(n),
                  static_cast<int64_t>(rows.size() * words * sizeof(uint32_t)));
  CheckDevice(x, "MaskLogits", "x");
  CHECK(x.dtype() == DType::kF32 && x.ndim() == 2) << "MaskLogits: x " << Describe(x);
  if (n == 0 || words == 0) return;
  for (int32_t r : rows) {
    CHECK(r >= 0 && r < x.rows()) << "MaskLogits: row " << r << " of " << Describe(x);
  }
  // Rows in one grammar state pass one span: each distinct mask is uploaded once (under
  // tool_choice auto every free-text row of a batch shares the lazy grammar's mask).
  mask_of_.resize(rows.size());
  distinct_masks_.clear();
  for (size_t i = 0; i < masks.size(); ++i) {
    size_t k = 0;
    while (k < distinct_masks_.size() && (distinct_masks_[k].data() != masks[i].data() ||
                                          distinct_masks_[k].size() != masks[i].size())) {
      ++k;
    }
    if (k == distinct_masks_.size()) distinct_masks_.push_back(masks[i]);
    mask_of_[i] = static_cast<int32_t>(k);
  }
  // One staged upload: [rows | mask_of | the distinct masks, each padded to `words` with zeros
  // (not allowed)].
  const size_t row_bytes = static_cast<size_t>(n) * sizeof(int32_t);
  const size_t mask_offset = (2 * row_bytes + 15) / 16 * 16;
  const size_t bytes = mask_offset + distinct_masks_.size() * words * sizeof(uint32_t);
  auto* staged = static_cast<uint8_t*>(StagingFor(mask_staging_, mask_staged_, bytes));
  std::memcpy(staged, rows.data(), row_bytes);
  std::memcpy(staged + row_bytes, mask_of_.data(), row_bytes);
  auto* dst = reinterpret_cast<uint32_t*>(staged + mask_offset);
  for (const auto& m : distinct_masks_) {
    std::memcpy(dst, m.data(), m.size() * sizeof(uint32_t));
    std::memset(dst + m.size(), 0, (words - m.size()) * sizeof(uint32_t));
    dst += words;
  }
  const Tensor dev(DType::kI32, Shape{static_cast<int64_t>(bytes / sizeof(int32_t))},
                   allocator_->NewBuffer(bytes));
  CUDA_CHECK(cudaMemcpyAsync(dev.data(), staged, bytes, cudaMemcpyHostToDevice, stream()));
  mask_staged_->Record(stream());
  auto* base = static_cast<uint8_t*>(dev.data());
  cuda::LaunchMaskLogits(x.data_as<float>(), x.cols(), reinterpret_cast<const int32_t*>(base),
                         reinterpret_cast<const int32_t*>(base + row_bytes),
                         reinterpret_cast<const uint32_t*>(base + mask_offset), n,
                         static_cast<int64_t>(words), stream());
}

bool CudaBackend::has_sample_rows(int64_t vocab) const {
  return vocab > 0 && vocab <= cuda::SampleRowsMaxVocab();
}

void CudaBackend::SampleRows(const Tensor& x, std::span<const int32_t> rows,
                             std::span<const DrawParams> params, const Tensor& out) {
  LOOM_PROFILE_OP("sample " + Sh(x) + " x" + std::to_string(rows.size()),
                  static_cast<int64_t>(rows.size()) * x.row_bytes());
  CheckDevice(x, "SampleRows", "x");
  CHECK(x.dtype() == DType::kF32 && x.ndim() == 2) << "SampleRows: x " << Describe(x);
  CHECK_EQ(rows.size(), params.size()) << "SampleRows: rows and params";
  const int64_t n = static_cast<int64_t>(rows.size());
  CheckI32(out, n, "SampleRows", "out");
  if (n == 0) return;
  CHECK(has_sample_rows(x.cols())) << "SampleRows: vocab " << x.cols();
  // One upload of every row's task: [n] DrawTask, as i32 words.
  static_assert(sizeof(cuda::DrawTask) % sizeof(int32_t) == 0);
  Tensor host = HostTensor(
      DType::kI32, Shape{n * static_cast<int64_t>(sizeof(cuda::DrawTask) / sizeof(int32_t))});
  auto* tasks = static_cast<cuda::DrawTask*>(host.data());
  for (int64_t i = 0; i < n; ++i) {
    const DrawParams& p = params[i];
    CHECK(rows[i] >= 0 && rows[i] < x.rows())
        << "SampleRows: row " << rows[i] << " of " << x.rows();
    CHECK(p.temperature > 0.0f && p.top_p > 0.0f && p.top_p <= 1.0f && p.min_p >= 0.0f &&
          p.min_p <= 1.0f)
        << "SampleRows: unvalidated parameters (temperature " << p.temperature << ", top_p "
        << p.top_p << ", min_p " << p.min_p << ")";
    tasks[i] = cuda::DrawTask{p, rows[i]};
  }
  // Freed right after the enqueue (as ArgmaxRows' scratch): reused only by later work on this
  // stream.
  const Tensor dev = Upload(host);
  cuda::LaunchSampleRows(x.data_as<const float>(), x.cols(),
                         static_cast<const cuda::DrawTask*>(dev.data()), n, out.data_as<int32_t>(),
                         stream());
}

void CudaBackend::LogprobRows(const Tensor& x, std::span<const LogprobRow> rows, const Tensor& ids,
                              int top_k, const Tensor& out) {
  LOOM_PROFILE_OP("logprobs " + Sh(x) + " x" + std::to_string(rows.size()),
                  3 * static_cast<int64_t>(rows.size()) * x.row_bytes());
  CheckDevice(x, "LogprobRows", "x");
  CHECK(x.dtype() == DType::kF32 && x.ndim() == 2) << "LogprobRows: x " << Describe(x);
  const int64_t n = static_cast<int64_t>(rows.size());
  CheckDevice(ids, "LogprobRows", "ids");
  CHECK(ids.dtype() == DType::kI32) << "LogprobRows: ids " << Describe(ids);
  CheckDevice(out, "LogprobRows", "out");
  CHECK(out.dtype() == DType::kF32 && out.ndim() == 2 && out.rows() == n &&
        out.cols() == kLogprobStride)
      << "LogprobRows: out " << Describe(out) << " for " << n << " rows";
  CHECK(top_k >= 0 && top_k <= kMaxTopLogprobs) << "LogprobRows: top_k " << top_k;
  if (n == 0) return;
  static_assert(kMaxTopLogprobs == cuda::kLogprobMaxTopK);
  static_assert(sizeof(cuda::LogprobTask) == 2 * sizeof(int32_t));
  Tensor host = HostTensor(DType::kI32, Shape{2 * n});
  auto* tasks = static_cast<cuda::LogprobTask*>(host.data());
  for (int64_t i = 0; i < n; ++i) {
    const LogprobRow& r = rows[static_cast<size_t>(i)];
    CHECK(r.row >= 0 && r.row < x.rows() && r.id_index >= 0 && r.id_index < ids.numel())
        << "LogprobRows: row " << r.row << " of " << x.rows() << ", id " << r.id_index << " of "
        << ids.numel();
    tasks[i] = cuda::LogprobTask{r.row, r.id_index};
  }
  // Freed right after the enqueue (as SampleRows' tasks): reused only by later work on this
  // stream.
  const Tensor dev = Upload(host);
  cuda::LaunchLogprobRows(
      x.data_as<const float>(), x.cols(), static_cast<const cuda::LogprobTask*>(dev.data()), n,
      ids.data_as<const int32_t>(), top_k, kLogprobStride, out.data_as<float>(), stream());
}

void CudaBackend::FillUniform(const Tensor& t, uint64_t seed, float lo, float scale) {
  if (t.dtype() == DType::kFP8) {  // built on the device, in the device layout
    CHECK(t.device() == Device::kCuda && t.ndim() == 2) << "FillUniform: " << Describe(t);
    cuda::LaunchFillUniformFp8(t.data(), t.rows(), t.cols(), seed, lo, scale, stream());
    return;
  }
  CheckFloat(t, "FillUniform", "t");
  cuda::LaunchFillUniform(t.data(), t.dtype(), t.numel(), seed, lo, scale, stream());
}

}  // namespace loom
