// The defaults of the Backend interface: FillUniform on the host, and the fused ops, each the
// sequence of unfused ops it replaces, so a backend that does not override them (the CPU
// reference) computes exactly what the unfused decoder did.
#include "backend/backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/hash_uniform.h"
#include "tensor/quant.h"

namespace loom {

void Backend::CopyKvBlocks(const std::vector<KvLayer>& kv, std::span<const int32_t> blocks,
                           std::span<uint8_t* const> hosts, bool to_host) {
  CHECK_EQ(hosts.size(), blocks.size()) << "CopyKvBlocks: one host pointer a block";
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int32_t block = blocks[i];
    uint8_t* bytes = hosts[i];
    for (const KvLayer& layer : kv) {
      for (const Tensor* t : {&layer.k, &layer.v}) {
        const Tensor part = t->Slice(block, 1);
        if (to_host) {
          CopyToHost(part, bytes);
        } else {
          CopyFromHost(bytes, part);
        }
        bytes += part.nbytes();
      }
    }
  }
}

void Backend::FillUniform(const Tensor& t, uint64_t seed, float lo, float scale) {
  const bool host = t.device() == Device::kCpu;
  Tensor h = host ? t : HostTensor(t.dtype(), t.shape());
  const int64_t n = h.numel();
  if (GetDTypeInfo(h.dtype()).quantized) {
    CHECK(host && h.ndim() >= 2) << "FillUniform: " << h.DebugString();
    const int64_t cols = h.shape()[h.ndim() - 1];
    const size_t row_bytes = RowBytes(h.dtype(), cols);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < n / cols; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        row[static_cast<size_t>(c)] =
            HashUniform(seed, static_cast<uint64_t>(r * cols + c), lo, scale);
      }
      QuantizeRow(h.dtype(), row.data(), static_cast<char*>(h.data()) + r * row_bytes, cols);
    }
    return;
  }
  if (h.dtype() == DType::kF32) {
    float* p = h.data_as<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = HashUniform(seed, static_cast<uint64_t>(i), lo, scale);
  } else {
    CHECK(h.dtype() == DType::kBF16 || h.dtype() == DType::kF16)
        << "FillUniform: " << DTypeName(h.dtype());
    uint16_t* p = h.data_as<uint16_t>();
    for (int64_t i = 0; i < n; ++i) {
      const float v = HashUniform(seed, static_cast<uint64_t>(i), lo, scale);
      p[i] = h.dtype() == DType::kBF16 ? F32ToBf16(v) : F32ToF16(v);
    }
  }
  if (!host) CopyFromHost(h.data(), t);
}

Shape Backend::ConcatRowsShape(const std::vector<Tensor>& parts) {
  CHECK(!parts.empty()) << "ConcatRows: no parts";
  const Tensor& first = parts.front();
  const bool vectors = first.ndim() == 1;
  int64_t rows = 0;
  for (const Tensor& p : parts) {
    CHECK(p.defined() && p.dtype() == first.dtype() && p.ndim() == first.ndim() &&
          (vectors || p.cols() == first.cols()))
        << "ConcatRows: " << (p.defined() ? p.DebugString() : "undefined") << " vs "
        << first.DebugString();
    rows += vectors ? p.numel() : p.rows();
  }
  return vectors ? Shape{rows} : Shape{rows, first.cols()};
}

Tensor Backend::ConcatRows(const std::vector<Tensor>& parts) {
  Tensor host = HostTensor(parts.front().dtype(), ConcatRowsShape(parts));
  char* dst = static_cast<char*>(host.data());
  for (const Tensor& p : parts) {
    if (p.device() == Device::kCpu) {
      std::memcpy(dst, p.data(), p.nbytes());
    } else {
      CopyToHost(p, dst);
    }
    dst += p.nbytes();
  }
  return Upload(host);
}

void Backend::MatMulAdd(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& acc) {
  Tensor out = AllocScratch(acc.dtype(), acc.shape());
  MatMul(x, w, bias, out);
  Add(acc, out, acc);
}

void Backend::RmsNormMatMul(const Tensor& x, const NormSpec& norm, const Tensor& w,
                            const Tensor& bias, const Tensor& out) {
  Tensor h = AllocScratch(x.dtype(), x.shape());
  RmsNorm(x, norm.w, norm.eps, norm.weight_offset, h);
  MatMul(h, w, bias, out);
}

void Backend::RmsNormMatMulGated(const Tensor& x, const NormSpec& norm, const Tensor& w_gate_up,
                                 GatedAct act, const Tensor& out) {
  Tensor h = AllocScratch(x.dtype(), x.shape());
  RmsNorm(x, norm.w, norm.eps, norm.weight_offset, h);
  MatMulGated(h, w_gate_up, act, out);
}

void Backend::RmsNormQkvRopeStore(const Tensor& x, const NormSpec& norm, const Tensor& w_qkv,
                                  const Tensor& bias, const Tensor& positions,
                                  const RopeTable& rope, const QkvLayout& layout,
                                  const AttentionMeta& meta, const KvLayer& layer,
                                  const Tensor& qkv, const Tensor& q_out) {
  RmsNormMatMul(x, norm, w_qkv, bias, qkv);
  QkvRopeStore(qkv, positions, rope, layout, meta, layer, q_out);
}

