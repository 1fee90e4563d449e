#include "backend/cpu/cpu_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/elementwise.h"
#include "base/check.h"
#include "tensor/quant.h"

namespace loom {
namespace {

void CheckF32(const Tensor& t, const char* op, const char* what) {
  CHECK(t.defined() && t.dtype() == DType::kF32 && t.device() == Device::kCpu)
      << op << ": " << what << " must be an f32 CPU tensor, got "
      << (t.defined() ? t.DebugString() : "undefined");
}

void CheckI32(const Tensor& t, int64_t numel, const char* op, const char* what) {
  CHECK(t.defined() && t.dtype() == DType::kI32 && t.numel() == numel)
      << op << ": " << what << " must be i32[" << numel << "], got "
      << (t.defined() ? t.DebugString() : "undefined");
}

}  // namespace

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : options_(options),
      kernels_(
          options.kernels != nullptr
              ? *options.kernels
              : cpu::SelectDotKernels(options.force_scalar ? cpu::CpuIsa::kScalar : options.isa)),
      matmul_(kernels_, options.num_threads, options.blas_min_rows, options.bf16_activations) {
  CHECK_GE(options_.num_threads, 1);
}

std::string CpuBackend::name() const {
  std::ostringstream ss;
  ss << "cpu (" << kernels_.isa << ", " << options_.num_threads << " thread"
     << (options_.num_threads == 1 ? "" : "s") << ")";
  return ss.str();
}

Tensor CpuBackend::AllocScratch(DType dtype, Shape shape) { return HostTensor(dtype, shape); }

Tensor CpuBackend::Upload(const Tensor& host) {
  CHECK(host.device() == Device::kCpu) << "Upload: " << host.DebugString();
  return host;
}

// Weights in huge pages. Decode streams every weight once a step; from the file mapping that is
// a TLB miss every 4 KiB (page-cache pages), which costs the tile kernels about a sixth of their
// streaming rate (dev VM, Zen 4: a k = 768 x 32000 f16 MatMul at 8 rows, 1 thread, 38-40 vs
// 46-47 GMAC/s with 2 MiB pages). File mappings cannot be collapsed into huge pages here
// (MADV_COLLAPSE: EINVAL without read-only file THP), so weights are copied into anonymous
// memory that is madvise(MADV_HUGEPAGE)d: chunks of at least 1 GiB of address space, bump-
// allocated 64-byte aligned; only the pages written are ever backed, so the unused tail of the
// last chunk costs address space, not memory. Without THP (enabled = never) the copy would buy
// nothing, so weights stay in the mapping then, as with weights_in_huge_pages = false.
namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr size_t kWeightChunkBytes = size_t{1} << 30;

size_t RoundUpToHugePage(size_t bytes) {
  return (bytes + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
}

// `bytes` (a multiple of kHugePageBytes) of address space at a 2 MiB boundary, or null.
std::shared_ptr<void> MapHugeChunk(size_t bytes) {
  const size_t span = bytes + kHugePageBytes;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (base + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  if (aligned > base) ::munmap(raw, aligned - base);
  const uintptr_t end = base + span, used_end = aligned + bytes;
  if (end > used_end) ::munmap(reinterpret_cast<void*>(used_end), end - used_end);
  void* p = reinterpret_cast<void*>(aligned);
  ::madvise(p, bytes, MADV_HUGEPAGE);  // advisory: without it the memory still works
  return std::shared_ptr<void>(p, [bytes](void* q) { ::munmap(q, bytes); });
}

}  // namespace

Tensor CpuBackend::Alloc(DType dtype, Shape shape) {
  Tensor t = HostTensor(dtype, shape);
  std::memset(t.data(), 0, t.nbytes());
  return t;
}

bool CpuBackend::TransparentHugePagesAvailable() {
  static const bool available = [] {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string mode((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return !mode.empty() && mode.find("[never]") == std::string::npos;
  }();
  return available;
}

Tensor CpuBackend::UploadWeight(const Tensor& host) {
  CHECK(host.device() == Device::kCpu) << "UploadWeight: " << host.DebugString();
  const size_t bytes = host.nbytes();
  if (!options_.weights_in_huge_pages || bytes == 0 || !TransparentHugePagesAvailable()) {
    return host;
  }
  const size_t offset = (weight_chunk_used_ + 63) & ~size_t{63};
  if (weight_chunk_ == nullptr || offset + bytes > weight_chunk_size_) {
    const size_t size = std::max(kWeightChunkBytes, RoundUpToHugePage(bytes));
    std::shared_ptr<void> chunk = MapHugeChunk(size);
    if (chunk == nullptr) return host;  // out of address space: the mapping still works
    weight_chunk_ = std::move(chunk);
    weight_chunk_size_ = size;
    weight_chunk_used_ = 0;
    return UploadWeight(host);
  }
  void* dst = static_cast<char*>(weight_chunk_.get()) + offset;
  std::memcpy(dst, host.data(), bytes);
  weight_chunk_used_ = offset + bytes;
  return Tensor(host.dtype(), host.shape(),
                MakeBorrowedBuffer(dst, bytes, Device::kCpu, weight_chunk_));
}

void CpuBackend::CopyToHost(const Tensor& src, void* dst) {
  if (src.nbytes() == 0) return;  // dst may be an empty vector's null data()
  std::memcpy(dst, src.data(), src.nbytes());
}

void CpuBackend::CopyFromHost(const void* src, const Tensor& dst) {
  if (dst.nbytes() == 0) return;
  std::memcpy(dst.data(), src, dst.nbytes());
}

void CpuBackend::Embed(const Tensor& table, const Tensor& ids, float scale, const Tensor& out) {
  const int64_t n = out.rows(), d = out.cols();
  CheckF32(out, "Embed", "out");
  CheckI32(ids, n, "Embed", "ids");
  CHECK_EQ(table.cols(), d) << "Embed: table " << table.DebugString() << " out "
                            << out.DebugString();
  const int32_t* id = ids.data_as<const int32_t>();
  const char* base = static_cast<const char*>(table.data());
  for (int64_t i = 0; i < n; ++i) {
    CHECK(id[i] >= 0 && id[i] < table.rows())
        << "Embed: id " << id[i] << " outside vocab " << table.rows();
    float* o = out.data_as<float>() + i * d;
    DequantizeRow(table.dtype(), base + static_cast<size_t>(id[i]) * table.row_bytes(), o, d);
    if (scale != 1.0f) {
      for (int64_t j = 0; j < d; ++j) o[j] *= scale;
    }
  }
}

void CpuBackend::MatMul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  matmul_.Run(x, w, bias, out);
}

void CpuBackend::RmsNorm(const Tensor& x, const Tensor& w, float eps, float weight_offset,
                         const Tensor& out) {
  CheckF32(x, "RmsNorm", "x");
  CheckF32(w, "RmsNorm", "w");
  CheckF32(out, "RmsNorm", "out");
  CHECK(out.shape() == x.shape() && w.numel() == x.cols())
      << "RmsNorm: x " << x.DebugString() << " w " << w.DebugString() << " out "
      << out.DebugString();
  cpu::RmsNormRows(x.data_as<const float>(), w.data_as<const float>(), eps, weight_offset, x.rows(),
                   x.cols(), out.data_as<float>(), options_.num_threads);
}

void CpuBackend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  CheckF32(a, "Add", "a");
  CheckF32(b, "Add", "b");
  CheckF32(out, "Add", "out");
  CHECK(a.shape() == b.shape() && a.shape() == out.shape())
      << "Add: " << a.DebugString() << " + " << b.DebugString() << " -> " << out.DebugString();
  const float* pa = a.data_as<const float>();
  const float* pb = b.data_as<const float>();
  float* po = out.data_as<float>();
  const int64_t count = a.numel();
  for (int64_t i = 0; i < count; ++i) po[i] = pa[i] + pb[i];
}

void CpuBackend::Scale(const Tensor& x, float s) {
  CheckF32(x, "Scale", "x");
  float* p = x.data_as<float>();
  const int64_t count = x.numel();
  for (int64_t i = 0; i < count; ++i) p[i] *= s;
}

void CpuBackend::Rope(const Tensor& x, const Tensor& positions, const RopeTable& rope,
                      int num_heads, int head_dim) {
  CheckF32(x, "Rope", "x");
  CHECK_EQ(x.cols(), int64_t{num_heads} * head_dim) << "Rope: x " << x.DebugString();
  CheckI32(positions, x.rows(), "Rope", "positions");
  CheckF32(rope.inv_freq, "Rope", "inv_freq");
  CHECK_EQ(rope.inv_freq.numel(), rope.rotary_dim / 2) << "Rope: inv_freq vs rotary_dim";
  cpu::RopeRows(x.data_as<float>(), positions.data_as<const int32_t>(),
                rope.inv_freq.data_as<const float>(), rope.rotary_dim, rope.attention_factor,
                rope.interleaved, x.rows(), num_heads, head_dim, options_.num_threads);
}

void CpuBackend::SiluMul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  CheckF32(gate, "SiluMul", "gate");
  CheckF32(up, "SiluMul", "up");
  CheckF32(out, "SiluMul", "out");
  CHECK(gate.shape() == up.shape() && gate.shape() == out.shape()) << "SiluMul: shapes differ";
  cpu::SiluMulValues(gate.data_as<const float>(), up.data_as<const float>(), out.data_as<float>(),
                     gate.numel(), options_.num_threads);
}

void CpuBackend::GeluTanhMul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  CheckF32(gate, "GeluTanhMul", "gate");
  CheckF32(up, "GeluTanhMul", "up");
  CheckF32(out, "GeluTanhMul", "out");
  CHECK(gate.shape() == up.shape() && gate.shape() == out.shape()) << "GeluTanhMul: shapes differ";
  cpu::GeluTanhMulValues(gate.data_as<const float>(), up.data_as<const float>(),
                         out.data_as<float>(), gate.numel(), options_.num_threads);
}

