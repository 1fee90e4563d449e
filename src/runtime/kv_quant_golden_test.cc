// Quantized KV caches (`--kv-quant`) on every architecture's golden model (CPU): next-token
// distributions against the f32 cache along the model's own 200-token greedy trajectory, read
// back across chunked prefills; batched == solo and chunked == one step bit for bit per scheme.
// The bounds hold each scheme near its measured error (the table of docs/benchmarks.md: int8 is
// near lossless, fp8 near weight-fp8's KL, int4 visible) and fail if a scheme stopped being
// applied (its KL would be 0) or broke (KL of O(1)).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "runtime/golden_models.h"

namespace loom {
namespace {

constexpr int kBlock = 16;
constexpr int kTrajectory = 200;  // generated tokens after the golden's greedy prompt (ctx 256)
constexpr int kChunk = 48;        // prefill chunk: each chunk reads the earlier ones from the cache

std::vector<int32_t> GreedyPrompt(const std::string& name) {
  std::ifstream in(golden::ModelDir(name) / "golden.json");
  return nlohmann::json::parse(in)["greedy"]["prompt"].get<std::vector<int32_t>>();
}

std::vector<int32_t> Blocks(int first, int count) {
  std::vector<int32_t> b(static_cast<size_t>(count));
  std::iota(b.begin(), b.end(), first);
  return b;
}

struct Scheme {
  const char* name;
  KvFormat format;
  double max_mean_kl;  // over the trajectory's positions
  double min_top1;     // teacher-forced argmax agreement with the f32 cache
};

class KvQuantGoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto m = LoadModel(golden::ModelDir(GetParam()).string(), &backend_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    blocks_per_seq_ = (model_->config().max_position_embeddings + kBlock - 1) / kBlock;
  }

  // The f32 cache's greedy continuation of the golden's greedy prompt, decoded token by token.
  std::vector<int32_t> Trajectory() {
    std::vector<int32_t> ids = GreedyPrompt(GetParam());
    std::vector<KvLayer> kv = model_->AllocateKv(blocks_per_seq_, kBlock, DType::kF32);
    const std::vector<int32_t> blocks = Blocks(0, blocks_per_seq_);
    const int64_t vocab = model_->config().vocab_size;
    int32_t pos = 0;
    std::vector<int32_t> step(ids);
    while (static_cast<int>(ids.size()) < static_cast<int>(step.size()) + kTrajectory &&
           static_cast<int>(ids.size()) < model_->config().max_position_embeddings) {
      const std::vector<float> logits = golden::ForwardLogits(
          *model_, kv, {SeqSlice{step, pos, blocks, 1}}, kBlock, /*all_rows=*/false);
      const int32_t next = static_cast<int32_t>(
          std::max_element(logits.begin(), logits.begin() + vocab) - logits.begin());
      pos += static_cast<int32_t>(step.size());
      ids.push_back(next);
      step = {next};
    }
    return ids;
  }

  // Every row's logits of `ids` in chunks of `chunk` through a fresh cache of `format`.
  std::vector<float> ChunkedLogits(const KvFormat& format, const std::vector<int32_t>& ids,
                                   int chunk) {
    std::vector<KvLayer> kv = model_->AllocateKv(blocks_per_seq_, kBlock, format);
    const std::vector<int32_t> blocks = Blocks(0, blocks_per_seq_);
    std::vector<float> out;
    for (size_t at = 0; at < ids.size(); at += static_cast<size_t>(chunk)) {
      const size_t n = std::min(ids.size() - at, static_cast<size_t>(chunk));
      const std::span<const int32_t> part(ids.data() + at, n);
      const std::vector<float> l = golden::ForwardLogits(
          *model_, kv, {SeqSlice{part, static_cast<int32_t>(at), blocks, static_cast<int>(n)}},
          kBlock, /*all_rows=*/true);
      out.insert(out.end(), l.begin(), l.end());
    }
    return out;
  }