void Backend::QkvRopeStore(const Tensor& qkv, const Tensor& positions, const RopeTable& rope,
                           const QkvLayout& l, const AttentionMeta& meta, const KvLayer& layer,
                           const Tensor& q_out) {
  const int64_t n = qkv.rows(), hd = l.head_dim;
  const int64_t q_dim = l.num_heads * hd, kv_dim = l.num_kv_heads * hd;
  CHECK_EQ(qkv.cols(), q_dim + 2 * kv_dim) << "QkvRopeStore: qkv " << qkv.DebugString();
  Tensor k = AllocScratch(qkv.dtype(), Shape{n, kv_dim});
  Tensor v = AllocScratch(qkv.dtype(), Shape{n, kv_dim});
  CopyColumns(qkv, 0, q_out, 0, q_dim);
  CopyColumns(qkv, q_dim, k, 0, kv_dim);
  CopyColumns(qkv, q_dim + kv_dim, v, 0, kv_dim);
  if (l.q_norm.defined()) {
    Tensor q_heads = q_out.Reshape(Shape{n * l.num_heads, hd});
    RmsNorm(q_heads, l.q_norm, l.eps, l.norm_offset, q_heads);
  }
  if (l.k_norm.defined()) {
    Tensor k_heads = k.Reshape(Shape{n * l.num_kv_heads, hd});
    RmsNorm(k_heads, l.k_norm, l.eps, l.norm_offset, k_heads);
  }
  Rope(q_out, positions, rope, l.num_heads, static_cast<int>(hd));
  Rope(k, positions, rope, l.num_kv_heads, static_cast<int>(hd));
  StoreKv(k, v, meta, layer);
}

Tensor Backend::FuseGateUp(const Tensor& w_gate, const Tensor& w_up) {
  return ConcatRows({w_gate, w_up});
}

void Backend::MatMulGated(const Tensor& x, const Tensor& w_gate_up, GatedAct act,
                          const Tensor& out) {
  const int64_t n = x.rows(), f = out.cols();
  CHECK(w_gate_up.rows() == 2 * f && out.rows() == n)
      << "MatMulGated: w_gate_up " << w_gate_up.DebugString() << " out " << out.DebugString();
  Tensor gate_up = AllocScratch(out.dtype(), Shape{n, 2 * f});
  MatMul(x, w_gate_up, Tensor(), gate_up);
  Tensor up = AllocScratch(out.dtype(), Shape{n, f});
  CopyColumns(gate_up, 0, out, 0, f);
  CopyColumns(gate_up, f, up, 0, f);
  if (act == GatedAct::kSilu) {
    SiluMul(out, up, out);
  } else {
    GeluTanhMul(out, up, out);
  }
}

int64_t Backend::CheckMoeShapes(const Tensor& x, const MoeWeights& w, const Tensor& router_logits,
                                const Tensor& out) {
  const int64_t n = x.rows(), hidden = x.cols(), num_experts = w.router.rows();
  CHECK(out.rows() == n && out.cols() == hidden && router_logits.rows() == n &&
        router_logits.cols() == num_experts)
      << "MoeMlp: x " << x.DebugString() << " out " << out.DebugString() << " router_logits "
      << router_logits.DebugString();
  for (const Tensor* t : {&w.gate, &w.up, &w.down}) {
    CHECK(t->defined() && t->ndim() == 3 && t->dim(0) == num_experts)
        << "MoeMlp: expert weights must be [" << num_experts << ", rows, cols], got "
        << (t->defined() ? t->DebugString() : "undefined");
  }
  const int64_t f = w.gate.dim(1);
  CHECK(w.gate.dim(2) == hidden && w.up.dim(1) == f && w.up.dim(2) == hidden &&
        w.down.dim(1) == hidden && w.down.dim(2) == f)
      << "MoeMlp: gate " << w.gate.DebugString() << " up " << w.up.DebugString() << " down "
      << w.down.DebugString();
  auto check_bias = [&](const Tensor& b, Shape want, const char* what) {
    CHECK(!b.defined() || (b.dtype() == DType::kF32 && b.shape() == want))
        << "MoeMlp: " << what << " must be f32 " << want.ToString() << ", got " << b.DebugString();
  };
  check_bias(w.router_bias, Shape{num_experts}, "router_bias");
  check_bias(w.gate_bias, Shape{num_experts, f}, "gate_bias");
  check_bias(w.up_bias, Shape{num_experts, f}, "up_bias");
  check_bias(w.down_bias, Shape{num_experts, hidden}, "down_bias");
  return f;
}

void Backend::RouteExperts(const float* logits, int num_experts, int top_k, bool norm_topk_prob,
                           int32_t* ids, float* weights) {
  CHECK(top_k >= 1 && top_k <= num_experts)
      << "RouteExperts: top_k " << top_k << " of " << num_experts;
  float max = logits[0];
  for (int e = 1; e < num_experts; ++e) max = std::max(max, logits[e]);
  float sum = 0.f;
  for (int e = 0; e < num_experts; ++e) sum += std::exp(logits[e] - max);
  // Selection by logit (softmax is monotonic), ties to the lower index.
  for (int j = 0; j < top_k; ++j) {
    int best = -1;
    for (int e = 0; e < num_experts; ++e) {
      bool taken = false;
      for (int t = 0; t < j; ++t) taken |= ids[t] == e;
      if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
    }
    ids[j] = best;
    weights[j] = std::exp(logits[best] - max) / sum;
  }
  if (norm_topk_prob) {
    float chosen = 0.f;
    for (int j = 0; j < top_k; ++j) chosen += weights[j];
    for (int j = 0; j < top_k; ++j) weights[j] /= chosen;
  }
}

}  // namespace loom