void CpuBackend::SoftCap(const Tensor& x, float cap) {
  CheckF32(x, "SoftCap", "x");
  cpu::SoftCapValues(x.data_as<float>(), x.numel(), cap, options_.num_threads);
}

void CpuBackend::StoreKv(const Tensor& k, const Tensor& v, const AttentionMeta& meta,
                         const KvLayer& layer) {
  CheckF32(k, "StoreKv", "k");
  CheckF32(v, "StoreKv", "v");
  const int64_t n = k.rows();
  CHECK(v.shape() == k.shape()) << "StoreKv: k " << k.DebugString() << " v " << v.DebugString();
  CheckI32(meta.slot_mapping, n, "StoreKv", "slot_mapping");
  const int64_t width = k.cols();
  const int64_t num_slots = layer.k.dim(0) * layer.k.dim(1);
  // One pool: its rows' bytes and how a (token, kv head) row of head_dim values is written.
  struct Pool {
    const Tensor& t;
    KvQuant quant;
    const char* name;
  };
  const Pool pools[2] = {{layer.k, layer.k_quant, "k"}, {layer.v, layer.v_quant, "v"}};
  for (const Pool& p : pools) {
    CHECK(p.t.ndim() == 4 && p.t.dim(0) * p.t.dim(1) == num_slots && p.t.dim(2) > 0 &&
          width % p.t.dim(2) == 0)
        << "StoreKv: " << p.name << " pool " << p.t.DebugString() << " for rows "
        << k.DebugString();
    const int64_t kvh = p.t.dim(2), head_dim = width / kvh;
    CHECK(p.quant == KvQuant::kNone
              ? p.t.dim(3) == head_dim
              : p.t.dtype() == DType::kU8 &&
                    p.t.dim(3) == static_cast<int64_t>(KvQuantRowBytes(p.quant, head_dim)))
        << "StoreKv: " << p.name << " pool " << p.t.DebugString() << " for " << KvQuantName(p.quant)
        << " rows of " << head_dim;
  }
  const int32_t* slots = meta.slot_mapping.data_as<const int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (slots[i] < 0) continue;  // padding token: not cached
    CHECK_LT(slots[i], num_slots) << "StoreKv: slot outside the pool";
  }
  for (int pi = 0; pi < 2; ++pi) {
    const Pool& p = pools[pi];
    const float* src = (pi == 0 ? k : v).data_as<const float>();
    const int64_t kvh = p.t.dim(2), head_dim = width / kvh, bs = p.t.dim(1);
    char* base = static_cast<char*>(p.t.data());
    if (p.quant == KvQuant::kNone) {
      const size_t head_bytes = RowBytes(p.t.dtype(), p.t.dim(3));
      for (int64_t i = 0; i < n; ++i) {
        if (slots[i] < 0) continue;
        char* dst = base + static_cast<size_t>(slots[i]) * static_cast<size_t>(kvh) * head_bytes;
        cpu::StoreValues(src + i * width, p.t.dtype(), dst, width);
      }
      continue;
    }
    const KvQuantBlock blk(p.quant, static_cast<int>(head_dim), static_cast<int>(bs),
                           static_cast<int>(kvh));
    for (int64_t i = 0; i < n; ++i) {
      if (slots[i] < 0) continue;
      auto* block = reinterpret_cast<uint8_t*>(base) + (slots[i] / bs) * blk.BlockBytes();
      const int t = static_cast<int>(slots[i] % bs);
      for (int h = 0; h < kvh; ++h) {
        QuantizeKvRow(p.quant, src + i * width + h * head_dim, static_cast<int>(head_dim),
                      block + blk.Codes(t, h), block + blk.Scales(t, h));
      }
    }
  }
}

