// CUDA graph replay of decode steps == the eager forward: greedy ids identical and logits equal
// up to split-KV reduction order, on the default model and on a random 2-layer Gemma-3-like model
// (sliding window, qk norms, sandwich norms), for batches that pad (3 -> 4, 5 -> 8), shrink
// (a sequence finishes) and cross block boundaries. Skips without a GPU.
#include "runtime/cuda_graph_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/engine.h"
#include "model/dummy_weights.h"
#include "runtime/test_models.h"
#include "sample/step_sampler.h"

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
                                            double* max_abs_logit,
                                            std::vector<std::vector<float>>* all) {
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
    s.num_logits = 1;
    pre.seqs.push_back(s);
  }
  auto out = ExecuteToHost(runner, pre);
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
      s.num_logits = 1;
      plan.seqs.push_back(s);
      rows.push_back(i);
    }
    if (plan.seqs.empty()) break;
    auto step = ExecuteToHost(runner, plan);
    EXPECT_TRUE(step.ok()) << step.status().message();
    if (!step.ok()) break;
    all->push_back(*step);
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* row = step->data() + r * vocab;
      for (int v = 0; v < vocab; ++v)
        *max_abs_logit = std::max<double>(*max_abs_logit, std::fabs(row[v]));
      Seq& q = seqs[rows[r]];
      q.computed += 1;
      q.generated.push_back(Argmax(row, vocab));
    }
  }
  std::vector<std::vector<int32_t>> ids;
  for (auto& q : seqs) ids.push_back(q.generated);
  return ids;
}

// Decode steps over the sequences still short of max_new tokens, one token each, until none is;
// next(plan, idx) returns each plan row's token (row r is seqs[idx[r]]). Returns every sequence's
// generated ids, or {} when a step returned the wrong number of tokens.
template <typename Next>
std::vector<std::vector<int32_t>> DecodeAll(std::vector<Seq>& seqs, Next next) {
  for (;;) {
    StepPlan plan;
    plan.block_size = kBlockSize;
    std::vector<size_t> idx;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (static_cast<int>(seqs[i].generated.size()) >= seqs[i].max_new) continue;
      plan.seqs.push_back(ScheduledSeq{
          RequestId{i}, {seqs[i].generated.back()}, seqs[i].computed, seqs[i].blocks, 1});
      idx.push_back(i);
    }
    if (plan.seqs.empty()) break;
    const std::vector<int32_t> ids = next(plan, idx);
    if (ids.size() != idx.size()) return {};
    for (size_t r = 0; r < idx.size(); ++r) {
      seqs[idx[r]].computed += 1;
      seqs[idx[r]].generated.push_back(ids[r]);
    }
  }
  std::vector<std::vector<int32_t>> ids;
  for (auto& q : seqs) ids.push_back(q.generated);
  return ids;
}

// Row parameters for the StepSampler's three ways: the plain argmax where the logits are, a
// seeded draw there (T 0.8, top-p 0.9), and a greedy row sampled on the host: BuildLogitEdits
// refuses a logit_bias that lists one id twice (the API validator never lets one through), so
// the row's logits are copied to the host, where a zero bias leaves them as they are.
SamplingParams DeviceGreedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}
SamplingParams DeviceDraw(uint64_t seed) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.9f;
  p.seed = seed;
  return p;
}
SamplingParams HostGreedy() {
  SamplingParams p = DeviceGreedy();
  p.logit_bias = {{0, 0.0f}, {0, 0.0f}};
  return p;
}

