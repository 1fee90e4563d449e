// Embedding requests through the engine with the real decoder on the CPU backend (f32), on the
// qwen3 model golden (tests/goldens/models/qwen3, tools/goldens/make_model_goldens.py):
//   - the golden's hidden_1.f32 holds HF transformers' hidden_states for sequence 1, whose last
//     entry is last_hidden_state (after the final norm: transformers 5 replaces the last layer's
//     output with it), so pooling it is the expected embedding: last token, mean, first token;
//   - the engine promises bit-identical results alone or batched on the CPU: each embedding,
//     batched with other embeddings and generation requests, chunked over several steps, or
//     preempted and recomputed, equals its solo result bit for bit;
//   - tests/goldens/embeddings/qwen3/golden.json, when present (tools/goldens/embeddings_golden.py
//     on the GPU machine: transformers + sentence-transformers' Pooling and Normalize modules),
//     gives the normalized embeddings of three sequences under last and mean pooling.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "io/json_file.h"
#include "model/model.h"
#include "runtime/decoder_runner.h"
#include "runtime/noop_runner.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using Vec = std::vector<float>;

constexpr int kBlockSize = 16;

fs::path GoldenDir(const std::string& name) {
  return fs::path(LOOM_SOURCE_DIR) / "tests/goldens/models" / name;
}

std::vector<float> ReadF32(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  in.seekg(0, std::ios::end);
  std::vector<float> v(static_cast<size_t>(in.tellg()) / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

Vec Normalized(Vec v) {
  double ss = 0;
  for (float x : v) ss += static_cast<double>(x) * x;
  const double inv = 1.0 / std::sqrt(std::max(ss, 1e-24));
  for (float& x : v) x = static_cast<float>(x * inv);
  return v;
}

double Cosine(const Vec& a, const Vec& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

// Ours (normalized) against the reference (normalized): cosine >= 0.9999, the bar, and
// elementwise within 1e-4 (f32 on both sides; only the reduction order differs, as in
// runtime/golden_test.cc).
void ExpectSameEmbedding(const Vec& ours, const Vec& ref, const std::string& what) {
  ASSERT_EQ(ours.size(), ref.size()) << what;
  const Vec a = Normalized(ours), b = Normalized(ref);
  EXPECT_GE(Cosine(a, b), 0.9999) << what;
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[i]) - b[i]));
  EXPECT_LE(max_diff, 1e-4) << what;
}

struct Job {
  std::vector<TokenId> prompt;
  std::optional<Pooling> pooling;  // none: a generation request
  int max_tokens = 8;
};

class EmbeddingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = GoldenDir("qwen3");
    auto golden = LoadJsonFile((dir_ / "golden.json").string());
    ASSERT_TRUE(golden.ok()) << golden.status().ToString();
    golden_ = *golden;
  }

  std::vector<TokenId> Sequence(int k) const {
    return golden_["sequences"][static_cast<size_t>(k)].get<std::vector<TokenId>>();
  }

  // A fresh engine over the golden model (driven by Step() on this thread).
  std::unique_ptr<Engine> MakeEngine(int num_blocks, int max_batched_tokens, int max_num_seqs) {
    auto model = LoadModel(dir_.string(), &backend_);
    EXPECT_TRUE(model.ok()) << model.status().ToString();
    if (!model.ok()) return nullptr;
    auto runner =
        std::make_unique<DecoderRunner>(*std::move(model), num_blocks, kBlockSize, DType::kF32);
    EngineConfig cfg;
    cfg.num_blocks = num_blocks;
    cfg.block_size = kBlockSize;
    cfg.max_batched_tokens = max_batched_tokens;
    cfg.max_num_seqs = max_num_seqs;
    cfg.check_integrity_every_step = true;
    auto engine = Engine::Create(cfg, std::move(runner));
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  // Submits every job at once, runs the engine dry, returns each job's embedding (empty for
  // generation requests, which must end by stop or length).
  std::vector<Vec> Run(Engine& engine, const std::vector<Job>& jobs) {
    std::vector<RequestHandle> handles;
    for (const Job& job : jobs) {
      Request r;
      r.prompt = job.prompt;
      r.pooling = job.pooling;
      r.params.temperature = 0;
      r.params.max_tokens = job.max_tokens;
      r.params.ignore_eos = true;
      auto h = engine.Submit(std::move(r));
      EXPECT_TRUE(h.ok()) << h.status().ToString();
      if (!h.ok()) return {};
      handles.push_back(*h);
    }
    while (engine.Step()) {
    }
    std::vector<Vec> out;
    for (size_t i = 0; i < handles.size(); ++i) {
      std::optional<FinishReason> reason;
      Vec embedding;
      while (auto chunk = handles[i].stream->TryPop()) {
        if (chunk->finish_reason.has_value()) {
          reason = chunk->finish_reason;
          EXPECT_TRUE(chunk->error.ok()) << chunk->error.ToString();
          embedding = std::move(chunk->embedding);
        }
      }
      EXPECT_TRUE(reason.has_value()) << "job " << i << " did not finish";
      if (jobs[i].pooling.has_value()) {
        EXPECT_EQ(reason, FinishReason::kStop) << "job " << i;
        EXPECT_EQ(embedding.size(), static_cast<size_t>(engine.hidden_size())) << "job " << i;
      } else {
        EXPECT_TRUE(embedding.empty()) << "job " << i;
      }
      out.push_back(std::move(embedding));
    }
    const EngineStats stats = engine.stats();
    EXPECT_EQ(stats.kv_blocks_used, 0);  // every block is back...
    EXPECT_EQ(stats.active_rows, 0);
    return out;
  }

  Vec Solo(const Job& job) {
    std::unique_ptr<Engine> engine = MakeEngine(64, 2048, 8);
    if (engine == nullptr) return {};
    std::vector<Vec> out = Run(*engine, {job});
    return out.empty() ? Vec{} : out[0];
  }

  CpuBackend backend_{2};
  fs::path dir_;
  nlohmann::json golden_;
};

