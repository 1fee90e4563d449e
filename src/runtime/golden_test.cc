// Every architecture against HF transformers (tests/goldens/models, made by
// tools/goldens/make_model_goldens.py): per-position logits of three sequences, in one step per
// sequence, all three batched in one step, and chunked prefill + decode; hidden states; a 32-token
// greedy trajectory; rope frequencies.
//
// The same goldens through the GGUF path ("gguf/<arch>"): tools/goldens/hf_to_gguf converts the
// HF directory the way llama.cpp's convert_hf_to_gguf.py does (tensor names, Llama's permuted q/k,
// Gemma's 1 + w norms, Llama 3.1 rope as rope_freqs.weight, metadata keys) and the model is
// loaded from that file; it must give HF's numbers too. Not every tiny config has a GGUF form:
// mistral's sliding window and gemma2's query_pre_attn_scalar 24 have no key (gemma2_gguf is
// the Gemma 2 golden with the scale llama.cpp assumes), nor qwen3_moe's dense layer between
// sparse ones (runtime/moe_test.cc compares Qwen3-MoE GGUF with safetensors instead).
//
// Tolerance: both sides compute in f32; only the reduction order differs (OpenBLAS / our dot
// kernels vs torch's). Over 3 layers of width 64-96 that gives errors around 1e-6 of the logits'
// scale, so we require max|ours - ref| <= 1e-4 * max(1, max|ref|) per row, i.e. the 1e-4
// relative bound, with margin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "io/json_file.h"
#include "model/model.h"
#include "model/rope.h"
#include "runtime/forward_batch.h"
#include "runtime/golden_models.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

constexpr int kBlockSize = 16;
using golden::ReadF32;

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const golden::GoldenSource src = golden::Source(GetParam(), "loom_golden_");
    ASSERT_FALSE(src.path.empty());
    dir_ = src.dir;
    auto model = LoadModel(src.path, &backend_);
    if (src.gguf) fs::remove(src.path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(model).value();
    ASSERT_EQ(model_->info().format, src.gguf ? "gguf" : "safetensors");
    auto golden = LoadJsonFile((dir_ / "golden.json").string());
    ASSERT_TRUE(golden.ok()) << golden.status().ToString();
    golden_ = *golden;
    kv_ = model_->AllocateKv(/*num_blocks=*/64, kBlockSize, DType::kF32);
  }

  // Runs one step; returns logits [rows, vocab] for `all_rows` (every token) or sampled rows.
  std::vector<float> Step(const std::vector<SeqSlice>& seqs, bool all_rows,
                          const ActivationSink* sink = nullptr) {
    return golden::ForwardLogits(*model_, kv_, seqs, kBlockSize, all_rows, sink);
  }

  std::vector<int32_t> Sequence(int k) const {
    return golden_["sequences"][static_cast<size_t>(k)].get<std::vector<int32_t>>();
  }

  // Compares `rows` logits rows of ours (starting at ours_row) with golden rows of sequence k.
  void ExpectRowsNear(const std::vector<float>& ours, int ours_row, int k, int ref_row, int rows,
                      const std::string& what) {
    std::vector<float> ref = ReadF32(dir_ / ("logits_" + std::to_string(k) + ".f32"));
    const int vocab = model_->config().vocab_size;
    for (int r = 0; r < rows; ++r) {
      double max_ref = 1.0, max_diff = 0.0;
      for (int j = 0; j < vocab; ++j) {
        double a = ours[static_cast<size_t>((ours_row + r) * vocab + j)];
        double b = ref[static_cast<size_t>((ref_row + r) * vocab + j)];
        max_ref = std::max(max_ref, std::fabs(b));
        max_diff = std::max(max_diff, std::fabs(a - b));
      }
      ASSERT_LE(max_diff, 1e-4 * max_ref) << what << ": seq " << k << " row " << ref_row + r;
    }
  }

  std::vector<int32_t> Blocks(int first, int count) {
    std::vector<int32_t> b(static_cast<size_t>(count));
    std::iota(b.begin(), b.end(), first);
    return b;
  }

  CpuBackend backend_{2};
  fs::path dir_;
  std::unique_ptr<Model> model_;
  nlohmann::json golden_;
  std::vector<KvLayer> kv_;
};