// Executes `plan` on `runner` and samples row r with params[r], after outputs[r] (the step
// counter of a draw); returns each row's token (or {} on an error).
std::vector<int32_t> SampleStep(DecoderRunner& runner, StepSampler& sampler, const StepPlan& plan,
                                const std::vector<SamplingParams>& params,
                                const std::vector<std::span<const int32_t>>& outputs) {
  std::vector<int32_t> ids;
  auto logits = runner.Execute(plan);
  EXPECT_TRUE(logits.ok()) << logits.status().message();
  if (!logits.ok()) return ids;
  std::vector<StepRow> rows(plan.seqs.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    rows[r].request = plan.seqs[r].request_id;
    rows[r].ctx.params = &params[r];
    rows[r].ctx.output = outputs[r];
    rows[r].ctx.seed = params[r].seed.value_or(0);
  }
  for (StatusOr<SampleResult>& t : sampler.Sample(plan, rows, *logits, runner)) {
    EXPECT_TRUE(t.ok()) << t.status().message();
    ids.push_back(t.ok() ? t->token : -100);
  }
  return ids;
}

// Greedy decode with the ids chosen where the logits are (StepSampler over the runner): every
// row the plain argmax or, with `mixed`, every other row a host row (its argmax taken there), so
// steps exercise the runner's GreedyIds (graphs: the lookahead), the device argmax, the one copy
// and the gathered copy of the host rows. `stats`: the sampler's, after the run.
std::vector<std::vector<int32_t>> RunRunnerGreedy(DecoderRunner& runner, std::vector<Seq> seqs,
                                                  bool mixed, StepSamplerStats* stats = nullptr) {
  StepSampler sampler(StepSamplerConfig{runner.vocab_size(), 1, true});
  auto step = [&](const StepPlan& plan) {
    std::vector<SamplingParams> params;
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      params.push_back(mixed && i % 2 == 1 ? HostGreedy() : DeviceGreedy());
    }
    return SampleStep(runner, sampler, plan, params,
                      std::vector<std::span<const int32_t>>(plan.seqs.size()));
  };
  StepPlan pre;
  pre.block_size = kBlockSize;
  for (size_t i = 0; i < seqs.size(); ++i) {
    pre.seqs.push_back(ScheduledSeq{RequestId{i}, seqs[i].prompt, 0, seqs[i].blocks, 1});
  }
  std::vector<int32_t> first = step(pre);
  if (first.size() != seqs.size()) return {};
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].computed = static_cast<int>(seqs[i].prompt.size());
    seqs[i].generated.push_back(first[i]);
  }
  auto ids =
      DecodeAll(seqs, [&](const StepPlan& plan, const std::vector<size_t>&) { return step(plan); });
  EXPECT_GT(sampler.stats().rows_on_device, 0);
  // Mixed runs have host rows when there is a second sequence (every other row is one).
  EXPECT_EQ(sampler.stats().rows_on_host > 0, mixed && seqs.size() > 1);
  if (stats != nullptr) *stats = sampler.stats();
  return ids;
}