void CpuBackend::Attention(const Tensor& q, const KvLayer& layer, const AttentionMeta& meta,
                           const AttentionParams& params, const Tensor& out) {
  // The AVX2 helpers under any vector kernel set (the AVX-512 set implies AVX2), so AVX-512 and
  // AVX2 backends compute the same attention bits.
  cpu::PagedAttention(q, layer, meta, params, out, options_.num_threads,
                      std::strcmp(kernels_.isa, "scalar") != 0);
}

void CpuBackend::GatherRows(const Tensor& x, const Tensor& rows, const Tensor& out) {
  const int64_t r = out.rows();
  CheckI32(rows, r, "GatherRows", "rows");
  CHECK(out.cols() == x.cols() && out.dtype() == x.dtype())
      << "GatherRows: x " << x.DebugString() << " out " << out.DebugString();
  const int32_t* idx = rows.data_as<const int32_t>();
  for (int64_t i = 0; i < r; ++i) {
    CHECK(idx[i] >= 0 && idx[i] < x.rows()) << "GatherRows: row " << idx[i];
    std::memcpy(static_cast<char*>(out.data()) + static_cast<size_t>(i) * out.row_bytes(),
                static_cast<const char*>(x.data()) + static_cast<size_t>(idx[i]) * x.row_bytes(),
                x.row_bytes());
  }
}

