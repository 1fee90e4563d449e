// cuda_attn_bench: paged decode attention alone, Llama-3.1-8B heads (32 q heads, 8 kv heads,
// head_dim 128, block size 16), random bf16 pools, page tables drawn from a shuffled block
// permutation. For each case (batch x context) it runs the generic kernel ("old",
// attn_decode=0 path) and the decode kernel (automatic plan, then variants: keys per
// iteration, prefetch, forced splits)
// and prints per call: median microseconds (cudaEvents around each call, after warmup), KV bytes
// read / time, and the ratio to the HBM read bandwidth measured in the same run by a read-only
// reduction over 4 GiB. Small cases rotate over several disjoint page tables so that consecutive
// calls do not read from L2. Then the same cases on quantized pools (--kv-quant fp8 and int8: the
// bf16 pools' values quantized): the decode kernel and the generic one, KV GB/s counting the
// quantized bytes, the error against the bf16 pools' generic result.
//
//   cuda_attn_bench [timed_calls=30] [KEY=VALUE ...]
//
// The base tuning every variant starts from: the defaults, then the KEY=VALUE arguments
// (backend/cuda_tuning.h, as `loom --cuda-tune`; tools/cuda/run_ab_on_device.sh turns its
// ENV_A / ENV_B settings into these).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/decode_attention.cuh"
#include "backend/cuda/hbm_read_probe.cuh"
#include "backend/cuda/paged_attention.cuh"