// Prefill (one sequence a step), then decode with every row drawn where the logits are
// (DeviceDraw(seeds[i]), step = tokens generated so far) or, with `mixed`, sequence i's rows
// drawn / the plain argmax / a host argmax by i % 3. Each step is run again through Execute (the
// same KV writes) and every draw must equal the kernel's draw of that row alone from those
// logits, every argmax their argmax. Returns the generated ids.
std::vector<std::vector<int32_t>> RunRunnerDraws(DecoderRunner& runner, CudaBackend& gpu,
                                                 std::vector<Seq> seqs,
                                                 const std::vector<uint64_t>& seeds, bool mixed) {
  const int vocab = runner.vocab_size();
  StepSampler sampler(StepSamplerConfig{vocab, 1, true});
  // Plan row r is sequence idx[r]; returns each row's next token.
  auto step = [&](const StepPlan& plan, const std::vector<size_t>& idx) {
    std::vector<SamplingParams> params;
    std::vector<std::span<const int32_t>> outputs;
    for (size_t r = 0; r < idx.size(); ++r) {
      const int kind = mixed ? static_cast<int>(idx[r] % 3) : 0;
      params.push_back(kind == 0   ? DeviceDraw(seeds[idx[r]])
                       : kind == 1 ? DeviceGreedy()
                                   : HostGreedy());
      outputs.emplace_back(seqs[idx[r]].generated);
    }
    std::vector<int32_t> ids;
    const std::vector<int32_t> tokens = SampleStep(runner, sampler, plan, params, outputs);
    if (tokens.size() != idx.size()) return ids;
    auto logits = ExecuteToHost(runner, plan);
    EXPECT_TRUE(logits.ok()) << logits.status().message();
    if (!logits.ok()) return ids;
    const int64_t rows = static_cast<int64_t>(idx.size());
    Tensor dev = gpu.Alloc(DType::kF32, Shape{rows, vocab});
    gpu.CopyFromHost(logits->data(), dev);
    Tensor one = gpu.Alloc(DType::kI32, Shape{1});
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits->data() + r * vocab;
      if (!params[r].greedy()) {
        const DrawParams draw{0.8f, 0, 0.9f, 0.0f, seeds[idx[r]], seqs[idx[r]].generated.size()};
        gpu.SampleRows(dev, std::vector<int32_t>{static_cast<int32_t>(r)},
                       std::vector<DrawParams>{draw}, one);
        int32_t alone = -100;
        gpu.CopyToHost(one, &alone);
        EXPECT_EQ(tokens[r], alone) << "row " << r;
      } else {
        EXPECT_EQ(tokens[r], Argmax(row, vocab)) << "row " << r;
      }
      ids.push_back(tokens[r]);
    }
    return ids;
  };
  for (size_t i = 0; i < seqs.size(); ++i) {
    StepPlan pre;
    pre.block_size = kBlockSize;
    pre.seqs.push_back(ScheduledSeq{RequestId{i}, seqs[i].prompt, 0, seqs[i].blocks, 1});
    const std::vector<int32_t> first = step(pre, {i});
    if (first.size() != 1) return {};
    seqs[i].computed = static_cast<int>(seqs[i].prompt.size());
    seqs[i].generated.push_back(first[0]);
  }
  auto ids = DecodeAll(seqs, step);
  EXPECT_GT(sampler.stats().rows_on_device, 0);
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
    if (Status s = CudaBackend::CheckGpu(0); !s.ok()) GTEST_SKIP() << s.message();
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
    DecoderRunner no_lookahead(make(), num_blocks, kBlockSize, DType::kBF16);
    CudaGraphOptions opt;
    opt.max_batch = 8;
    opt.lookahead_max_rows = 8;  // every batch here: finishing sequences discard steps
    auto accel = std::make_unique<CudaGraphRunner>(graphs.model(), graphs.kv(), kBlockSize,
                                                   backend_.get(), opt);
    const CudaGraphRunner* g = accel.get();
    graphs.set_step_accelerator(std::move(accel));
    opt.lookahead_max_rows = 0;
    no_lookahead.set_step_accelerator(std::make_unique<CudaGraphRunner>(
        no_lookahead.model(), no_lookahead.kv(), kBlockSize, backend_.get(), opt));
    const std::vector<Seq> seqs = MakeSeqs(num_seqs, eager.vocab_size(), max_new);
    double max_abs = 0;
    std::vector<std::vector<float>> logits;
    // Each run starts with a prefill that rewrites every KV slot the run reads.
    const auto want = RunGreedy(eager, seqs, &max_abs, &logits);
    EXPECT_EQ(RunRunnerGreedy(eager, seqs, /*mixed=*/false), want);
    EXPECT_EQ(RunRunnerGreedy(eager, seqs, /*mixed=*/true), want);
    // All-greedy decode steps queue their successor (lookahead; not across a block boundary):
    // most are taken; those before a sequence finishes (the batch changes) are discarded.
    EXPECT_EQ(RunRunnerGreedy(graphs, seqs, /*mixed=*/false), want);
    EXPECT_GT(g->lookahead_hits(), 0);
    if (num_seqs > 1) {
      EXPECT_LT(g->lookahead_hits(), g->lookaheads());
    }
    EXPECT_EQ(RunRunnerGreedy(graphs, seqs, /*mixed=*/true), want);
    EXPECT_EQ(RunRunnerGreedy(no_lookahead, seqs, /*mixed=*/false), want);
    std::printf("  %d seqs: %lld lookahead steps, %lld taken\n", num_seqs,
                static_cast<long long>(g->lookaheads()),
                static_cast<long long>(g->lookahead_hits()));
  }

  std::unique_ptr<CudaBackend> backend_;
};

