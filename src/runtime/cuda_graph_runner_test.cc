// CUDA graph replay of decode steps == the eager forward: greedy ids identical and logits equal
// up to split-KV reduction order, on the default model and on a random 2-layer Gemma-3-like model
// (sliding window, qk norms, sandwich norms), for batches that pad (3 -> 4, 5 -> 8), shrink
// (a sequence finishes) and cross block boundaries. Skips without a GPU.
#include "runtime/cuda_graph_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "model/dummy_weights.h"
#include "runtime/test_models.h"

namespace loom {
namespace {

constexpr int kBlockSize = 16;

struct Seq {
  std::vector<int32_t> prompt;
  std::vector<int32_t> blocks;
  std::vector<int32_t> generated;
  int computed = 0;
  int max_new = 0;
};

int Argmax(const float* row, int vocab) {
  return static_cast<int>(std::max_element(row, row + vocab) - row);
}

// Runs prefill then greedy decode of every seq on `runner`; returns the generated ids and the
// logits of every decode step.
std::vector<std::vector<int32_t>> RunGreedy(DecoderRunner& runner, std::vector<Seq> seqs,
                                      double* max_abs_logit, std::vector<std::vector<float>>* all) {
  const int vocab = runner.vocab_size();
  // Prefill: every prompt in one eager step.
  StepPlan pre;
  pre.block_size = kBlockSize;
  for (size_t i = 0; i < seqs.size(); ++i) {
    ScheduledSeq s;
    s.request_id = RequestId{i};
    s.tokens = seqs[i].prompt;
    s.start_pos = 0;
    s.block_table = seqs[i].blocks;
    s.sample = true;
    pre.seqs.push_back(s);
  }
  auto out = runner.Execute(pre);
  EXPECT_TRUE(out.ok()) << out.status().message();
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].computed = static_cast<int>(seqs[i].prompt.size());
    seqs[i].generated.push_back(Argmax(out->data() + i * vocab, vocab));
  }
  for (;;) {
    StepPlan plan;
    plan.block_size = kBlockSize;
    std::vector<size_t> rows;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (static_cast<int>(seqs[i].generated.size()) >= seqs[i].max_new) continue;
      ScheduledSeq s;
      s.request_id = RequestId{i};
      s.tokens = {seqs[i].generated.back()};
      s.start_pos = seqs[i].computed;
      s.block_table = seqs[i].blocks;
      s.sample = true;
      plan.seqs.push_back(s);
      rows.push_back(i);
    }
    if (plan.seqs.empty()) break;
    auto step = runner.Execute(plan);
    EXPECT_TRUE(step.ok()) << step.status().message();
    if (!step.ok()) break;
    all->push_back(*step);
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* row = step->data() + r * vocab;
      for (int v = 0; v < vocab; ++v) *max_abs_logit = std::max<double>(*max_abs_logit, std::fabs(row[v]));
      Seq& q = seqs[rows[r]];
      q.computed += 1;
      q.generated.push_back(Argmax(row, vocab));
    }
  }
  std::vector<std::vector<int32_t>> ids;
  for (auto& q : seqs) ids.push_back(q.generated);
  return ids;
}

// Greedy decode with the runner choosing the ids (ExecuteAndSample): every row kGreedy or, with
// `mixed`, every other row kLogits (its argmax taken here from the returned logits), so steps
// exercise the device argmax, the one-copy and the gathered copy of the remaining rows.
std::vector<std::vector<int32_t>> RunRunnerGreedy(DecoderRunner& runner, std::vector<Seq> seqs,
                                                  bool mixed) {
  const int vocab = runner.vocab_size();
  auto step = [&](const StepPlan& plan) {
    std::vector<RowSampling> modes;
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      modes.push_back(mixed && i % 2 == 1 ? RowSampling::kLogits : RowSampling::kGreedy);
    }
    std::vector<int32_t> ids;
    auto out = runner.ExecuteAndSample(plan, modes);
    EXPECT_TRUE(out.ok()) << out.status().message();
    if (!out.ok()) return ids;
    EXPECT_EQ(out->tokens.size(), modes.size());
    size_t host = 0;
    for (size_t k = 0; k < modes.size(); ++k) {
      const int32_t t = out->tokens[k];
      if (modes[k] == RowSampling::kLogits) {
        EXPECT_EQ(t, kTokenOnHost);
        ids.push_back(Argmax(out->logits.data() + host++ * vocab, vocab));
      } else {
        EXPECT_GE(t, 0);
        ids.push_back(t);
      }
    }
    EXPECT_EQ(out->logits.size(), host * static_cast<size_t>(vocab));
    return ids;
  };
  StepPlan pre;
  pre.block_size = kBlockSize;
  for (size_t i = 0; i < seqs.size(); ++i) {
    pre.seqs.push_back(ScheduledSeq{RequestId{i}, seqs[i].prompt, 0, seqs[i].blocks, true});
  }
  std::vector<int32_t> first = step(pre);
  if (first.size() != seqs.size()) return {};
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].computed = static_cast<int>(seqs[i].prompt.size());
    seqs[i].generated.push_back(first[i]);
  }
  for (;;) {
    StepPlan plan;
    plan.block_size = kBlockSize;
    std::vector<size_t> rows;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (static_cast<int>(seqs[i].generated.size()) >= seqs[i].max_new) continue;
      plan.seqs.push_back(ScheduledSeq{
          RequestId{i}, {seqs[i].generated.back()}, seqs[i].computed, seqs[i].blocks, true});
      rows.push_back(i);
    }
    if (plan.seqs.empty()) break;
    std::vector<int32_t> ids = step(plan);
    if (ids.size() != rows.size()) break;
    for (size_t r = 0; r < rows.size(); ++r) {
      seqs[rows[r]].computed += 1;
      seqs[rows[r]].generated.push_back(ids[r]);
    }
  }
  std::vector<std::vector<int32_t>> ids;
  for (auto& q : seqs) ids.push_back(q.generated);
  return ids;
}