TEST_F(EmbeddingTest, PoolsTransformersLastHiddenState) {
  const std::vector<TokenId> ids = Sequence(1);
  const auto& h = golden_["hidden"];
  ASSERT_EQ(h["seq"].get<int>(), 1);
  const std::vector<int64_t> shape = h["shape"].get<std::vector<int64_t>>();  // [L + 1, n, d]
  ASSERT_EQ(shape.size(), 3u);
  const std::vector<float> all = ReadF32(dir_ / h["file"].get<std::string>());
  const int64_t n = shape[1], d = shape[2];
  ASSERT_EQ(n, static_cast<int64_t>(ids.size()));
  const float* last_hidden = all.data() + (shape[0] - 1) * n * d;  // [n, d], final-normed
  Vec ref_last(last_hidden + (n - 1) * d, last_hidden + n * d);
  Vec ref_first(last_hidden, last_hidden + d);
  Vec ref_mean(static_cast<size_t>(d), 0.f);
  for (int64_t j = 0; j < d; ++j) {
    double sum = 0;
    for (int64_t t = 0; t < n; ++t) sum += last_hidden[t * d + j];
    ref_mean[static_cast<size_t>(j)] = static_cast<float>(sum / static_cast<double>(n));
  }

  std::unique_ptr<Engine> engine = MakeEngine(64, 2048, 8);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->hidden_size(), d);
  std::vector<Vec> got =
      Run(*engine, {{ids, Pooling::kLast}, {ids, Pooling::kMean}, {ids, Pooling::kCls}});
  ASSERT_EQ(got.size(), 3u);
  // Unnormalized too: the engine returns the pooled hidden state itself.
  for (int64_t j = 0; j < d; ++j) {
    EXPECT_NEAR(got[0][static_cast<size_t>(j)], ref_last[static_cast<size_t>(j)], 1e-4) << j;
  }
  ExpectSameEmbedding(got[0], ref_last, "last");
  ExpectSameEmbedding(got[1], ref_mean, "mean");
  ExpectSameEmbedding(got[2], ref_first, "cls");
}

TEST_F(EmbeddingTest, BatchedAndChunkedEqualSoloBitwise) {
  const std::vector<Job> jobs = {
      {Sequence(2), Pooling::kMean},    // 70 tokens: several chunks
      {Sequence(1), std::nullopt, 12},  // a generation request alongside
      {Sequence(2), Pooling::kLast},    // the same text, other pooling
      {Sequence(0), Pooling::kMean},    // one token
      {{1, 5, 9, 200, 17}, std::nullopt, 20},
      {Sequence(1), Pooling::kCls},
      {Sequence(1), Pooling::kLast},
      {Sequence(2), Pooling::kMean},  // a duplicate: same vector again
  };
  std::vector<Vec> solo;
  for (const Job& job : jobs) solo.push_back(job.pooling.has_value() ? Solo(job) : Vec{});

  // 24 tokens a step: the 70-token inputs take 3+ steps next to decodes and other prompts.
  std::unique_ptr<Engine> engine = MakeEngine(64, 24, 8);
  ASSERT_NE(engine, nullptr);
  std::vector<Vec> batched = Run(*engine, jobs);
  ASSERT_EQ(batched.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!jobs[i].pooling.has_value()) continue;
    ASSERT_EQ(batched[i].size(), solo[i].size()) << i;
    EXPECT_EQ(std::memcmp(batched[i].data(), solo[i].data(), solo[i].size() * sizeof(float)), 0)
        << "job " << i << " (" << PoolingName(*jobs[i].pooling) << ") differs batched";
  }
  EXPECT_EQ(std::memcmp(batched[0].data(), batched[7].data(), batched[0].size() * sizeof(float)),
            0);
  // Nothing of the embeddings entered the prefix cache; the generation prompts did.
  EXPECT_EQ(engine->stats().prefix_cache_hits, 0u);
}