// The engine over graphs with the batch-1 lookahead vs without: the same tokens for every request
// while the plan changes under the queued steps — the first request is aborted with a step queued
// (whose K/V went to a block the next request's prefill takes over), a third arrives while the
// second decodes alone (a mixed step), the last ends by max_tokens — with the scheduler and KV
// integrity checked every step; and most queued steps were taken.
TEST_F(CudaGraphRunnerTest, EngineLookaheadKeepsEveryRequestsTokens) {
  struct Run {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<FinishReason> reasons;
    int64_t lookaheads = 0, taken = 0;
  };
  auto run = [&](int lookahead_rows) {
    const ModelConfig c = test_models::GemmaLikeConfig(1001);
    auto model = MakeDummyModelFromConfig(c, backend_.get(), DType::kBF16, 11, "test");
    const int num_blocks = 64, block_size = 16;
    auto runner =
        std::make_unique<DecoderRunner>(std::move(model), num_blocks, block_size, DType::kBF16);
    CudaGraphOptions opt;
    opt.max_batch = 4;
    opt.lookahead_max_rows = lookahead_rows;
    auto accel = std::make_unique<CudaGraphRunner>(runner->model(), runner->kv(), block_size,
                                                   backend_.get(), opt);
    const CudaGraphRunner* g = accel.get();
    runner->set_step_accelerator(std::move(accel));
    EngineConfig cfg;
    cfg.num_blocks = num_blocks;
    cfg.block_size = block_size;
    cfg.max_batched_tokens = 256;
    cfg.max_num_seqs = 4;
    cfg.check_integrity_every_step = true;
    cfg.model_fingerprint = "test";
    cfg.kv_dtype = "bf16";
    auto engine = Engine::Create(cfg, std::move(runner));
    CHECK_OK(engine.status());
    Engine& e = **engine;
    auto request = [](int n, int first, int max_tokens) {
      Request r;
      for (int t = 0; t < n; ++t) r.prompt.push_back((first + 37 * t) % 1000 + 1);
      r.params.max_tokens = max_tokens;
      r.params.temperature = 0;
      r.params.ignore_eos = true;
      return r;
    };
    std::vector<RequestHandle> h;
    Run out;
    auto drain = [&] {
      out.tokens.resize(h.size());
      out.reasons.resize(h.size(), FinishReason::kAbort);
      for (size_t i = 0; i < h.size(); ++i) {
        while (auto chunk = h[i].stream->TryPop()) {
          for (const TokenOutput& t : chunk->tokens) out.tokens[i].push_back(t.token);
          if (chunk->finish_reason) out.reasons[i] = *chunk->finish_reason;
        }
      }
    };
    auto submit = [&](Request r) {
      auto handle = e.Submit(std::move(r));
      CHECK_OK(handle.status());
      h.push_back(*handle);
    };
    submit(request(5, 3, 60));  // decodes alone, then is aborted
    for (int s = 0; s < 20; ++s) e.Step();
    e.Abort(h[0].id);
    e.Step();                      // takes the abort in; nothing left to run
    submit(request(21, 500, 25));  // reuses the freed blocks; decodes alone, then with the third
    for (int s = 0; s < 12; ++s) e.Step();
    submit(request(9, 77, 40));  // arrives while the second decodes; ends alone by max_tokens
    while (e.Step()) drain();
    drain();
    out.lookaheads = g->lookaheads();
    out.taken = g->lookahead_hits();
    return out;
  };
  const Run plain = run(0);
  const Run ahead = run(1);
  ASSERT_EQ(plain.tokens.size(), 3u);
  EXPECT_EQ(ahead.tokens, plain.tokens);
  EXPECT_EQ(ahead.reasons, plain.reasons);
  EXPECT_EQ(plain.reasons, (std::vector<FinishReason>{FinishReason::kAbort, FinishReason::kLength,
                                                      FinishReason::kLength}));
  EXPECT_EQ(plain.tokens[1].size(), 25u);
  EXPECT_EQ(plain.tokens[2].size(), 40u);
  EXPECT_EQ(plain.lookaheads, 0);
  EXPECT_GT(ahead.taken, 20);
  EXPECT_LT(ahead.taken, ahead.lookaheads);  // the abort and the arrival discarded some
  std::printf("  engine: %lld lookahead steps, %lld taken\n",
              static_cast<long long>(ahead.lookaheads), static_cast<long long>(ahead.taken));
}

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