namespace loom {
namespace {

constexpr int kHeads = 32, kKvHeads = 8, kDim = 128, kBlock = 16;
constexpr int64_t kPageBytes = int64_t{kBlock} * kKvHeads * kDim * 2;  // one pool, one page
constexpr int kMaxBatch = 256;
constexpr int kMaxSplits = 64;
constexpr int64_t kRotateBytes = int64_t{256} << 20;  // KV read per rotation, past the 50 MB L2

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double MeasureReadBandwidth(CudaBackend& be) {
  const int64_t bytes = int64_t{4} << 30;
  Tensor buf = be.Alloc(DType::kBF16, Shape{bytes / 2});
  be.FillUniform(buf, 7, -1.f, 2.f);
  Tensor sink = be.Alloc(DType::kI32, Shape{1});
  std::vector<double> ms;
  for (int i = 0; i < 12; ++i) {
    cuda::CudaEvent start, stop;
    start.Record(be.stream());
    cuda::LaunchReadProbe(buf.data(), bytes, sink.data_as<uint32_t>(), be.num_sms(), be.stream());
    stop.Record(be.stream());
    stop.Synchronize();
    if (i >= 2) ms.push_back(stop.MillisSince(start));
  }
  return static_cast<double>(bytes) / (Median(ms) * 1e-3);
}

// Device copies of one step's CSR arrays (one per rotation copy).
struct DeviceStep {
  Tensor query_start, kv_len, page_indptr, page_indices;
};

Tensor UploadI32(CudaBackend& be, const std::vector<int32_t>& v) {
  // On the backend's stream: Alloc's zero-fill is queued there and must land first.
  Tensor t = be.Alloc(DType::kI32, Shape{static_cast<int64_t>(v.size())});
  be.CopyFromHost(v.data(), t);
  return t;
}

struct Variant {
  std::string name;
  CudaTuning tuning;
  int quant = -1;  // index into the quantized pools (kQuants), or -1: the bf16 pools
  bool decode() const { return tuning.attn_decode; }
};

// `base` with the generic kernel.
CudaTuning Generic(CudaTuning base) {
  base.attn_decode = false;
  return base;
}

// `base` with a decode-kernel variant (mma = 0: the CUDA-core kernel; splits 0: as in base).
CudaTuning Tuning(CudaTuning base, int unroll, int prefetch, int splits = 0, int mma = 0) {
  base.attn_decode = true;
  base.attn_decode_mma = mma != 0;
  base.attn_decode_unroll = unroll;
  base.attn_decode_prefetch = prefetch != 0;
  if (splits > 0) base.attn_decode_splits = splits;
  return base;
}

std::vector<float> ReadBf16(const Tensor& t, int64_t count) {
  std::vector<uint16_t> raw(static_cast<size_t>(count));
  CUDA_CHECK(cudaMemcpy(raw.data(), t.data(), raw.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<float> out(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) out[i] = Bf16ToF32(raw[i]);
  return out;
}

double NormalizedError(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double{got[i]} - ref[i]) * (double{got[i]} - ref[i]);
    den += double{ref[i]} * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

int Run(int timed_calls, const CudaTuning& base) {
  CudaBackendOptions options;
  options.tuning = base;
  auto created = CudaBackend::Create(options);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 1;
  }
  CudaBackend& be = **created;
  cudaStream_t stream = be.stream();
  const double read_bw = MeasureReadBandwidth(be);
  std::printf("HBM read bandwidth (read-only reduction over 4 GiB): %.0f GB/s\n", read_bw / 1e9);

  struct Case {
    int batch, context;
  };
  const std::vector<Case> cases = {{64, 8192}, {256, 576}, {1, 512}, {1, 8192}, {8, 4096}};
  int64_t pool_pages = 0;
  for (const Case& c : cases) {
    pool_pages = std::max<int64_t>(pool_pages, int64_t{c.batch} * (c.context / kBlock + 1));
  }
  pool_pages += 64;
  const Shape pool{pool_pages, kBlock, kKvHeads, kDim};
  Tensor k_pool = be.Alloc(DType::kBF16, pool), v_pool = be.Alloc(DType::kBF16, pool);
  be.FillUniform(k_pool, 1, -1.f, 2.f);
  be.FillUniform(v_pool, 2, -1.f, 2.f);
  // The same values in quantized pools, through StoreKv (a bf16 pool is rows of every slot).
  const KvQuant kQuants[] = {KvQuant::kFp8, KvQuant::kInt8};
  std::vector<KvLayer> qpools;
  {
    std::vector<int32_t> all(static_cast<size_t>(pool_pages * kBlock));
    std::iota(all.begin(), all.end(), 0);
    AttentionMeta meta;
    meta.slot_mapping = UploadI32(be, all);
    const Tensor k_rows = k_pool.Reshape(Shape{pool_pages * kBlock, kKvHeads * kDim});
    const Tensor v_rows = v_pool.Reshape(Shape{pool_pages * kBlock, kKvHeads * kDim});
    for (KvQuant kq : kQuants) {
      const Shape qshape{pool_pages, kBlock, kKvHeads,
                         static_cast<int64_t>(KvQuantRowBytes(kq, kDim))};
      KvLayer l{be.Alloc(DType::kU8, qshape), be.Alloc(DType::kU8, qshape), kq, kq};
      be.StoreKv(k_rows, v_rows, meta, l);
      qpools.push_back(l);
    }
    be.Synchronize();
  }
  Tensor q = be.Alloc(DType::kBF16, Shape{kMaxBatch, kHeads * kDim});
  Tensor out = be.Alloc(DType::kBF16, Shape{kMaxBatch, kHeads * kDim});
  be.FillUniform(q, 3, -1.f, 2.f);
  Tensor partial = be.Alloc(DType::kF32, Shape{int64_t{kMaxSplits} * kMaxBatch * kHeads * kDim});
  Tensor lse = be.Alloc(DType::kF32, Shape{int64_t{kMaxSplits} * kMaxBatch * kHeads});
  Tensor tile_start = be.Alloc(DType::kI32, Shape{kMaxBatch + 1});
  std::vector<int32_t> perm(static_cast<size_t>(pool_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(42);
  std::shuffle(perm.begin(), perm.end(), rng);

  std::printf("%-13s %-18s %6s %10s %10s %7s %10s\n", "case", "kernel", "splits", "us/call",
              "KV GB/s", "of HBM", "err vs old");
  for (const Case& c : cases) {
    const int pages_per_seq = (c.context + kBlock - 1) / kBlock;
    const int64_t pages = int64_t{c.batch} * pages_per_seq;
    const int64_t kv_bytes = int64_t{c.batch} * c.context * kKvHeads * kDim * 2 * 2;
    const int64_t copies =
        std::clamp<int64_t>((kRotateBytes + kv_bytes - 1) / kv_bytes, 1, pool_pages / pages);
    std::vector<DeviceStep> steps;
    for (int64_t cp = 0; cp < copies; ++cp) {
      std::vector<int32_t> qs(c.batch + 1), kv(c.batch, c.context), indptr(c.batch + 1), idx;
      for (int s = 0; s <= c.batch; ++s) {
        qs[s] = s;
        indptr[s] = s * pages_per_seq;
      }
      idx.assign(perm.begin() + cp * pages, perm.begin() + (cp + 1) * pages);
      steps.push_back(
          {UploadI32(be, qs), UploadI32(be, kv), UploadI32(be, indptr), UploadI32(be, idx)});
    }
    const KvLayer* kv = nullptr;  // quantized pools, or null: the bf16 ones
    auto args_for = [&](const DeviceStep& st) {
      cuda::PagedAttentionArgs a;
      a.q = q.data();
      a.k_pool = kv != nullptr ? kv->k.data() : k_pool.data();
      a.v_pool = kv != nullptr ? kv->v.data() : v_pool.data();
      if (kv != nullptr) {
        a.k_desc = cuda::KvPoolDesc(kv->k_quant, kDim, kBlock, kKvHeads);
        a.v_desc = cuda::KvPoolDesc(kv->v_quant, kDim, kBlock, kKvHeads);
      }
      a.query_start = st.query_start.data_as<const int32_t>();
      a.kv_len = st.kv_len.data_as<const int32_t>();
      a.page_indptr = st.page_indptr.data_as<const int32_t>();
      a.page_indices = st.page_indices.data_as<const int32_t>();
      a.num_seqs = c.batch;
      a.num_tokens = c.batch;
      a.max_query_len = 1;
      a.max_kv_len = c.context;
      a.num_heads = kHeads;
      a.num_kv_heads = kKvHeads;
      a.head_dim = kDim;
      a.block_size = kBlock;
      a.scale = 1.f / std::sqrt(static_cast<float>(kDim));
      a.out = out.data();
      return a;
    };

    CudaTuning decode_auto = base;
    decode_auto.attn_decode = true;
    std::vector<Variant> variants = {
        {"old (generic)", Generic(base)},
        {"decode auto", decode_auto},
        {"u2 prefetch", Tuning(base, 2, 1)},
        {"u4 prefetch", Tuning(base, 4, 1)},
        {"u2 no-prefetch", Tuning(base, 2, 0)},
        {"u4 no-prefetch", Tuning(base, 4, 0)},
        {"mma 1 tile pf", Tuning(base, 1, 1, 0, 1)},
        {"mma 1 tile", Tuning(base, 1, 0, 0, 1)},
        {"mma 2 tiles", Tuning(base, 2, 0, 0, 1)},
    };
    for (int sp : {1, 2, 3, 4, 8, 16, 32, 64}) {
      if (int64_t{c.batch} * kKvHeads * sp <= 8 * 132) {
        for (int u : {2, 4}) {
          variants.push_back({"u" + std::to_string(u) + " pf splits " + std::to_string(sp),
                              Tuning(base, u, 1, sp)});
        }
      }
    }
    std::vector<float> old_out;
    // The quantized pools' variants, after the bf16 ones.
    for (int i = 0; i < static_cast<int>(std::size(kQuants)); ++i) {
      const std::string qn(KvQuantName(kQuants[i]));
      variants.push_back({qn + " decode auto", decode_auto, i});
      variants.push_back({qn + " mma 1 tile pf", Tuning(base, 1, 1, 0, 1), i});
      variants.push_back({qn + " mma 2 tiles", Tuning(base, 2, 0, 0, 1), i});
      variants.push_back({qn + " mma 4 tiles", Tuning(base, 4, 0, 0, 1), i});
      variants.push_back({qn + " generic", Generic(base), i});
    }
    for (const Variant& v : variants) {
      kv = v.quant < 0 ? nullptr : &qpools[static_cast<size_t>(v.quant)];
      const int64_t row_bytes =
          kv == nullptr ? kDim * 2 : static_cast<int64_t>(KvQuantRowBytes(kQuants[v.quant], kDim));
      const int64_t read_bytes = int64_t{c.batch} * c.context * kKvHeads * row_bytes * 2;
      const cuda::PagedAttentionPlan plan =
          cuda::PlanPagedAttention(args_for(steps[0]), be.num_sms(), v.tuning);
      auto call = [&](int i) {
        cuda::LaunchPagedAttention(args_for(steps[static_cast<size_t>(i) % steps.size()]), plan,
                                   tile_start.data_as<int32_t>(), partial.data_as<float>(),
                                   lse.data_as<float>(), stream, v.tuning.cuda_pdl);
      };
      // Once, as a step does: every step here has the same query table (one row a sequence).
      cuda::LaunchTileStarts(args_for(steps[0]), plan, tile_start.data_as<int32_t>(), stream,
                             v.tuning.cuda_pdl);
      for (int i = 0; i < 5; ++i) call(i);
      std::vector<double> us;
      cuda::CudaEvent start, stop;
      for (int i = 0; i < timed_calls; ++i) {
        start.Record(stream);
        call(i + 5);
        stop.Record(stream);
        stop.Synchronize();
        us.push_back(stop.MillisSince(start) * 1e3);
      }
      const double t = Median(us);
      // Output of rotation copy 0 vs the generic kernel's.
      call(0);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      const std::vector<float> got = ReadBf16(out, int64_t{c.batch} * kHeads * kDim);
      double err = 0;
      if (!v.decode() && kv == nullptr) {
        old_out = got;
      } else {
        err = NormalizedError(got, old_out);
      }
      const double bw = static_cast<double>(read_bytes) / (t * 1e-6);
      char name[32];
      std::snprintf(name, sizeof(name), "%d x %d", c.batch, c.context);
      std::printf("%-13s %-18s %6d %10.1f %10.0f %6.1f%% %10.2e\n", name, v.name.c_str(),
                  plan.num_splits, t, bw / 1e9, 100 * bw / read_bw, err);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  // KEY=VALUE arguments over the defaults (no environment: the LOOM_<KEY> variables are the
  // CLI's).
  std::vector<std::string> args(argv + std::min(argc, 2), argv + argc);
  loom::StatusOr<loom::CudaTuning> base =
      loom::ResolveCudaTuning(args, [](const char*) -> const char* { return nullptr; });
  if (!base.ok()) {
    std::fprintf(stderr, "%s\n", base.status().message().c_str());
    return 2;
  }
  const std::string tuned = loom::DescribeCudaTuning(*base);
  if (!tuned.empty()) std::printf("tuning: %s\n", tuned.c_str());
  return loom::Run(argc > 1 ? std::atoi(argv[1]) : 30, *base);
}
