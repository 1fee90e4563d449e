// The embedded default model (models/default, trained by tools/train_default_model) against its
// transformers golden (models/default/golden.json, written by train.py): tokenizer ids, the
// last-position logits and per-position argmax of two sequences, and a 32-token greedy
// trajectory — the latter through the real engine (scheduler, KV manager, sampler).
//
// Each test names its device. On the CPU, transformers ran in f32 on bf16-rounded weights, as we
// do; only the summation order differs, so 1e-4 of the logits' scale is ample. The CUDA case
// (skipped without a GPU) rounds activations and KV to bf16: its logprobs get the bf16 bound of
// cuda_golden_test (3e-2 of the scale; a wrong position or page moves them by O(1) of it), its
// greedy trajectory through the engine (graphs, device argmax, lookahead) must still be exact.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "cli/session.h"
#ifdef LOOM_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "io/json_file.h"
#include "tokenizer/tokenizer.h"

namespace loom {
namespace {

// Greedy-generates `n` tokens after `prompt` through the engine.
std::vector<TokenId> GreedyThroughEngine(Engine& engine, const std::vector<TokenId>& prompt,
                                         int n) {
  Request r;
  r.prompt = prompt;
  r.params.temperature = 0;
  r.params.max_tokens = n;
  r.params.ignore_eos = true;
  auto h = engine.Submit(std::move(r));
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  std::vector<TokenId> out;
  if (!h.ok()) return out;
  while (!h->stream->done()) {
    engine.Step();
    while (auto c = h->stream->TryPop()) {
      for (const auto& t : c->tokens) out.push_back(t.token);
    }
  }
  return out;
}

class DefaultModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (cuda()) {
#ifdef LOOM_HAVE_CUDA
      if (Status s = CudaBackend::CheckGpu(0); !s.ok()) GTEST_SKIP() << s.message();
#else
      GTEST_SKIP() << "built without CUDA";
#endif
    }
    ModelFlags flags;
    flags.threads = 2;
    flags.device = GetParam();
    auto s = OpenSession(flags);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = std::move(s).value();
    ASSERT_TRUE(session_->is_default_model);
    ASSERT_NE(session_->tokenizer, nullptr);
    auto g = LoadJsonFile(session_->model_path + "/golden.json");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    golden_ = *g;
  }

  bool cuda() const { return GetParam() == "cuda"; }
  double tolerance() const { return cuda() ? 3e-2 : 1e-4; }

  std::vector<TokenId> Greedy(const std::vector<TokenId>& prompt, int n) {
    return GreedyThroughEngine(*session_->engine, prompt, n);
  }

  std::unique_ptr<Session> session_;
  nlohmann::json golden_;
};

TEST_P(DefaultModelTest, TokenizerMatchesTransformers) {
  if (cuda()) GTEST_SKIP() << "the tokenizer does not depend on the device";
  for (const auto& c : golden_["tokenization"]) {
    std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(session_->tokenizer->Encode(c["text"].get<std::string>(), true), want)
        << c["text"].get<std::string>();
    EXPECT_EQ(session_->tokenizer->Decode(want, false), c["text"].get<std::string>());
  }
}

TEST_P(DefaultModelTest, GreedyTrajectoryThroughTheEngine) {
  std::vector<TokenId> prompt = golden_["greedy"]["prompt_ids"].get<std::vector<TokenId>>();
  std::vector<TokenId> want = golden_["greedy"]["generated_ids"].get<std::vector<TokenId>>();
  EXPECT_EQ(Greedy(prompt, static_cast<int>(want.size())), want);
}

TEST_P(DefaultModelTest, ArgmaxAtEveryPosition) {
  // The golden holds no per-position logits to tell a bf16 near tie from an error;
  // cuda_golden_test checks every position of its models on CUDA.
  if (cuda()) GTEST_SKIP() << "exact argmax at every position is the f32 backend's claim";
  // Each prefix of the sequence, greedy-decoded for one token, must give transformers' argmax.
  for (const auto& seq : golden_["sequences"]) {
    std::vector<TokenId> ids = seq["ids"].get<std::vector<TokenId>>();
    std::vector<TokenId> argmax = seq["argmax"].get<std::vector<TokenId>>();
    for (size_t n = 1; n <= ids.size(); ++n) {
      std::vector<TokenId> prefix(ids.begin(), ids.begin() + static_cast<long>(n));
      std::vector<TokenId> got = Greedy(prefix, 1);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0], argmax[n - 1]) << "position " << n - 1;
    }
  }
}

TEST_P(DefaultModelTest, LastLogitsMatch) {
  for (const auto& seq : golden_["sequences"]) {
    std::vector<TokenId> ids = seq["ids"].get<std::vector<TokenId>>();
    std::vector<float> want = seq["last_logits"].get<std::vector<float>>();
    Request r;
    r.prompt = ids;
    r.params.temperature = 0;
    r.params.max_tokens = 1;
    r.params.ignore_eos = true;
    r.params.num_logprobs = 20;
    auto h = session_->engine->Submit(std::move(r));
    ASSERT_TRUE(h.ok());
    std::vector<TokenOutput> outs;
    while (!h->stream->done()) {
      session_->engine->Step();
      while (auto c = h->stream->TryPop()) outs.insert(outs.end(), c->tokens.begin(), c->tokens.end());
    }
    ASSERT_EQ(outs.size(), 1u);
    // The engine reports log-softmax of the logits: compare against the golden's log-softmax.
    double mx = *std::max_element(want.begin(), want.end()), sum = 0;
    for (float v : want) sum += std::exp(v - mx);
    const double lse = mx + std::log(sum);
    ASSERT_EQ(outs[0].top_logprobs.size(), 20u);
    for (const auto& tl : outs[0].top_logprobs) {
      EXPECT_NEAR(tl.logprob, want[static_cast<size_t>(tl.token)] - lse,
                  tolerance() * std::max(1.0, std::fabs(mx)))
          << "token " << tl.token;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DefaultModelTest, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// --kv-dtype f16 / bf16: the session builds a half-precision KV pool (half the bytes per token)
// and the default model still follows transformers' greedy trajectory through it.
TEST(DefaultModelKvDtypeTest, HalfPrecisionKvFollowsTheGreedyGolden) {
  for (const char* kv : {"f16", "bf16"}) {
    SCOPED_TRACE(kv);
    ModelFlags flags;
    flags.threads = 2;
    flags.device = "cpu";  // CUDA keeps bf16 pools only
    flags.kv_dtype = kv;
    auto s = OpenSession(flags);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    Session& session = **s;
    EXPECT_EQ(session.engine->config().kv_dtype, kv);
    EXPECT_EQ(session.kv_bytes_per_token * 2, session.model->KvBytesPerToken(DType::kF32));
    auto g = LoadJsonFile(session.model_path + "/golden.json");
    ASSERT_TRUE(g.ok());
    const auto prompt = (*g)["greedy"]["prompt_ids"].get<std::vector<TokenId>>();
    const auto want = (*g)["greedy"]["generated_ids"].get<std::vector<TokenId>>();
    const std::vector<TokenId> got =
        GreedyThroughEngine(*session.engine, prompt, static_cast<int>(want.size()));
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace loom