void CpuBackend::CopyColumns(const Tensor& src, int64_t src_col, const Tensor& dst, int64_t dst_col,
                             int64_t num_cols) {
  CHECK(src.dtype() == dst.dtype() && !GetDTypeInfo(src.dtype()).quantized &&
        src.rows() == dst.rows() && src_col >= 0 && dst_col >= 0 && num_cols >= 0 &&
        src_col + num_cols <= src.cols() && dst_col + num_cols <= dst.cols())
      << "CopyColumns: " << src.DebugString() << "[:, " << src_col << "+" << num_cols << "] -> "
      << dst.DebugString() << "[:, " << dst_col << "]";
  const size_t elem = static_cast<size_t>(GetDTypeInfo(src.dtype()).block_bytes);
  for (int64_t i = 0; i < src.rows(); ++i) {
    std::memcpy(
        static_cast<char*>(dst.data()) + (static_cast<size_t>(i * dst.cols() + dst_col)) * elem,
        static_cast<const char*>(src.data()) +
            (static_cast<size_t>(i * src.cols() + src_col)) * elem,
        static_cast<size_t>(num_cols) * elem);
  }
}

namespace {

// Expert e's matrix of a stacked [E, rows, cols] weight.
Tensor ExpertMatrix(const Tensor& stacked, int64_t e) {
  return stacked.Slice(e, 1).Reshape(Shape{stacked.dim(1), stacked.dim(2)});
}

// Row e of a stacked bias [E, cols] as a [cols] vector; undefined stays undefined.
Tensor ExpertBias(const Tensor& biases, int64_t e) {
  return biases.defined() ? biases.Slice(e, 1).Reshape(Shape{biases.dim(1)}) : Tensor();
}

// gpt-oss's clamped SwiGLU, in place in g: g = min(g, limit), u = clamp(u, -limit, limit),
// g * sigmoid(alpha g) * (u + 1), as transformers computes it in f32.
void ClampedSwiglu(const Tensor& g, const Tensor& u, float limit) {
  constexpr float kAlpha = 1.702f;
  float* gp = g.data_as<float>();
  const float* up = u.data_as<const float>();
  for (int64_t i = 0; i < g.numel(); ++i) {
    const float gi = std::min(gp[i], limit);
    const float ui = std::clamp(up[i], -limit, limit);
    const float glu = gi * (1.f / (1.f + std::exp(-gi * kAlpha)));
    gp[i] = (ui + 1.f) * glu;
  }
}

}  // namespace