TEST_P(GoldenTest, EachSequenceAlone) {
  for (int k = 0; k < 3; ++k) {
    std::vector<int32_t> ids = Sequence(k);
    std::vector<int32_t> blocks = Blocks(0, 8);
    std::vector<float> logits = Step({SeqSlice{ids, 0, blocks, true}}, /*all_rows=*/true);
    ExpectRowsNear(logits, 0, k, 0, static_cast<int>(ids.size()), "alone");
  }
}

TEST_P(GoldenTest, AllSequencesInOneStep) {
  std::vector<std::vector<int32_t>> ids = {Sequence(0), Sequence(1), Sequence(2)};
  // Disjoint, non-contiguous block tables.
  std::vector<int32_t> b0 = {40}, b1 = {7, 3}, b2 = {9, 1, 30, 2, 5, 60};
  std::vector<float> logits = Step(
      {SeqSlice{ids[0], 0, b0, true}, SeqSlice{ids[1], 0, b1, true}, SeqSlice{ids[2], 0, b2, true}},
      /*all_rows=*/true);
  int row = 0;
  for (int k = 0; k < 3; ++k) {
    ExpectRowsNear(logits, row, k, 0, static_cast<int>(ids[static_cast<size_t>(k)].size()),
                   "batched");
    row += static_cast<int>(ids[static_cast<size_t>(k)].size());
  }
}

TEST_P(GoldenTest, ChunkedPrefillThenDecode) {
  std::vector<int32_t> ids = Sequence(2);  // 70 tokens
  std::vector<int32_t> blocks = {11, 4, 20, 8, 33};
  std::span<const int32_t> all(ids);
  Step({SeqSlice{all.subspan(0, 29), 0, blocks, false}}, false);
  std::vector<float> l = Step({SeqSlice{all.subspan(29, 31), 29, blocks, true}}, false);
  ExpectRowsNear(l, 0, 2, 59, 1, "chunk end");
  for (int p = 60; p < 70; ++p) {
    // A decode step of this sequence next to a fresh prefill of sequence 1 in other blocks.
    std::vector<int32_t> other = Sequence(1);
    std::vector<int32_t> other_blocks = {50 + (p % 3)};
    std::vector<float> d = Step({SeqSlice{other, 0, other_blocks, true},
                                 SeqSlice{all.subspan(static_cast<size_t>(p), 1), p, blocks, true}},
                                false);
    ExpectRowsNear(d, 1, 2, p, 1, "decode");
    ExpectRowsNear(d, 0, 1, static_cast<int>(other.size()) - 1, 1, "neighbour");
  }
}

TEST_P(GoldenTest, GreedyTrajectory) {
  std::vector<int32_t> ids = golden_["greedy"]["prompt"].get<std::vector<int32_t>>();
  std::vector<int32_t> expected = golden_["greedy"]["ids"].get<std::vector<int32_t>>();
  std::vector<int32_t> blocks = Blocks(0, 4);
  const int vocab = model_->config().vocab_size;
  std::vector<int32_t> got;
  int computed = 0;
  while (got.size() < expected.size()) {
    std::span<const int32_t> fresh(ids.data() + computed,
                                   ids.size() - static_cast<size_t>(computed));
    std::vector<float> l = Step({SeqSlice{fresh, computed, blocks, true}}, false);
    computed = static_cast<int>(ids.size());
    int32_t best = static_cast<int32_t>(std::max_element(l.begin(), l.begin() + vocab) - l.begin());
    got.push_back(best);
    ids.push_back(best);
  }
  EXPECT_EQ(got, expected);
}

TEST_P(GoldenTest, HiddenStates) {
  std::vector<int32_t> ids = Sequence(1);
  std::vector<int32_t> blocks = Blocks(0, 1);
  const auto& h = golden_["hidden"];
  std::vector<float> ref = ReadF32(dir_ / h["file"].get<std::string>());
  const int64_t d = model_->config().hidden_size;
  const int64_t n = static_cast<int64_t>(ids.size());
  int checked = 0;
  ActivationSink sink = [&](const std::string& name, const Tensor& t) {
    int idx = -1;
    if (name == "embed") idx = 0;
    if (name.rfind("hidden.", 0) == 0) {
      int layer = std::stoi(name.substr(7));
      if (layer < model_->config().num_layers - 1) idx = layer + 1;  // last may be final-normed
    }
    if (idx < 0) return;
    std::vector<float> ours(static_cast<size_t>(t.numel()));
    backend_.CopyToHost(t, ours.data());
    double max_ref = 1.0, max_diff = 0.0;
    for (int64_t i = 0; i < n * d; ++i) {
      double b = ref[static_cast<size_t>(idx * n * d + i)];
      max_ref = std::max(max_ref, std::fabs(b));
      max_diff = std::max(max_diff, std::fabs(ours[static_cast<size_t>(i)] - b));
    }
    EXPECT_LE(max_diff, 1e-4 * max_ref) << name;
    ++checked;
  };
  Step({SeqSlice{ids, 0, blocks, true}}, false, &sink);
  EXPECT_EQ(checked, model_->config().num_layers);
}