// Seeded draws at temperature 0.8 (top-p 0.9) taken by the runner on the device (issue 7): each
// equals the kernel's draw of that row alone, in all-draw and mixed steps, eager and replayed; a
// request's tokens are the same alone and in a batch of five when both replay the same padded
// graph (8 rows). Across padded sizes they may not be: the forward itself is not bit-identical
// between batch sizes (e.g. the 1-row and 8-row GEMV sum in different orders; measured on the
// H200: a 1001-token model's draws alone (graph 1) and in a batch of 5 (graph 8) part from the
// second token), and a flat distribution's draw moves with the last bits of the logits.
TEST_F(CudaGraphRunnerTest, DeviceDrawsAreTheSameAloneAndBatched) {
  auto make = [&] {
    const ModelConfig c = test_models::GemmaLikeConfig(1001);
    return MakeDummyModelFromConfig(c, backend_.get(), DType::kBF16, 13, "test");
  };
  const int num_blocks = 64;
  DecoderRunner eager(make(), num_blocks, kBlockSize, DType::kBF16);
  DecoderRunner graphs(make(), num_blocks, kBlockSize, DType::kBF16);
  CudaGraphOptions opt;
  opt.max_batch = 8;
  opt.batch_sizes = {8};  // alone and batched replay the same graph
  graphs.set_step_accelerator(std::make_unique<CudaGraphRunner>(graphs.model(), graphs.kv(),
                                                                kBlockSize, backend_.get(), opt));
  const std::vector<Seq> seqs = MakeSeqs(5, eager.vocab_size(), 24);
  const std::vector<uint64_t> seeds = {11, 22, 33, 44, 55};
  const auto batched_eager = RunRunnerDraws(eager, *backend_, seqs, seeds, /*mixed=*/false);
  const auto batched = RunRunnerDraws(graphs, *backend_, seqs, seeds, /*mixed=*/false);
  RunRunnerDraws(eager, *backend_, seqs, seeds, /*mixed=*/true);
  RunRunnerDraws(graphs, *backend_, seqs, seeds, /*mixed=*/true);
  ASSERT_EQ(batched.size(), seqs.size());
  int same_eager = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto alone = RunRunnerDraws(graphs, *backend_, {seqs[i]}, {seeds[i]}, false);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_EQ(alone[0], batched[i]) << "sequence " << i;
    same_eager += batched_eager[i] == batched[i] ? 1 : 0;
  }
  std::printf(
      "  draws: %d of %zu sequences identical eager vs graphs (not required: split-KV "
      "order)\n",
      same_eager, seqs.size());
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
  ScheduledSeq a{RequestId{0}, {1, 2, 3}, 0, {0}, 1};
  ScheduledSeq b{RequestId{1}, {4}, 5, {1}, 1};
  mixed.seqs = {a, b};
  Tensor out;
  auto took = g.TryForward(mixed, &out);
  ASSERT_TRUE(took.ok());
  EXPECT_FALSE(*took);
  EXPECT_EQ(g.num_graphs(), 0);
  StepPlan too_long;  // more pages than the graphs hold
  too_long.block_size = kBlockSize;
  ScheduledSeq l{RequestId{0}, {1}, 200, std::vector<int32_t>(13, 0), 1};
  too_long.seqs = {l};
  took = g.TryForward(too_long, &out);
  ASSERT_TRUE(took.ok());
  EXPECT_FALSE(*took);
}

}  // namespace
}  // namespace loom
