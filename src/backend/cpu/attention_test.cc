// Paged attention vs a naive double-precision reference over the same (pool-rounded) K/V.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_test_util.h"

namespace loom {
namespace {

using cpu_test::MakeI32;
using cpu_test::MakeTensor;
using cpu_test::RandomFloats;

struct SeqSpec {
  int prefix;  // tokens already cached before this step
  int q_len;   // tokens of this step (1 = decode)
};

struct Scenario {
  AttentionParams params;
  int block_size;
  DType kv_dtype;
  std::vector<SeqSpec> seqs;
  KvQuant k_quant = KvQuant::kNone;  // quantized pools (kv_dtype then unused for that pool)
  KvQuant v_quant = KvQuant::kNone;
  // Values replaced by their quantization round trip before they are stored (in unquantized
  // pools: the "dequantize the pages, run the f32 reference" side of a quantized run).
  KvQuant feed_k = KvQuant::kNone;
  KvQuant feed_v = KvQuant::kNone;
};

// Each (token, kv head) row of `x` (rows of num_kv_heads * head_dim) through QuantizeKvRow and
// DequantizeKvRow (and, for a rotated scheme, turned back).
void RoundTripRows(KvQuant q, int head_dim, std::vector<float>& x) {
  if (q == KvQuant::kNone) return;
  std::vector<uint8_t> row(KvQuantRowBytes(q, head_dim));
  for (size_t i = 0; i + static_cast<size_t>(head_dim) <= x.size(); i += head_dim) {
    QuantizeKvRow(q, x.data() + i, head_dim, row.data());
    DequantizeKvRow(q, row.data(), head_dim, x.data() + i);
    if (KvQuantRotated(q)) UnrotateKvRow(x.data() + i, head_dim);  // back from the turned domain
  }
}

// Builds pools holding every sequence's K/V (prefix written by an earlier StoreKv, the step's
// tokens by this step's StoreKv) on shuffled pages, runs Attention, checks vs the reference.
class AttentionRun {
 public:
  AttentionRun(const Scenario& sc, CpuBackend& backend, unsigned seed) : sc_(sc) {
    std::mt19937 rng(seed);
    const AttentionParams& p = sc.params;
    const int width_kv = p.num_kv_heads * p.head_dim;
    const int width_q = p.num_heads * p.head_dim;
    int total_pages = 0;
    for (const SeqSpec& s : sc.seqs)
      total_pages += (s.prefix + s.q_len + sc.block_size - 1) / sc.block_size;
    const int num_blocks = total_pages + 3;
    std::vector<int32_t> block_ids(static_cast<size_t>(num_blocks));
    std::iota(block_ids.begin(), block_ids.end(), 0);
    std::shuffle(block_ids.begin(), block_ids.end(), rng);
    const auto pool = [&](KvQuant q) {
      if (q == KvQuant::kNone) {
        return backend.Alloc(sc.kv_dtype,
                             Shape{num_blocks, sc.block_size, p.num_kv_heads, p.head_dim});
      }
      const auto row = static_cast<int64_t>(KvQuantRowBytes(q, p.head_dim));
      return backend.Alloc(DType::kU8, Shape{num_blocks, sc.block_size, p.num_kv_heads, row});
    };
    layer_.k = pool(sc.k_quant);
    layer_.v = pool(sc.v_quant);
    layer_.k_quant = sc.k_quant;
    layer_.v_quant = sc.v_quant;

    std::vector<int32_t> qstart{0}, kv_len, indptr{0}, indices, slots;
    std::vector<int32_t> prefix_slots;
    size_t next_block = 0;
    for (const SeqSpec& s : sc.seqs) {
      const int len = s.prefix + s.q_len;
      const int np = (len + sc.block_size - 1) / sc.block_size;
      std::vector<int32_t> pages(block_ids.begin() + static_cast<long>(next_block),
                                 block_ids.begin() + static_cast<long>(next_block + np));
      next_block += static_cast<size_t>(np);
      indices.insert(indices.end(), pages.begin(), pages.end());
      indptr.push_back(static_cast<int32_t>(indices.size()));
      kv_len.push_back(len);
      qstart.push_back(qstart.back() + s.q_len);
      // Per-sequence data from its own stream: the same sequence gets the same K/V/q in any batch.
      std::mt19937 srng(seed * 1000 + static_cast<unsigned>(seq_k_.size()));
      seq_k_.push_back(RandomFloats(srng, int64_t{len} * width_kv));
      seq_v_.push_back(RandomFloats(srng, int64_t{len} * width_kv));
      RoundTripRows(sc.feed_k, p.head_dim, seq_k_.back());
      RoundTripRows(sc.feed_v, p.head_dim, seq_v_.back());
      std::vector<float> q = RandomFloats(srng, int64_t{s.q_len} * width_q);
      qv_.insert(qv_.end(), q.begin(), q.end());
      for (int t = 0; t < len; ++t) {
        const int32_t slot = pages[t / sc.block_size] * sc.block_size + t % sc.block_size;
        (t < s.prefix ? prefix_slots : slots).push_back(slot);
      }
    }
    num_tokens_ = qstart.back();
    // Earlier steps: store the prefixes.
    std::vector<float> pk, pv, nk, nv;
    for (size_t s = 0; s < sc.seqs.size(); ++s) {
      const size_t split = static_cast<size_t>(sc.seqs[s].prefix) * width_kv;
      pk.insert(pk.end(), seq_k_[s].begin(), seq_k_[s].begin() + static_cast<long>(split));
      pv.insert(pv.end(), seq_v_[s].begin(), seq_v_[s].begin() + static_cast<long>(split));
      nk.insert(nk.end(), seq_k_[s].begin() + static_cast<long>(split), seq_k_[s].end());
      nv.insert(nv.end(), seq_v_[s].begin() + static_cast<long>(split), seq_v_[s].end());
    }
    if (!prefix_slots.empty()) {
      AttentionMeta pre;
      pre.slot_mapping = MakeI32(prefix_slots);
      const int64_t rows = static_cast<int64_t>(prefix_slots.size());
      backend.StoreKv(MakeTensor(DType::kF32, Shape{rows, width_kv}, pk),
                      MakeTensor(DType::kF32, Shape{rows, width_kv}, pv), pre, layer_);
    }
    meta_.num_seqs = static_cast<int>(sc.seqs.size());
    meta_.num_tokens = num_tokens_;
    meta_.block_size = sc.block_size;
    meta_.query_start = MakeI32(qstart);
    meta_.kv_len = MakeI32(kv_len);
    meta_.page_indptr = MakeI32(indptr);
    meta_.page_indices = MakeI32(indices);
    meta_.slot_mapping = MakeI32(slots);
    backend.StoreKv(MakeTensor(DType::kF32, Shape{num_tokens_, width_kv}, nk),
                    MakeTensor(DType::kF32, Shape{num_tokens_, width_kv}, nv), meta_, layer_);
    q_ = MakeTensor(DType::kF32, Shape{num_tokens_, width_q}, qv_);
    out_ = backend.Alloc(DType::kF32, Shape{num_tokens_, width_q});
    backend.Attention(q_, layer_, meta_, sc.params, out_);
    // The reference reads what quantized pools hold.
    for (auto& k : seq_k_) RoundTripRows(sc.k_quant, p.head_dim, k);
    for (auto& v : seq_v_) RoundTripRows(sc.v_quant, p.head_dim, v);
  }