std::vector<Seq> MakeSeqs(int n, int vocab, int max_new) {
  std::vector<Seq> seqs;
  int next_block = 0;
  for (int i = 0; i < n; ++i) {
    Seq s;
    const int len = 3 + 11 * i;  // 3, 14, 25, ...: some cross block boundaries while decoding
    for (int t = 0; t < len; ++t) s.prompt.push_back((7 + 31 * t + 101 * i) % vocab);
    s.max_new = max_new - 3 * i;  // sequences finish at different steps: the batch shrinks
    const int blocks = (len + s.max_new + kBlockSize - 1) / kBlockSize;
    for (int b = 0; b < blocks; ++b) s.blocks.push_back(next_block++);
    seqs.push_back(s);
  }
  return seqs;
}

class CudaGraphRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaBackend::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    auto be = CudaBackend::Create();
    ASSERT_TRUE(be.ok()) << be.status().message();
    backend_ = std::move(be).value();
  }

  // Same model twice (eager and graphs), same sequences: ids identical, logits close.
  void Compare(const std::function<std::unique_ptr<Model>()>& make, int num_seqs, int max_new) {
    auto eager_model = make();
    auto graph_model = make();
    const int vocab = eager_model->config().vocab_size;
    const int num_blocks = 64;
    DecoderRunner eager(std::move(eager_model), num_blocks, kBlockSize, DType::kBF16);
    DecoderRunner graphs(std::move(graph_model), num_blocks, kBlockSize, DType::kBF16);
    CudaGraphOptions opt;
    opt.max_batch = 8;
    auto accel = std::make_unique<CudaGraphRunner>(graphs.model(), graphs.kv(), kBlockSize,
                                                   backend_.get(), opt);
    CudaGraphRunner* g = accel.get();
    graphs.set_step_accelerator(std::move(accel));

    std::vector<Seq> seqs = MakeSeqs(num_seqs, vocab, max_new);
    double max_e = 0, max_g = 0;
    std::vector<std::vector<float>> le, lg;
    auto ids_e = RunGreedy(eager, seqs, &max_e, &le);
    auto ids_g = RunGreedy(graphs, seqs, &max_g, &lg);
    EXPECT_EQ(ids_e, ids_g);
    EXPECT_GT(g->replays(), 0);
    EXPECT_GE(g->num_graphs(), 1);
    ASSERT_EQ(le.size(), lg.size());
    double max_diff = 0;
    for (size_t s = 0; s < le.size(); ++s) {
      ASSERT_EQ(le[s].size(), lg[s].size());
      for (size_t i = 0; i < le[s].size(); ++i) {
        max_diff = std::max<double>(max_diff, std::fabs(le[s][i] - lg[s][i]));
      }
    }
    EXPECT_TRUE(std::isfinite(max_e) && max_e > 0);
    // bf16 activations: reduction order differs only in the split-KV combine.
    EXPECT_LE(max_diff, 0.05 * std::max(1.0, max_e)) << "max |logit| " << max_e;
    std::printf("  %d seqs: %zu decode steps, %lld replays, %d graphs, max |dlogit| %.3g of %.3g\n",
                num_seqs, le.size(), static_cast<long long>(g->replays()), g->num_graphs(),
                max_diff, max_e);
  }

  // Greedy ids chosen on the device (graphs and eager, all rows or every other row) == the host
  // argmax of the logits Execute returns.
  void CompareRunnerGreedy(const std::function<std::unique_ptr<Model>()>& make, int num_seqs,
                           int max_new) {
    const int num_blocks = 64;
    DecoderRunner eager(make(), num_blocks, kBlockSize, DType::kBF16);
    DecoderRunner graphs(make(), num_blocks, kBlockSize, DType::kBF16);
    CudaGraphOptions opt;
    opt.max_batch = 8;
    graphs.set_step_accelerator(std::make_unique<CudaGraphRunner>(graphs.model(), graphs.kv(),
                                                                  kBlockSize, backend_.get(), opt));
    const std::vector<Seq> seqs = MakeSeqs(num_seqs, eager.vocab_size(), max_new);
    double max_abs = 0;
    std::vector<std::vector<float>> logits;
    // Each run starts with a prefill that rewrites every KV slot the run reads.
    const auto want = RunGreedy(eager, seqs, &max_abs, &logits);
    EXPECT_EQ(RunRunnerGreedy(eager, seqs, /*mixed=*/false), want);
    EXPECT_EQ(RunRunnerGreedy(eager, seqs, /*mixed=*/true), want);
    EXPECT_EQ(RunRunnerGreedy(graphs, seqs, /*mixed=*/false), want);
    EXPECT_EQ(RunRunnerGreedy(graphs, seqs, /*mixed=*/true), want);
    EXPECT_GT(eager.rows_sampled_on_device(), 0);
    EXPECT_GT(graphs.rows_sampled_on_device(), 0);
  }

  std::unique_ptr<CudaBackend> backend_;
};