  CpuBackend backend_{2};
  std::unique_ptr<Model> model_;
  int blocks_per_seq_ = 0;
};

std::vector<double> LogSoftmax(const float* row, int64_t n) {
  const float mx = *std::max_element(row, row + n);
  double sum = 0;
  for (int64_t v = 0; v < n; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v) out[static_cast<size_t>(v)] = row[v] - lse;
  return out;
}

TEST_P(KvQuantGoldenTest, NextTokenDistributionsStayNearTheF32Cache) {
  const std::vector<int32_t> ids = Trajectory();
  ASSERT_GE(ids.size(), 100u);
  const int64_t vocab = model_->config().vocab_size;
  const std::vector<float> ref = ChunkedLogits(DType::kF32, ids, kChunk);
  const Scheme schemes[] = {
      // Measured worst over the 11 models (2026-12-07): mean KL 1.2e-4 / 3.9e-4 / 2.8e-3 /
      // 2.6e-3, top-1 97.5 / 90.0 / 79.1 / 80.6%.
      {"int8", {DType::kF32, KvQuant::kInt8, KvQuant::kInt8}, 5e-4, 0.95},
      {"fp8", {DType::kF32, KvQuant::kFp8, KvQuant::kFp8}, 1.5e-3, 0.85},
      {"int4", {DType::kF32, KvQuant::kInt4, KvQuant::kInt4}, 1e-2, 0.70},
      {"k:int8,v:int4", {DType::kF32, KvQuant::kInt8, KvQuant::kInt4}, 1e-2, 0.70},
      // turbo, worst over the 11 (2026-12-07): mean KL 7.9e-5 / 2.4e-2 / 8.2e-3, top-1 98.0 /
      // 42.8 / 64.7% (3-bit values move these tiny models' near-tied tops; the default model's
      // figures are in docs/benchmarks.md).
      {"turbo:k8v8", {DType::kF32, KvQuant::kRot8, KvQuant::kRot8}, 5e-4, 0.95},
      {"turbo:k8v3", {DType::kF32, KvQuant::kRot8, KvQuant::kRot3}, 5e-2, 0.35},
      {"turbo:k4v4", {DType::kF32, KvQuant::kRot4, KvQuant::kRot4}, 2e-2, 0.55},
  };
  double int8_kl = 0, int4_kl = 0;
  for (const Scheme& s : schemes) {
    const std::vector<float> got = ChunkedLogits(s.format, ids, kChunk);
    ASSERT_EQ(got.size(), ref.size());
    double kl_sum = 0, kl_max = 0;
    int agree = 0;
    const auto n = static_cast<int64_t>(ids.size());
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<double> p = LogSoftmax(ref.data() + t * vocab, vocab);
      const std::vector<double> q = LogSoftmax(got.data() + t * vocab, vocab);
      double kl = 0;
      for (int64_t v = 0; v < vocab; ++v) kl += std::exp(p[v]) * (p[v] - q[v]);
      kl_sum += kl;
      kl_max = std::max(kl_max, kl);
      agree += std::max_element(p.begin(), p.end()) - p.begin() ==
               std::max_element(q.begin(), q.end()) - q.begin();
    }
    const double mean = kl_sum / static_cast<double>(n);
    const double top1 = static_cast<double>(agree) / static_cast<double>(n);
    std::printf("  %-10s %-14s mean KL %.2e  max KL %.2e  top-1 %.1f%% over %lld positions\n",
                GetParam().c_str(), s.name, mean, kl_max, 100 * top1, static_cast<long long>(n));
    EXPECT_LE(mean, s.max_mean_kl) << s.name;
    EXPECT_GE(top1, s.min_top1) << s.name;
    EXPECT_GT(mean, 0.0) << s.name << ": the quantized cache changed nothing";
    if (std::string(s.name) == "int8") int8_kl = mean;
    if (std::string(s.name) == "int4") int4_kl = mean;
  }
  EXPECT_LT(int8_kl, int4_kl) << "8 bits should be closer than 4";
}

// Per scheme: the trajectory in one step equals it in chunks, and alone equals it batched beside
// another sequence (other blocks), bit for bit.
TEST_P(KvQuantGoldenTest, ChunkedAndBatchedEqualOneStepAloneBitExactly) {
  std::vector<int32_t> ids = GreedyPrompt(GetParam());
  for (int i = 0; static_cast<int>(ids.size()) < 90; ++i) ids.push_back((i * 37 + 11) % 250);
  std::vector<int32_t> other(70);
  for (int i = 0; i < 70; ++i) other[static_cast<size_t>(i)] = (i * 53 + 5) % 250;
  for (KvQuant q : {KvQuant::kFp8, KvQuant::kInt8, KvQuant::kInt4, KvQuant::kRot8, KvQuant::kRot4,
                    KvQuant::kRot3}) {
    SCOPED_TRACE(KvQuantName(q));
    const KvFormat f(DType::kF32, q, q);
    const std::vector<float> one = ChunkedLogits(f, ids, static_cast<int>(ids.size()));
    EXPECT_EQ(ChunkedLogits(f, ids, 16), one);
    // Batched: `other` first (blocks 0..), ids in blocks from 8 on.
    std::vector<KvLayer> kv = model_->AllocateKv(16, kBlock, f);
    const std::vector<int32_t> ob = Blocks(0, 8), ib = Blocks(8, 8);
    const std::vector<float> both =
        golden::ForwardLogits(*model_, kv,
                              {SeqSlice{other, 0, ob, static_cast<int>(other.size())},
                               SeqSlice{ids, 0, ib, static_cast<int>(ids.size())}},
                              kBlock, /*all_rows=*/true);
    const size_t skip = other.size() * static_cast<size_t>(model_->config().vocab_size);
    ASSERT_EQ(both.size(), skip + one.size());
    EXPECT_TRUE(std::equal(one.begin(), one.end(), both.begin() + static_cast<long>(skip)));
  }
}

INSTANTIATE_TEST_SUITE_P(Hf, KvQuantGoldenTest,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3",
                                           "phi3", "mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss"),
                         golden::ParamName);

}  // namespace
}  // namespace loom