  // Tolerance: outputs are convex combinations of O(1) values; f32 dot products of <= 256 terms
  // and exp/sum over <= ~300 keys accumulate a few hundred ulps at most (~1e-5 relative).
  void CheckAgainstReference() const {
    const AttentionParams& p = sc_.params;
    const int D = p.head_dim, group = p.num_heads / p.num_kv_heads;
    const int width_kv = p.num_kv_heads * D;
    int t = 0;
    int bad = 0;
    for (size_t s = 0; s < sc_.seqs.size(); ++s) {
      const int len = sc_.seqs[s].prefix + sc_.seqs[s].q_len;
      for (int j = 0; j < sc_.seqs[s].q_len; ++j, ++t) {
        const int pos = sc_.seqs[s].prefix + j;
        const int first = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
        for (int h = 0; h < p.num_heads; ++h) {
          const int g = h / group;
          std::vector<double> w;
          for (int key = first; key <= pos; ++key) {
            double dot = 0;
            for (int d = 0; d < D; ++d) {
              dot += static_cast<double>(qv_[static_cast<size_t>((t * p.num_heads + h) * D + d)]) *
                     Rounded(seq_k_[s][static_cast<size_t>(key * width_kv + g * D + d)]);
            }
            dot *= p.scale;
            if (p.logit_softcap > 0) dot = p.logit_softcap * std::tanh(dot / p.logit_softcap);
            w.push_back(dot);
          }
          double mx = *std::max_element(w.begin(), w.end());
          const bool sink = p.sinks.defined();
          const double sink_logit = sink ? p.sinks.data_as<const float>()[h] : 0.0;
          if (sink) mx = std::max(mx, sink_logit);
          double sum = sink ? std::exp(sink_logit - mx) : 0.0;  // a logit with no value
          for (double& x : w) sum += (x = std::exp(x - mx));
          for (int d = 0; d < D; ++d) {
            double ref = 0;
            for (int key = first; key <= pos; ++key) {
              ref += w[static_cast<size_t>(key - first)] *
                     Rounded(seq_v_[s][static_cast<size_t>(key * width_kv + g * D + d)]);
            }
            ref /= sum;
            const float got = out_.data_as<const float>()[(t * p.num_heads + h) * D + d];
            if (std::fabs(got - ref) > 5e-5 * (1 + std::fabs(ref)) && ++bad <= 3) {
              ADD_FAILURE() << "seq " << s << " q " << j << " head " << h << " dim " << d << ": "
                            << got << " vs " << ref << " (len " << len << ")";
            }
          }
        }
      }
    }
    EXPECT_EQ(bad, 0);
  }