TEST_F(CudaGraphRunnerTest, DefaultModelGreedyMatchesEager) {
  const std::string dir = std::string(LOOM_SOURCE_DIR) + "/models/default";
  if (!std::filesystem::exists(dir + "/model.safetensors")) GTEST_SKIP() << "no " << dir;
  auto make = [&] {
    auto m = LoadModel(dir, backend_.get());
    CHECK_OK(m.status());
    return std::move(m).value();
  };
  Compare(make, 1, 40);
  Compare(make, 3, 40);
  Compare(make, 5, 30);
}

TEST_F(CudaGraphRunnerTest, RandomGemmaLikeGreedyMatchesEager) {
  auto make = [&] {
    const ModelConfig c = test_models::GemmaLikeConfig(512);
    return MakeDummyModelFromConfig(c, backend_.get(), DType::kBF16, 7, "test");
  };
  Compare(make, 1, 40);
  Compare(make, 3, 40);
  Compare(make, 5, 30);
}

TEST_F(CudaGraphRunnerTest, DeviceGreedyMatchesHostArgmax) {
  auto gemma_like = [&] {
    const ModelConfig c = test_models::GemmaLikeConfig(1001);
    return MakeDummyModelFromConfig(c, backend_.get(), DType::kBF16, 11, "test");
  };
  CompareRunnerGreedy(gemma_like, 1, 30);
  CompareRunnerGreedy(gemma_like, 5, 30);
  const std::string dir = std::string(LOOM_SOURCE_DIR) + "/models/default";
  if (!std::filesystem::exists(dir + "/model.safetensors")) return;
  auto deflt = [&] {
    auto m = LoadModel(dir, backend_.get());
    CHECK_OK(m.status());
    return std::move(m).value();
  };
  CompareRunnerGreedy(deflt, 3, 40);
}

TEST_F(CudaGraphRunnerTest, MixedStepsStayEager) {
  ModelConfig c;
  c.arch = "llama";
  c.vocab_size = 256;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.head_dim = 16;
  c.rotary_dim = 16;
  c.max_position_embeddings = 128;
  c.layer_window = {0, 0};
  c.rope_local = c.rope;
  auto model = MakeDummyModelFromConfig(c, backend_.get(), DType::kBF16, 1, "test");
  DecoderRunner runner(std::move(model), 16, kBlockSize, DType::kBF16);
  CudaGraphRunner g(runner.model(), runner.kv(), kBlockSize, backend_.get(), CudaGraphOptions{});
  StepPlan mixed;
  mixed.block_size = kBlockSize;
  ScheduledSeq a{RequestId{0}, {1, 2, 3}, 0, {0}, true};
  ScheduledSeq b{RequestId{1}, {4}, 5, {1}, true};
  mixed.seqs = {a, b};
  Tensor out;
  auto took = g.TryForward(mixed, &out);
  ASSERT_TRUE(took.ok());
  EXPECT_FALSE(*took);
  EXPECT_EQ(g.num_graphs(), 0);
  StepPlan too_long;  // more pages than the graphs hold
  too_long.block_size = kBlockSize;
  ScheduledSeq l{RequestId{0}, {1}, 200, std::vector<int32_t>(13, 0), true};
  too_long.seqs = {l};
  took = g.TryForward(too_long, &out);
  ASSERT_TRUE(took.ok());
  EXPECT_FALSE(*took);
}

}  // namespace
}  // namespace loom