// Routing on the host, then, expert by expert in index order, one gathered GEMM per projection
// over the rows routed to it (prefill rows share each expert's weight stream) and a weighted add
// into the rows' outputs: a row's sum runs over its experts in index order whatever else the step
// holds, as transformers' index_add_ loop does.
void CpuBackend::MoeMlp(const Tensor& x, const MoeWeights& w, const MoeParams& params,
                        const Tensor& router_logits, const Tensor& expert_ids, const Tensor& out) {
  const int64_t n = x.rows(), hidden = x.cols();
  const int64_t num_experts = w.router.rows();
  const int k = params.top_k;
  CheckF32(x, "MoeMlp", "x");
  CheckF32(out, "MoeMlp", "out");
  CheckF32(router_logits, "MoeMlp", "router_logits");
  CheckI32(expert_ids, n * k, "MoeMlp", "expert_ids");
  const int64_t f = CheckMoeShapes(x, w, router_logits, out);
  auto gated = [&](const Tensor& g, const Tensor& u) {
    if (params.swiglu_limit > 0.f) {
      ClampedSwiglu(g, u, params.swiglu_limit);
    } else if (params.act == GatedAct::kSilu) {
      SiluMul(g, u, g);
    } else {
      GeluTanhMul(g, u, g);
    }
  };

  MatMul(x, w.router, w.router_bias, router_logits);
  const float* logits = router_logits.data_as<const float>();
  int32_t* ids = expert_ids.data_as<int32_t>();
  std::vector<float> probs(static_cast<size_t>(n * k));
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(num_experts));
  std::vector<std::vector<float>> row_probs(static_cast<size_t>(num_experts));
  for (int64_t i = 0; i < n; ++i) {
    RouteExperts(logits + i * num_experts, static_cast<int>(num_experts), k, params.norm_topk_prob,
                 ids + i * k, probs.data() + i * k);
    for (int j = 0; j < k; ++j) {
      rows[static_cast<size_t>(ids[i * k + j])].push_back(static_cast<int32_t>(i));
      row_probs[static_cast<size_t>(ids[i * k + j])].push_back(
          probs[static_cast<size_t>(i * k + j)]);
    }
  }

  float* op = out.data_as<float>();
  std::fill(op, op + n * hidden, 0.f);
  for (int64_t e = 0; e < num_experts; ++e) {
    const std::vector<int32_t>& r = rows[static_cast<size_t>(e)];
    const auto c = static_cast<int64_t>(r.size());
    if (c == 0) continue;
    Tensor idx = HostTensor(DType::kI32, Shape{c});
    std::copy(r.begin(), r.end(), idx.data_as<int32_t>());
    Tensor xe = HostTensor(DType::kF32, Shape{c, hidden});
    GatherRows(x, idx, xe);
    Tensor g = HostTensor(DType::kF32, Shape{c, f});
    Tensor u = HostTensor(DType::kF32, Shape{c, f});
    MatMul(xe, ExpertMatrix(w.gate, e), ExpertBias(w.gate_bias, e), g);
    MatMul(xe, ExpertMatrix(w.up, e), ExpertBias(w.up_bias, e), u);
    gated(g, u);
    Tensor y = xe;  // [c, hidden], no longer needed as input
    MatMul(g, ExpertMatrix(w.down, e), ExpertBias(w.down_bias, e), y);
    const float* yp = y.data_as<const float>();
    for (int64_t j = 0; j < c; ++j) {
      const float p = row_probs[static_cast<size_t>(e)][static_cast<size_t>(j)];
      float* dst = op + static_cast<int64_t>(r[static_cast<size_t>(j)]) * hidden;
      for (int64_t col = 0; col < hidden; ++col) dst[col] += p * yp[j * hidden + col];
    }
  }

  if (w.shared_gate.defined()) {
    const int64_t fs = w.shared_gate.rows();
    Tensor g = HostTensor(DType::kF32, Shape{n, fs});
    Tensor u = HostTensor(DType::kF32, Shape{n, fs});
    MatMul(x, w.shared_gate, Tensor(), g);
    MatMul(x, w.shared_up, Tensor(), u);
    gated(g, u);
    Tensor y = HostTensor(DType::kF32, Shape{n, hidden});
    MatMul(g, w.shared_down, Tensor(), y);
    Tensor s = HostTensor(DType::kF32, Shape{n, 1});
    MatMul(x, w.shared_router, Tensor(), s);
    const float* yp = y.data_as<const float>();
    const float* sp = s.data_as<const float>();
    for (int64_t i = 0; i < n; ++i) {
      const float scale = 1.f / (1.f + std::exp(-sp[i]));
      for (int64_t col = 0; col < hidden; ++col)
        op[i * hidden + col] += scale * yp[i * hidden + col];
    }
  }
}

}  // namespace loom
