// CUDA paged attention (and StoreKv) vs the CPU backend on the same bf16 K/V: mixed prefill /
// decode batches, cached prefixes, shuffled pages, block sizes that divide nothing, GQA ratios
// 1/2/4/8, head dims 64/128/256, sliding windows, soft-capping, split-KV decode; the decode
// kernel (decode_attention.cuh) on awkward contexts with automatic and forced splits, and batched
// rows equal to the same sequence run alone. Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>

#include "backend/cuda/cuda_test_util.h"
#include "backend/cuda/decode_attention.cuh"
#include "backend/cuda/paged_attention.cuh"

namespace loom {
namespace {

using cuda_test::CpuValues;
using cuda_test::GpuValues;
using cuda_test::HostF32;
using cuda_test::HostI32;
using cuda_test::kTolRounded;
using cuda_test::NormalizedError;
using cuda_test::Poison;
using cuda_test::RandBf16;

struct SeqSpec {
  int prefix;        // tokens already cached
  int q_len;         // tokens of this step
  int data_id = -1;  // picks the sequence's random q/K/V (-1: its index in the batch)
};

struct Scenario {
  const char* name;
  int num_heads, num_kv_heads, head_dim, block_size;
  int window = 0;
  float softcap = 0.f;
  std::vector<SeqSpec> seqs;
  bool sinks = false;  // gpt-oss's attention sinks: a logit per query head
};

// Host arrays of one attention step plus the "store everything" step that fills the cache.
struct HostStep {
  std::vector<int32_t> query_start{0}, kv_len, page_indptr{0}, page_indices, slot_mapping;
  std::vector<int32_t> all_slots;   // slots of every cached token, prefix and new, seq by seq
  std::vector<int32_t> all_is_new;  // 1 where all_slots' token belongs to this step
  int max_query_len = 0, max_kv_len = 0, num_blocks = 0;
};

HostStep BuildStep(const Scenario& sc, std::mt19937& rng) {
  HostStep h;
  int total_pages = 0;
  for (const SeqSpec& s : sc.seqs) {
    total_pages += (s.prefix + s.q_len + sc.block_size - 1) / sc.block_size;
  }
  h.num_blocks = total_pages + 3;
  std::vector<int32_t> ids(static_cast<size_t>(h.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  for (const SeqSpec& s : sc.seqs) {
    const int kv = s.prefix + s.q_len;
    const int pages = (kv + sc.block_size - 1) / sc.block_size;
    std::vector<int32_t> table(ids.begin() + static_cast<int64_t>(next),
                               ids.begin() + static_cast<int64_t>(next) + pages);
    next += static_cast<size_t>(pages);
    for (int p = 0; p < kv; ++p) {
      const int32_t slot =
          table[static_cast<size_t>(p / sc.block_size)] * sc.block_size + p % sc.block_size;
      h.all_slots.push_back(slot);
      h.all_is_new.push_back(p >= s.prefix);
      if (p >= s.prefix) h.slot_mapping.push_back(slot);
    }
    h.query_start.push_back(h.query_start.back() + s.q_len);
    h.kv_len.push_back(kv);
    h.page_indices.insert(h.page_indices.end(), table.begin(), table.end());
    h.page_indptr.push_back(static_cast<int32_t>(h.page_indices.size()));
    h.max_query_len = std::max(h.max_query_len, s.q_len);
    h.max_kv_len = std::max(h.max_kv_len, kv);
  }
  return h;
}

AttentionMeta MakeMeta(Backend& be, const HostStep& h, const std::vector<int32_t>& slots,
                       int block_size) {
  AttentionMeta m;
  m.num_seqs = static_cast<int>(h.kv_len.size());
  m.num_tokens = h.query_start.back();
  m.max_query_len = h.max_query_len;
  m.max_kv_len = h.max_kv_len;
  m.block_size = block_size;
  m.query_start = be.Upload(HostI32(h.query_start));
  m.kv_len = be.Upload(HostI32(h.kv_len));
  m.page_indptr = be.Upload(HostI32(h.page_indptr));
  m.page_indices = be.Upload(HostI32(h.page_indices));
  m.slot_mapping = be.Upload(HostI32(slots));
  return m;
}

// Prefill chunks and decodes in one step, gqa 8, head_dim 64.
Scenario MixedPrefillDecode() {
  return {"mixed prefill/decode, gqa 8, d64",           16, 2, 64, 16, 0, 0.f,
          {{0, 3}, {5, 17}, {0, 97}, {20, 1}, {130, 1}}};
}

class CudaAttentionTest : public cuda_test::GpuTest {
 protected:
  // Host inputs of a scenario. Every value is drawn from `seed` and each sequence's data_id (not
  // its position in the batch), so a sequence run alone sees the same q/K/V as in a batch.
  struct Inputs {
    Scenario sc;
    HostStep h;
    std::vector<float> qv, new_k, new_v, old_k, old_v;
    std::vector<int32_t> old_slots;
  };

  static Inputs Prepare(const Scenario& sc, unsigned seed) {
    Inputs in;
    in.sc = sc;
    std::mt19937 rng(seed);
    in.h = BuildStep(sc, rng);
    const int64_t wkv = int64_t{sc.num_kv_heads} * sc.head_dim;
    const int64_t wq = int64_t{sc.num_heads} * sc.head_dim;
    // The step's own K/V rows (the tail of every sequence) are written by StoreKv with the
    // step's slot_mapping; the prefix rows by an earlier "store" step.
    size_t slot = 0;
    for (size_t i = 0; i < sc.seqs.size(); ++i) {
      const SeqSpec& sq = sc.seqs[i];
      const int id = sq.data_id >= 0 ? sq.data_id : static_cast<int>(i);
      std::mt19937 data_rng(seed * 7919u + static_cast<unsigned>(id));
      const int kv = sq.prefix + sq.q_len;
      const std::vector<float> k = RandBf16(data_rng, kv * wkv), v = RandBf16(data_rng, kv * wkv);
      const std::vector<float> qs = RandBf16(data_rng, sq.q_len * wq);
      in.qv.insert(in.qv.end(), qs.begin(), qs.end());
      for (int p = 0; p < kv; ++p, ++slot) {
        const bool is_new = in.h.all_is_new[slot] != 0;
        auto& dk = is_new ? in.new_k : in.old_k;
        auto& dv = is_new ? in.new_v : in.old_v;
        dk.insert(dk.end(), k.begin() + p * wkv, k.begin() + (p + 1) * wkv);
        dv.insert(dv.end(), v.begin() + p * wkv, v.begin() + (p + 1) * wkv);
        if (!is_new) in.old_slots.push_back(in.h.all_slots[slot]);
      }
    }
    return in;
  }

  // The attention output of the prepared inputs on one backend. planned: the step's plan comes
  // from PlanAttention first and an earlier "layer" (another window and soft-cap, its own
  // output) runs it before this one, as in a model's forward.
  std::vector<float> RunOn(Backend& be, bool gpu, const Inputs& in, bool planned = false,
                           KvLayer* pools_out = nullptr) {
    const Scenario& sc = in.sc;
    const HostStep& h = in.h;
    const int H = sc.num_heads, KVH = sc.num_kv_heads, D = sc.head_dim;
    const int64_t n = h.query_start.back();
    const int64_t wkv = int64_t{KVH} * D, wq = int64_t{H} * D;
    AttentionParams p;
    p.num_heads = H;
    p.num_kv_heads = KVH;
    p.head_dim = D;
    p.scale = 1.f / std::sqrt(static_cast<float>(D));
    p.sliding_window = sc.window;
    p.logit_softcap = sc.softcap;
    if (sc.sinks) {  // around the scores' size: some heads' sinks dominate, some barely count
      std::vector<float> sinks(static_cast<size_t>(H));
      for (int i = 0; i < H; ++i)
        sinks[static_cast<size_t>(i)] = -3.f + 1.5f * static_cast<float>(i % 7);
      p.sinks = HostF32(Shape{H}, sinks);
      if (gpu) p.sinks = be.Upload(p.sinks);
    }
    const int64_t n_old = static_cast<int64_t>(in.old_slots.size());
    // bf16 pools, or quantized ones (kv_quant_) on both backends: the CPU reads the quantized
    // rows exactly, so it is the "dequantize the pages, then attend" reference.
    const auto alloc_pool = [&]() {
      if (kv_quant_ == KvQuant::kNone) {
        return be.Alloc(DType::kBF16, Shape{h.num_blocks, sc.block_size, KVH, D});
      }
      return be.Alloc(DType::kU8, Shape{h.num_blocks, sc.block_size, KVH,
                                        static_cast<int64_t>(KvQuantRowBytes(kv_quant_, D))});
    };
    KvLayer layer{alloc_pool(), alloc_pool(), kv_quant_, kv_quant_};
    if (kv_quant_ != KvQuant::kNone && gpu) {  // unwritten rows never read: poison them
      EXPECT_EQ(cudaMemset(layer.k.data(), 0x7f, layer.k.nbytes()), cudaSuccess);
      EXPECT_EQ(cudaMemset(layer.v.data(), 0x7f, layer.v.nbytes()), cudaSuccess);
    }
    if (pools_out != nullptr) *pools_out = layer;
    auto rows = [&](const std::vector<float>& v, int64_t r) {
      Tensor t = HostF32(Shape{std::max<int64_t>(r, 1), wkv},
                         v.empty() ? std::vector<float>(static_cast<size_t>(wkv)) : v);
      Tensor u = gpu ? be.Upload(t) : t;
      return u.Slice(0, r);
    };
    if (n_old > 0) {
      AttentionMeta store = MakeMeta(be, h, in.old_slots, sc.block_size);
      be.StoreKv(rows(in.old_k, n_old), rows(in.old_v, n_old), store, layer);
    }
    AttentionMeta meta = MakeMeta(be, h, h.slot_mapping, sc.block_size);
    be.StoreKv(rows(in.new_k, n), rows(in.new_v, n), meta, layer);
    Tensor q = HostF32(Shape{n, wq}, in.qv);
    if (gpu) q = be.Upload(q);
    Tensor out = be.Alloc(be.act_dtype(), Shape{n, wq});
    if (gpu) Poison(*gpu_, out);
    if (planned) {
      meta.plan = be.PlanAttention(meta, AttentionShape{H, KVH, D, kv_quant_, kv_quant_});
      AttentionParams other = p;
      other.sliding_window = sc.window > 0 ? 0 : 5;
      other.logit_softcap = sc.softcap > 0 ? 0.f : 20.f;
      be.Attention(q, layer, meta, other, be.Alloc(be.act_dtype(), Shape{n, wq}));
    }
    be.Attention(q, layer, meta, p, out);
    return gpu ? GpuValues(*gpu_, out) : CpuValues(out);
  }

  // Returns the normalized error of the GPU output vs the CPU's.
  double Run(const Scenario& sc, unsigned seed) {
    const Inputs in = Prepare(sc, seed);
    return NormalizedError(RunOn(*gpu_, true, in), RunOn(cpu_, false, in));
  }

  KvQuant kv_quant_ = KvQuant::kNone;  // the pools RunOn allocates (--kv-quant)
};

TEST_F(CudaAttentionTest, MatchesCpu) {
  std::vector<Scenario> scenarios = {
      {"decode batch, split-KV, gqa 4",
       32,
       8,
       128,
       16,
       0,
       0.f,
       {{0, 1}, {2, 1}, {16, 1}, {37, 1}, {999, 1}}},
      MixedPrefillDecode(),
      {"1000-token prefill, mha", 4, 4, 128, 16, 0, 0.f, {{0, 1000}}},
      {"d256, gqa 2, softcap, window", 8, 4, 256, 16, 7, 50.f, {{3, 17}, {40, 1}, {0, 97}}},
      {"chunked prefill on a prefix, window 32, block 7", 16, 4, 128, 7, 32, 0.f, {{100, 33}}},
      {"single token, mha d64", 2, 2, 64, 16, 0, 0.f, {{0, 1}}},
      {"long decode, gqa 8, split-KV", 32, 4, 128, 16, 0, 0.f, {{3000, 1}, {1, 1}}},
      {"decode window 100 long context", 8, 1, 128, 16, 100, 0.f, {{2000, 1}, {50, 1}}},
      // Head dims only the generic kernel serves: the model goldens' d16 (cuda_golden_test),
      // Phi-2's d80, Phi-3's d96.
      {"d16, gqa 2, window 8 (golden models)", 4, 2, 16, 16, 8, 0.f, {{0, 70}, {69, 1}, {6, 1}}},
      {"d80, mha, block 7", 4, 4, 80, 7, 0, 0.f, {{0, 17}, {120, 1}}},
      {"d96, gqa 4, split-KV", 8, 2, 96, 16, 0, 0.f, {{0, 97}, {1500, 1}}},
  };
  // 64 decodes with random contexts (the batch-64 decode of the benchmark, smaller).
  Scenario many{"64 decodes, gqa 4", 32, 8, 128, 16, 0, 0.f, {}};
  std::mt19937 rng(11);
  for (int i = 0; i < 64; ++i) many.seqs.push_back({static_cast<int>(rng() % 300), 1});
  scenarios.push_back(many);
  unsigned seed = 100;
  for (const Scenario& sc : scenarios) {
    const double err = Run(sc, seed++);
    EXPECT_LT(err, kTolRounded) << sc.name;
    std::printf("  %-50s normalized error %.2e\n", sc.name, err);
  }
}

// Decode-kernel tests: each test's backend is fresh (GpuTest), so the variants it sets
// (CudaBackend::set_tuning) end with it.
class CudaDecodeAttentionTest : public CudaAttentionTest {
 protected:
  // Decodes (q_len 1) over contexts of 1, 3, 17, 97, 1000 and 8191 keys: one key, less than a
  // page, page + 1, several lane-group iterations, and split ranges that divide nothing.
  static std::vector<SeqSpec> AwkwardContexts() {
    std::vector<SeqSpec> seqs;
    for (int ctx : {1, 3, 17, 97, 1000, 8191}) seqs.push_back({ctx - 1, 1});
    return seqs;
  }
  static std::vector<Scenario> DecodeScenarios() {
    const std::vector<SeqSpec> ctx = AwkwardContexts();
    return {
        {"gqa 4, d128, block 16", 32, 8, 128, 16, 0, 0.f, ctx},
        {"gqa 8, d64, block 7", 16, 2, 64, 7, 0, 0.f, ctx},
        {"mha, d256, block 16", 4, 4, 256, 16, 0, 0.f, ctx},
        {"gqa 8, d256, block 7", 8, 1, 256, 7, 0, 0.f, ctx},
        {"gqa 4, d128, block 7, window 100", 8, 2, 128, 7, 100, 0.f, ctx},
        {"gqa 3, d128, softcap 30", 12, 4, 128, 16, 0, 30.f, ctx},
        {"gqa 2, d64, window 1000, softcap 50", 4, 2, 64, 16, 1000, 50.f, ctx},
        {"mha, d128, block 7, window 1", 2, 2, 128, 7, 1, 0.f, ctx},
    };
  }
};

TEST_F(CudaDecodeAttentionTest, MatchesCpu) {
  unsigned seed = 300;
  for (const Scenario& sc : DecodeScenarios()) {
    const Inputs in = Prepare(sc, seed++);
    const std::vector<float> ref = RunOn(cpu_, false, in);
    // Automatic splits, no split, odd splits, and more splits than some sequences have keys;
    // every kernel variant (CUDA-core: keys per iteration x prefetch; tensor-core, which
    // serves head_dim 64 / 128 and leaves 256 to the CUDA-core kernel: tiles x prefetch).
    struct Variant {
      int mma, unroll, prefetch;
    };
    const Variant variants[] = {{0, 0, 1}, {0, 2, 1}, {0, 2, 0}, {0, 4, 0},
                                {1, 1, 1}, {1, 1, 0}, {1, 2, 0}};
    // Splits 3, 12 and 16 merge in a thread-block cluster on Hopper (12 and 16: non-portable
    // cluster sizes) or in the combine kernel (cluster 0); 64 always takes the combine kernel.
    for (int splits : {0, 1, 3, 12, 16, 64}) {
      for (const Variant& v : variants) {
        std::vector<float> clustered;
        for (int cluster : {1, 0}) {
          if (cluster == 0 && (splits == 1 || splits == 64)) continue;
          CudaTuning t;
          t.attn_decode_splits = splits;
          t.attn_decode_unroll = v.unroll;
          t.attn_decode_prefetch = v.prefetch != 0;
          t.attn_decode_mma = v.mma != 0;
          t.attn_cluster_merge = cluster != 0;
          gpu_->set_tuning(t);
          const std::vector<float> out = RunOn(*gpu_, true, in);
          const double err = NormalizedError(out, ref);
          if (cluster == 1) clustered = out;
          if (cluster == 0 && splits != 0) {  // the same merge arithmetic in either place
            EXPECT_TRUE(out == clustered) << sc.name << ", splits " << splits << ", mma " << v.mma
                                          << ": cluster merge != combine kernel";
          }
          EXPECT_LT(err, kTolRounded)
              << sc.name << ", splits " << splits << ", mma " << v.mma << ", unroll " << v.unroll
              << ", prefetch " << v.prefetch << ", cluster " << cluster;
          if (v.unroll == 0 || (v.mma == 1 && v.unroll == 1 && v.prefetch == 1)) {
            std::printf("  %-40s %s splits %2d cluster %d  normalized error %.2e\n", sc.name,
                        v.mma ? "mma " : "cuda", splits, cluster, err);
          }
        }
      }
    }
  }
}

// Batch 1 with 8 kv heads plans 16 splits merged in a thread-block cluster on Hopper (what the
// H200's batch-1 figures rely on; the cluster size the device allows is queried, so a device that
// allows fewer blocks per cluster falls back to the combine kernel instead of failing).
TEST_F(CudaDecodeAttentionTest, BatchOnePlansClusterMerge) {
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 9) GTEST_SKIP() << "thread-block clusters need Hopper";
  const CudaTuning defaults;
  cuda::PagedAttentionArgs a{};
  a.num_seqs = 1;
  a.num_tokens = 1;
  a.max_query_len = 1;
  a.max_kv_len = 131072;  // the graph runner plans for the model's whole context
  a.num_heads = 32;
  a.num_kv_heads = 8;
  a.head_dim = 128;
  a.block_size = 16;
  const cuda::PagedAttentionPlan plan = cuda::PlanDecodeAttention(a, gpu_->num_sms(), defaults);
  EXPECT_TRUE(plan.decode_cluster);
  EXPECT_EQ(plan.num_splits, 16);
  a.num_seqs = a.num_tokens = 8;  // batch 8: 64 x splits blocks do not fit one per SM
  EXPECT_FALSE(cuda::PlanDecodeAttention(a, gpu_->num_sms(), defaults).decode_cluster);
}

// gpt-oss's attention sinks in every kernel that ends a softmax: decode with one split, with
// splits merged in a cluster or by the combine kernel (tensor-core and CUDA-core), the generic
// kernel (and its combine), the tensor-core prefill.
TEST_F(CudaDecodeAttentionTest, SinksMatchCpu) {
  std::vector<Scenario> scenarios = {
      {"decode, gqa 8, d64, window 128", 64, 8, 64, 16, 128, 0.f, AwkwardContexts(), true},
      {"decode, gqa 4, d128", 32, 8, 128, 16, 0, 0.f, AwkwardContexts(), true},
      {"prefill + decode, gqa 8, d64",
       16,
       2,
       64,
       16,
       0,
       0.f,
       {{0, 3}, {5, 17}, {0, 130}, {20, 1}, {300, 1}},
       true},
      {"prefill, window 128, d64", 16, 2, 64, 16, 128, 0.f, {{0, 400}, {100, 40}}, true},
      {"d80 (generic kernel), split-KV", 4, 2, 80, 16, 0, 0.f, {{0, 17}, {1500, 1}}, true},
  };
  unsigned seed = 500;
  for (const Scenario& sc : scenarios) {
    const Inputs in = Prepare(sc, seed++);
    const std::vector<float> ref = RunOn(cpu_, false, in);
    struct Variant {
      int splits, mma, cluster, decode;
    };
    for (const Variant v : {Variant{0, 1, 1, 1}, Variant{1, 1, 1, 1}, Variant{12, 1, 1, 1},
                            Variant{12, 1, 0, 1}, Variant{64, 0, 0, 1}, Variant{0, 0, 0, 0}}) {
      CudaTuning t;
      t.attn_decode_splits = v.splits;
      t.attn_decode_mma = v.mma != 0;
      t.attn_cluster_merge = v.cluster != 0;
      t.attn_decode = v.decode != 0;
      gpu_->set_tuning(t);
      const double err = NormalizedError(RunOn(*gpu_, true, in), ref);
      EXPECT_LT(err, kTolRounded) << sc.name << ", splits " << v.splits << ", mma " << v.mma
                                  << ", cluster " << v.cluster << ", decode " << v.decode;
      std::printf("  sinks: %-34s splits %2d mma %d cluster %d decode %d  error %.2e\n", sc.name,
                  v.splits, v.mma, v.cluster, v.decode, err);
    }
  }
}

// Quantized pools (--kv-quant fp8 / int8 / int4): StoreKv writes QuantizeKvRow's bytes, and every
// kernel (the tensor-core decode kernel's fp8 / int8 variants with and without prefetch, 1 or 2
// tiles, splits merged in a cluster or by the combine kernel; the generic kernel; the tensor-core
// prefill) reads them within rounding of the CPU, which attends over the dequantized values
// exactly: "dequantize the pages, run the reference".
TEST_F(CudaDecodeAttentionTest, QuantizedPoolsMatchCpu) {
  const std::vector<Scenario> decodes = DecodeScenarios();
  const std::vector<Scenario> scenarios = {
      decodes[0],  // gqa 4, d128
      decodes[1],  // gqa 8, d64, block 7: blocks not 8-byte aligned (the generic kernel)
      decodes[2],  // d256: the generic kernel
      decodes[4],  // window 100
      decodes[5],  // softcap, gqa 3
      decodes[6],  // d64, window 1000, softcap
      MixedPrefillDecode(),
      {"chunked prefill on a prefix, window 32, block 7", 16, 4, 128, 7, 32, 0.f, {{100, 33}}},
      {"d80, mha, block 7 (generic kernel)", 4, 4, 80, 7, 0, 0.f, {{0, 17}, {120, 1}}},
  };
  struct Variant {
    int splits, unroll, prefetch, cluster, decode, prefill;
  };
  const Variant variants[] = {
      {0, 0, 1, 1, 1, 1},  {1, 1, 1, 1, 1, 1},  {3, 1, 0, 1, 1, 1}, {16, 2, 0, 1, 1, 1},
      {16, 2, 0, 0, 1, 1}, {64, 1, 1, 0, 1, 1}, {0, 0, 1, 1, 0, 0},
  };
  unsigned seed = 700;
  for (KvQuant q : {KvQuant::kFp8, KvQuant::kInt8, KvQuant::kInt4}) {
    kv_quant_ = q;
    for (const Scenario& sc : scenarios) {
      const Inputs in = Prepare(sc, seed++);
      KvLayer cpu_pools, gpu_pools;
      const std::vector<float> ref = RunOn(cpu_, false, in, false, &cpu_pools);
      for (const Variant& v : variants) {
        CudaTuning t;
        t.attn_decode_splits = v.splits;
        t.attn_decode_unroll = v.unroll;
        t.attn_decode_prefetch = v.prefetch != 0;
        t.attn_cluster_merge = v.cluster != 0;
        t.attn_decode = v.decode != 0;
        t.attn_prefill = v.prefill != 0;
        gpu_->set_tuning(t);
        const double err = NormalizedError(RunOn(*gpu_, true, in, false, &gpu_pools), ref);
        EXPECT_LT(err, kTolRounded) << KvQuantName(q) << " " << sc.name << ", splits " << v.splits
                                    << ", unroll " << v.unroll << ", prefetch " << v.prefetch
                                    << ", cluster " << v.cluster << ", decode " << v.decode;
        if (v.splits == 0) {
          std::printf("  %-5s %-48s decode %d  error %.2e\n", std::string(KvQuantName(q)).c_str(),
                      sc.name, v.decode, err);
        }
      }
      // The stored rows: the CPU's bytes (QuantizeKvRow of the same bf16 values).
      const int D = sc.head_dim, KVH = sc.num_kv_heads;
      const KvQuantBlock blk(q, D, sc.block_size, KVH);
      for (int pool = 0; pool < 2; ++pool) {
        const Tensor& g = pool == 0 ? gpu_pools.k : gpu_pools.v;
        const Tensor& c = pool == 0 ? cpu_pools.k : cpu_pools.v;
        std::vector<uint8_t> got(static_cast<size_t>(g.nbytes()));
        gpu_->CopyToHost(g, got.data());
        const auto* want = static_cast<const uint8_t*>(c.data());
        for (int32_t slot : in.h.all_slots) {
          const size_t b = static_cast<size_t>(slot / sc.block_size) * blk.BlockBytes();
          const int off = slot % sc.block_size;
          for (int h = 0; h < KVH; ++h) {
            ASSERT_EQ(0, std::memcmp(got.data() + b + blk.Codes(off, h),
                                     want + b + blk.Codes(off, h), blk.code_bytes))
                << KvQuantName(q) << " " << sc.name << " slot " << slot;
            ASSERT_EQ(0, std::memcmp(got.data() + b + blk.Scales(off, h),
                                     want + b + blk.Scales(off, h), blk.scale_bytes))
                << KvQuantName(q) << " " << sc.name << " slot " << slot;
          }
        }
      }
    }
  }
}

// The generic kernel (attn_decode=0) still serves decode steps correctly.
TEST_F(CudaDecodeAttentionTest, GenericKernelMatchesCpu) {
  CudaTuning t;
  t.attn_decode = false;
  gpu_->set_tuning(t);
  const Scenario sc = DecodeScenarios()[0];
  const double err = Run(sc, 400);
  EXPECT_LT(err, kTolRounded) << sc.name;
  std::printf("  generic kernel, %-30s normalized error %.2e\n", sc.name, err);
}

// A sequence's output rows do not depend on the rest of the batch: bit-identical to the same
// sequence run alone (same data, different pages), for a fixed split count.
TEST_F(CudaDecodeAttentionTest, BatchedRowsEqualSingleSequence) {
  // On bf16 pools, and on fp8 ones (d128: the tensor-core kernel's fp8 variant; d64 at block 7:
  // the generic kernel decoding its tiles).
  for (KvQuant q : {KvQuant::kNone, KvQuant::kFp8}) {
    kv_quant_ = q;
    for (const Scenario& base : {DecodeScenarios()[0], DecodeScenarios()[1]}) {
      const Inputs batch_in = Prepare(base, 500);
      const std::pair<int, int> configs[] = {{0, 1}, {0, 4}, {1, 1}, {1, 4}};  // (mma, splits)
      for (auto [mma, splits] : configs) {
        // Quantized pools without the tensor-core kernel take the generic one, whose split
        // count follows the batch (not attn_decode_splits): no bitwise batch invariance there.
        if (q != KvQuant::kNone && mma == 0) continue;
        CudaTuning t;
        t.attn_decode_splits = splits;
        t.attn_decode_mma = mma != 0;
        gpu_->set_tuning(t);
        const std::vector<float> batched = RunOn(*gpu_, true, batch_in);
        const int64_t row = int64_t{base.num_heads} * base.head_dim;
        for (size_t i = 0; i < base.seqs.size(); ++i) {
          Scenario one = base;
          one.seqs = {{base.seqs[i].prefix, 1, static_cast<int>(i)}};
          const std::vector<float> single = RunOn(*gpu_, true, Prepare(one, 500));
          ASSERT_EQ(static_cast<int64_t>(single.size()), row);
          const std::vector<float> slice(batched.begin() + static_cast<int64_t>(i) * row,
                                         batched.begin() + static_cast<int64_t>(i + 1) * row);
          EXPECT_TRUE(slice == single)
              << KvQuantName(q) << " " << base.name << ", mma " << mma << ", splits " << splits
              << ", sequence " << i << " (context " << base.seqs[i].prefix + 1 << ")";
        }
      }
    }
  }
}

// Steps with multi-token query tiles take the tensor-core kernel (flash_prefill.cuh). Its P.V mma
// rounds the softmax weights P (in [0, 1]) to bf16: each weight is off by <= 2^-9 relative, so an
// output row (a weighted mean of V rows) moves by <= 2^-9 of the mean |V| in the worst case and
// by far less on average (independent rounding errors over many keys partly cancel), the same
// order as the final bf16 rounding that kTolRounded already budgets (2^-9 per element). The
// running sum l is kept in f32 from the unrounded weights; its mismatch with the rounded ones is
// the mean of those per-weight errors, again <= 2^-9. So the same kTolRounded bound applies.
TEST_F(CudaAttentionTest, PrefillMatchesCpu) {
  std::vector<Scenario> scenarios = {
      {"prompt 1 + prompt 3, gqa 4", 32, 8, 128, 16, 0, 0.f, {{0, 1}, {0, 3}}},
      {"prompt 17, gqa 4", 32, 8, 128, 16, 0, 0.f, {{0, 17}}},
      {"prompt 97, gqa 4, block 7", 32, 8, 128, 7, 0, 0.f, {{0, 97}}},
      {"prompt 1000, gqa 4", 32, 8, 128, 16, 0, 0.f, {{0, 1000}}},
      {"prompt 4096, gqa 4 (8 heads)", 8, 2, 128, 16, 0, 0.f, {{0, 4096}}},
      {"chunk 256 on a 700 prefix, gqa 8", 16, 2, 128, 16, 0, 0.f, {{700, 256}}},
      {"chunk 33 on a 100 prefix, block 7, window 32", 16, 4, 128, 7, 32, 0.f, {{100, 33}}},
      {"mha, d64", 4, 4, 64, 16, 0, 0.f, {{0, 300}}},
      {"gqa 8, d64, block 7", 16, 2, 64, 7, 0, 0.f, {{0, 130}, {40, 70}}},
      {"gqa 2, d256, softcap 30", 8, 4, 256, 16, 0, 30.f, {{0, 200}}},
      {"mha, d256, window 50, chunk on prefix", 4, 4, 256, 7, 50, 0.f, {{150, 90}, {0, 5}}},
      {"gqa 3 (126-row tiles), window 17", 12, 4, 128, 16, 17, 0.f, {{0, 260}}},
      {"softcap 50 + window 64, gqa 4", 32, 8, 128, 16, 64, 50.f, {{10, 300}}},
      {"mixed: prefills, chunks and decodes",
       32,
       8,
       128,
       16,
       0,
       0.f,
       {{0, 3}, {5, 17}, {0, 97}, {20, 1}, {130, 1}, {64, 64}, {0, 129}, {999, 2}}},
  };
  unsigned seed = 500;
  for (const Scenario& sc : scenarios) {
    const double err = Run(sc, seed++);
    EXPECT_LT(err, kTolRounded) << sc.name;
    std::printf("  %-50s normalized error %.2e\n", sc.name, err);
  }
}

// A step planned once (Backend::PlanAttention: the kernel choice, the query-tile table, the split
// scratch) and run by several layers with their own windows and soft-caps gives each layer
// exactly what planning that call alone gives: prefill (tensor-core), mixed, decode (split and
// cluster-merged) and the generic kernel.
TEST_F(CudaAttentionTest, OnePlanServesEveryLayer) {
  const std::vector<Scenario> scenarios = {
      {"prompt 97, gqa 4, block 7", 32, 8, 128, 7, 0, 0.f, {{0, 97}}},
      {"mixed, window 32, softcap 50",
       32,
       8,
       128,
       16,
       32,
       50.f,
       {{0, 3}, {5, 17}, {0, 97}, {20, 1}, {130, 1}, {999, 2}}},
      {"64 decodes", 32, 8, 128, 16, 0, 0.f, std::vector<SeqSpec>(64, SeqSpec{200, 1})},
      {"batch-1 decode, long context", 32, 8, 128, 16, 0, 0.f, {{3000, 1}}},
      {"decode batch, split-KV, d64", 16, 2, 64, 16, 0, 0.f, {{0, 1}, {37, 1}, {999, 1}}},
      {"d80 (generic kernel), chunks", 4, 4, 80, 7, 8, 0.f, {{0, 17}, {120, 1}, {30, 40}}},
  };
  for (const bool generic : {false, true}) {
    CudaTuning t = gpu_->tuning();
    t.attn_prefill = t.attn_decode = !generic;
    gpu_->set_tuning(t);
    unsigned seed = 900;
    for (const Scenario& sc : scenarios) {
      const Inputs in = Prepare(sc, seed++);
      const std::vector<float> alone = RunOn(*gpu_, true, in);
      const std::vector<float> planned = RunOn(*gpu_, true, in, /*planned=*/true);
      EXPECT_EQ(planned, alone) << sc.name << (generic ? " (generic kernels)" : "");
    }
  }
}

// Which kernel and block shape PlanPagedAttention picks (host only: runs without a GPU).
TEST(CudaAttentionPlanTest, PrefillKernelAndTile) {
  auto step = [](int tokens, int max_q, int head_dim) {
    cuda::PagedAttentionArgs a;
    a.num_seqs = 1;
    a.num_tokens = tokens;
    a.max_query_len = max_q;
    a.max_kv_len = 8192;
    a.num_heads = 32;
    a.num_kv_heads = 8;
    a.head_dim = head_dim;
    a.block_size = 16;
    return a;
  };
  constexpr int kSms = 132;
  const CudaTuning t;  // the defaults
  // 4096-token prompt: 64 tiles of 256 rows (64 tokens x 4 heads) x 8 kv heads = 512 blocks.
  cuda::PagedAttentionPlan p = cuda::PlanPagedAttention(step(4096, 4096, 128), kSms, t);
  EXPECT_TRUE(p.flash);
  EXPECT_EQ(p.flash_tile.warps, 8);
  EXPECT_EQ(p.flash_tile.m_tiles, 2);
  EXPECT_EQ(p.q_per_tile, 64);
  EXPECT_EQ(p.num_splits, 1);
  // 512-token chunk: 8x2 would make 64 blocks (< 3/4 of 132 SMs), 8x1 makes 128.
  p = cuda::PlanPagedAttention(step(512, 512, 128), kSms, t);
  EXPECT_EQ(p.flash_tile.warps, 8);
  EXPECT_EQ(p.flash_tile.m_tiles, 1);
  EXPECT_EQ(p.q_per_tile, 32);
  // 256 tokens: 8x1 would make 64 blocks, 4x1 makes 128.
  p = cuda::PlanPagedAttention(step(256, 256, 128), kSms, t);
  EXPECT_EQ(p.flash_tile.warps, 4);
  EXPECT_EQ(p.flash_tile.m_tiles, 1);
  EXPECT_EQ(p.q_per_tile, 16);
  // 2048 tokens: 8x2 256 blocks.
  p = cuda::PlanPagedAttention(step(2048, 2048, 128), kSms, t);
  EXPECT_EQ(p.flash_tile.m_tiles, 2);
  // head_dim 256: one row tile a warp.
  p = cuda::PlanPagedAttention(step(4096, 4096, 256), kSms, t);
  EXPECT_TRUE(p.flash);
  EXPECT_EQ(p.flash_tile.warps, 8);
  EXPECT_EQ(p.flash_tile.m_tiles, 1);
  // Decode-only steps, head dims the tensor-core kernel lacks, and the A/B switch: old kernel.
  EXPECT_FALSE(cuda::PlanPagedAttention(step(64, 1, 128), kSms, t).flash);
  EXPECT_FALSE(cuda::PlanPagedAttention(step(4096, 4096, 80), kSms, t).flash);
  CudaTuning generic;
  generic.attn_prefill = false;
  EXPECT_FALSE(cuda::PlanPagedAttention(step(4096, 4096, 128), kSms, generic).flash);
  // A forced tile, and head_dim 256 keeping one row tile a warp under it.
  CudaTuning forced;
  ASSERT_TRUE(ApplyCudaTuneArg("attn_prefill_tile=4x2", &forced).ok());
  p = cuda::PlanPagedAttention(step(512, 512, 128), kSms, forced);
  EXPECT_EQ(p.flash_tile.warps, 4);
  EXPECT_EQ(p.flash_tile.m_tiles, 2);
  EXPECT_EQ(p.q_per_tile, 32);
  p = cuda::PlanPagedAttention(step(512, 512, 256), kSms, forced);
  EXPECT_EQ(p.flash_tile.m_tiles, 1);
}

}  // namespace
}  // namespace loom