// Mixtures of experts: each sparse layer's router logits for sequence 2 and the experts every
// token picks, in order (the golden records torch.topk of the same logits).
TEST_P(GoldenTest, Routing) {
  if (!golden_.contains("experts")) GTEST_SKIP() << "not a mixture of experts";
  const auto& g = golden_["experts"];
  std::vector<int32_t> ids = Sequence(g["seq"].get<int>());
  const int k = g["k"].get<int>();
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t experts = model_->config().num_experts;
  std::map<int, std::vector<float>> router;
  std::map<int, std::vector<int32_t>> chosen;
  ActivationSink sink = [&](const std::string& name, const Tensor& t) {
    const bool is_router = name.rfind("router.", 0) == 0,
               is_experts = name.rfind("experts.", 0) == 0;
    if (!is_router && !is_experts) return;
    const int layer = std::stoi(name.substr(name.find('.') + 1));
    if (is_router) {
      std::vector<float>& v = router[layer];
      v.resize(static_cast<size_t>(t.numel()));
      backend_.CopyToHost(t, v.data());
    } else {
      std::vector<int32_t>& v = chosen[layer];
      v.resize(static_cast<size_t>(t.numel()));
      backend_.CopyToHost(t, v.data());
    }
  };
  Step({SeqSlice{ids, 0, Blocks(0, 8), true}}, false, &sink);
  ASSERT_EQ(router.size(), g["layers"].size());
  for (const auto& layer : g["layers"]) {
    const int li = layer["layer"].get<int>();
    SCOPED_TRACE("layer " + std::to_string(li));
    ASSERT_TRUE(router.count(li) && chosen.count(li));
    std::vector<float> ref = ReadF32(dir_ / layer["file"].get<std::string>());
    ASSERT_EQ(router[li].size(), static_cast<size_t>(n * experts));
    double max_ref = 1.0, max_diff = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
      max_ref = std::max(max_ref, std::fabs(double{ref[i]}));
      max_diff = std::max(max_diff, std::fabs(double{router[li][i]} - ref[i]));
    }
    EXPECT_LE(max_diff, 1e-4 * max_ref);
    const auto top = layer["top_k"].get<std::vector<std::vector<int32_t>>>();
    ASSERT_EQ(top.size(), static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<int32_t> got(chosen[li].begin() + t * k, chosen[li].begin() + (t + 1) * k);
      EXPECT_EQ(got, top[static_cast<size_t>(t)]) << "token " << t;
    }
  }
}

TEST_P(GoldenTest, RopeFrequencies) {
  if (!golden_.contains("inv_freq")) GTEST_SKIP() << "golden has no global rope table";
  const ModelConfig& c = model_->config();
  RopeFrequencies f = ComputeRopeFrequencies(c.rope, c.rotary_dim, c.max_position_embeddings);
  std::vector<float> ref = golden_["inv_freq"].get<std::vector<float>>();
  ASSERT_EQ(f.inv_freq.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(f.inv_freq[i], ref[i], 1e-6 * ref[i]) << i;
  EXPECT_NEAR(f.attention_factor, golden_["attention_scaling"].get<float>(), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Archs, GoldenTest,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma2",
                                           "gemma2_gguf", "gemma3", "phi3", "qwen3_moe",
                                           "qwen2_moe", "mixtral", "gpt_oss"),
                         golden::ParamName);

// llama covers Llama 3.1 rope as rope_freqs.weight (the golden uses rope_type llama3).
INSTANTIATE_TEST_SUITE_P(Gguf, GoldenTest,
                         ::testing::Values("gguf/llama", "gguf/qwen2", "gguf/qwen3",
                                           "gguf/gemma2_gguf", "gguf/gemma3", "gguf/phi3",
                                           "gguf/mixtral", "gguf/qwen2_moe", "gguf/gpt_oss"),
                         golden::ParamName);

}  // namespace
}  // namespace loom