  const Tensor& out() const { return out_; }
  int num_tokens() const { return num_tokens_; }

 private:
  double Rounded(float v) const {
    if (sc_.k_quant != KvQuant::kNone || sc_.v_quant != KvQuant::kNone) {
      CHECK(sc_.kv_dtype == DType::kF32) << "a half pool beside a quantized one: not tested";
      return v;  // quantized values are round-tripped in place; f32 pools hold them exactly
    }
    if (sc_.kv_dtype == DType::kF16) return F16ToF32(F32ToF16(v));
    if (sc_.kv_dtype == DType::kBF16) return Bf16ToF32(F32ToBf16(v));
    return v;
  }

  Scenario sc_;
  KvLayer layer_;
  AttentionMeta meta_;
  std::vector<std::vector<float>> seq_k_, seq_v_;
  std::vector<float> qv_;
  Tensor q_, out_;
  int num_tokens_ = 0;
};

AttentionParams Params(int heads, int kv_heads, int head_dim, int window = 0, float cap = 0) {
  AttentionParams p;
  p.num_heads = heads;
  p.num_kv_heads = kv_heads;
  p.head_dim = head_dim;
  p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  p.sliding_window = window;
  p.logit_softcap = cap;
  return p;
}

// Mixed step: a chunked prefill continuing a cached prefix, a fresh prefill, decodes.
const std::vector<SeqSpec> kMixed = {{37, 5}, {0, 23}, {70, 1}, {1, 1}, {16, 1}};

TEST(AttentionTest, GqaRatiosAndHeadDimsMatchReference) {
  CpuBackend backend(2);
  for (auto [heads, kv_heads] : {std::pair{4, 4}, std::pair{8, 2}, std::pair{8, 1}}) {
    // 40: the AVX2 P @ V kernel's 8-wide tail; 36: not a multiple of 8 (the generic loop).
    for (int d : {32, 36, 40, 64, 128, 256}) {
      AttentionRun run({Params(heads, kv_heads, d), 16, DType::kF32, kMixed}, backend, 1);
      SCOPED_TRACE(testing::Message() << heads << "/" << kv_heads << " heads, dim " << d);
      run.CheckAgainstReference();
    }
  }
}

TEST(AttentionTest, SlidingWindowSoftcapOddBlockSizeAndHalfPools) {
  CpuBackend backend(2);
  for (DType kv : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int block_size : {5, 16}) {
      SCOPED_TRACE(testing::Message() << DTypeName(kv) << " block " << block_size);
      AttentionRun a({Params(8, 2, 64, /*window=*/7), block_size, kv, kMixed}, backend, 2);
      a.CheckAgainstReference();
      AttentionRun b({Params(4, 1, 128, 0, /*cap=*/5.0f), block_size, kv, kMixed}, backend, 3);
      b.CheckAgainstReference();
    }
  }
}

// gpt-oss's attention sinks: a learned logit per head in each softmax, around the scores' size
// (some heads' sinks dominate, others barely count), with windows, GQA, both code paths.
TEST(AttentionTest, SinksJoinEverySoftmax) {
  CpuBackend vec(2);
  CpuBackend scalar(CpuBackendOptions{.num_threads = 1, .force_scalar = true});
  for (CpuBackend* backend : {&vec, &scalar}) {
    for (int window : {0, 6}) {
      SCOPED_TRACE(testing::Message()
                   << (backend == &vec ? "vector" : "scalar") << " window " << window);
      AttentionParams p = Params(8, 2, 64, window);
      const std::vector<float> sinks = {-3.f, 0.f, 0.5f, 2.f, 4.f, -1.f, 1.f, 8.f};
      p.sinks = MakeTensor(DType::kF32, Shape{8}, sinks);
      AttentionRun run({p, 16, DType::kBF16, kMixed}, *backend, 12);
      run.CheckAgainstReference();
    }
  }
}

TEST(AttentionTest, ScalarPathMatchesReference) {
  CpuBackend backend(CpuBackendOptions{.num_threads = 1, .force_scalar = true});
  AttentionRun run({Params(8, 2, 64, 9, 0), 5, DType::kF16, kMixed}, backend, 4);
  run.CheckAgainstReference();
}

// Attention under the AVX-512 kernel set runs the AVX2 helpers: the same bits as an AVX2 backend.
TEST(AttentionTest, Avx512AndAvx2BackendsAgreeBitExactly) {
  if (cpu::Avx512DotKernels() == nullptr) GTEST_SKIP() << "no AVX-512F/VL/BW on this CPU";
  CpuBackend avx2(CpuBackendOptions{.num_threads = 1, .kernels = cpu::Avx2DotKernels()});
  CpuBackend avx512(CpuBackendOptions{.num_threads = 1, .kernels = cpu::Avx512DotKernels()});
  for (DType kv : {DType::kF32, DType::kF16}) {
    const Scenario sc{Params(8, 2, 64, 0, 0), 16, kv, kMixed};
    AttentionRun a(sc, avx2, 6);
    AttentionRun b(sc, avx512, 6);
    EXPECT_EQ(std::memcmp(a.out().data(), b.out().data(), a.out().nbytes()), 0) << DTypeName(kv);
  }
}

// A sequence's attention output alone equals its rows in the mixed batch, bit for bit (other
// pages, other thread count, other neighbours).
TEST(AttentionTest, SequenceAloneEqualsInMixedBatchBitExactly) {
  CpuBackend two(2), one(1);
  const Scenario mixed{Params(8, 2, 128, 0, 0), 16, DType::kF16, kMixed};
  Scenario solo = mixed;
  solo.seqs = {kMixed[0]};
  AttentionRun batch(mixed, two, 9);
  AttentionRun alone(solo, one, 9);
  ASSERT_EQ(alone.num_tokens(), kMixed[0].q_len);
  EXPECT_EQ(std::memcmp(alone.out().data(), batch.out().data(), alone.out().nbytes()), 0);
}

// Quantized pools (every scheme, K and V apart, awkward sizes: head_dim 16 and 96, odd block
// sizes, sliding windows, GQA, soft caps, both code paths) give exactly the outputs of f32 pools
// holding DequantizeKvRow's values: the kernels read the rows without a dequantized copy of the
// cache and without changing a bit. They also stay within the reference's tolerance.
TEST(AttentionTest, QuantizedPoolsEqualTheirDequantizedValuesBitExactly) {
  CpuBackend vec(2);
  CpuBackend scalar(CpuBackendOptions{.num_threads = 1, .force_scalar = true});
  struct Quant {
    KvQuant k, v;
  };
  const Quant quants[] = {{KvQuant::kFp8, KvQuant::kFp8},
                          {KvQuant::kInt8, KvQuant::kInt8},
                          {KvQuant::kInt4, KvQuant::kInt4},
                          {KvQuant::kInt8, KvQuant::kInt4},
                          {KvQuant::kNone, KvQuant::kFp8}};
  const AttentionParams shapes[] = {Params(8, 2, 128), Params(4, 2, 16, /*window=*/5),
                                    Params(6, 3, 96, 0, /*cap=*/5.0f), Params(8, 1, 64, 9)};
  for (CpuBackend* backend : {&vec, &scalar}) {
    for (const Quant& qz : quants) {
      for (const AttentionParams& p : shapes) {
        for (int block_size : {5, 16}) {
          SCOPED_TRACE(testing::Message() << (backend == &vec ? "vector" : "scalar") << " k "
                                          << KvQuantName(qz.k) << " v " << KvQuantName(qz.v)
                                          << " dim " << p.head_dim << " block " << block_size);
          Scenario quantized{p, block_size, DType::kF32, kMixed, qz.k, qz.v};
          Scenario dequantized{p, block_size, DType::kF32, kMixed};
          dequantized.feed_k = qz.k;
          dequantized.feed_v = qz.v;
          AttentionRun a(quantized, *backend, 21);
          AttentionRun b(dequantized, *backend, 21);
          ASSERT_EQ(std::memcmp(a.out().data(), b.out().data(), a.out().nbytes()), 0);
          a.CheckAgainstReference();
        }
      }
    }
  }
}

// Rotated (turbo) pools: attention turns q into the keys' rotated domain and its output back
// from the values', so it equals attention over the rows' unrotated decoded values up to f32
// rounding (the sums run in another basis: not bit for bit). Every pair of schemes, rotated K
// beside plain V and the reverse, power-of-two head dims, both code paths.
TEST(AttentionTest, TurboPoolsEqualAttentionOverTheirUnrotatedValues) {
  CpuBackend vec(2);
  CpuBackend scalar(CpuBackendOptions{.num_threads = 1, .force_scalar = true});
  struct Quant {
    KvQuant k, v;
  };
  const Quant quants[] = {{KvQuant::kRot8, KvQuant::kRot3},
                          {KvQuant::kRot4, KvQuant::kRot4},
                          {KvQuant::kRot8, KvQuant::kRot8},
                          {KvQuant::kRot8, KvQuant::kNone},
                          {KvQuant::kInt8, KvQuant::kRot3}};
  const AttentionParams shapes[] = {Params(8, 2, 128), Params(4, 2, 16, /*window=*/5),
                                    Params(6, 3, 64, 0, /*cap=*/5.0f)};
  for (CpuBackend* backend : {&vec, &scalar}) {
    for (const Quant& qz : quants) {
      for (const AttentionParams& p : shapes) {
        SCOPED_TRACE(testing::Message()
                     << (backend == &vec ? "vector" : "scalar") << " k " << KvQuantName(qz.k)
                     << " v " << KvQuantName(qz.v) << " dim " << p.head_dim);
        Scenario quantized{p, 5, DType::kF32, kMixed, qz.k, qz.v};
        Scenario dequantized{p, 5, DType::kF32, kMixed};
        dequantized.feed_k = qz.k;
        dequantized.feed_v = qz.v;
        AttentionRun a(quantized, *backend, 23);
        AttentionRun b(dequantized, *backend, 23);
        const float* x = a.out().data_as<const float>();
        const float* y = b.out().data_as<const float>();
        double err = 0, ref = 0;
        for (int64_t i = 0; i < a.out().numel(); ++i) {
          err = std::max(err, std::fabs(double{x[i]} - y[i]));
          ref = std::max(ref, std::fabs(double{y[i]}));
        }
        EXPECT_LT(err, 1e-5 * ref);
      }
    }
  }
}

}  // namespace
}  // namespace loom