TEST_F(EmbeddingTest, PreemptedEmbeddingStartsOverAndMatchesSolo) {
  // 8 blocks of 16 = 128 tokens, 16 tokens a step. The generation request (100 + 20 tokens: all
  // 8 blocks at its end) is admitted first; the 70-token embedding joins in chunks and is
  // preempted (its blocks freed, back to the queue) each time the other needs a block, until the
  // generation is done and it runs through. Each restart pools from its first token again.
  std::vector<TokenId> long_prompt = Sequence(2);
  long_prompt.insert(long_prompt.end(), long_prompt.begin(), long_prompt.begin() + 30);
  const Job gen{long_prompt, std::nullopt, 20};
  const Job emb{Sequence(2), Pooling::kMean};
  const Vec solo = Solo(emb);
  std::unique_ptr<Engine> engine = MakeEngine(8, 16, 8);
  ASSERT_NE(engine, nullptr);
  std::vector<Vec> got = Run(*engine, {gen, emb});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_GT(engine->stats().preemptions, 0u);
  ASSERT_EQ(got[1].size(), solo.size());
  EXPECT_EQ(std::memcmp(got[1].data(), solo.data(), solo.size() * sizeof(float)), 0);
}

TEST_F(EmbeddingTest, SubmitErrors) {
  std::unique_ptr<Engine> engine = MakeEngine(64, 2048, 8);
  ASSERT_NE(engine, nullptr);
  Request too_long;
  too_long.prompt.assign(static_cast<size_t>(engine->max_model_len()) + 1, 5);
  too_long.pooling = Pooling::kLast;
  EXPECT_EQ(engine->Submit(too_long).status().code(), StatusCode::kOutOfRange);
  Request fits;  // exactly the context: an embedding generates nothing
  fits.prompt.assign(static_cast<size_t>(engine->max_model_len()), 5);
  fits.pooling = Pooling::kLast;
  EXPECT_TRUE(engine->Submit(fits).ok());
  Request empty;
  empty.pooling = Pooling::kMean;
  EXPECT_EQ(engine->Submit(empty).status().code(), StatusCode::kInvalidArgument);

  // A runner without hidden states refuses embeddings.
  EngineConfig cfg;
  cfg.num_blocks = 8;
  cfg.block_size = kBlockSize;
  auto noop = Engine::Create(cfg, std::make_unique<NoOpRunner>(&backend_, 32, 64, 8, kBlockSize));
  ASSERT_TRUE(noop.ok());
  Request r;
  r.prompt = {1, 2, 3};
  r.pooling = Pooling::kLast;
  EXPECT_EQ((*noop)->Submit(r).status().code(), StatusCode::kFailedPrecondition);
}

// The golden of tools/goldens/embeddings_golden.py (sentence-transformers' own pooling and
// normalization over transformers' last_hidden_state), when it has been generated.
TEST_F(EmbeddingTest, SentenceTransformersGolden) {
  const fs::path file = fs::path(LOOM_SOURCE_DIR) / "tests/goldens/embeddings/qwen3/golden.json";
  if (!fs::exists(file)) {
    GTEST_SKIP() << file
                 << " is missing: run tools/goldens/embeddings_golden.py on the GPU "
                    "machine";
  }
  auto golden = LoadJsonFile(file.string());
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  const std::map<std::string, Pooling> poolings = {{"last", Pooling::kLast},
                                                   {"mean", Pooling::kMean}};
  std::unique_ptr<Engine> engine = MakeEngine(64, 2048, 8);
  ASSERT_NE(engine, nullptr);
  int checked = 0;
  for (const auto& c : (*golden)["cases"]) {
    const std::string pooling = c["pooling"].get<std::string>();
    ASSERT_TRUE(poolings.contains(pooling)) << pooling;
    std::vector<Job> jobs;
    for (const auto& ids : c["inputs"]) {
      jobs.push_back({ids.get<std::vector<TokenId>>(), poolings.at(pooling)});
    }
    std::vector<Vec> got = Run(*engine, jobs);
    ASSERT_EQ(got.size(), c["embeddings"].size());
    for (size_t i = 0; i < got.size(); ++i) {
      const Vec ref = c["embeddings"][i].get<Vec>();
      ExpectSameEmbedding(got[i], ref, pooling + " input " + std::to_string(i));
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace loom
