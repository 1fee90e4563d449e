// ModelConfigFromGguf on metadata-only GGUFs: the llama.cpp conventions that the tiny goldens
// (src/runtime/golden_test.cc, GGUF cases) cannot reach because they need real model sizes —
// Gemma's default sliding patterns, the 27B softmax scale rule, Llama 3.1 rope factors at real
// Llama 3.1 settings — and the errors a user sees.
#include "model/gguf_config.h"

#include <gtest/gtest.h>

#include <cmath>

#include "hf_to_gguf.h"
#include "io/gguf_writer.h"
#include "model/rope.h"

namespace loom {
namespace {

// A GGUF with `arch`'s size keys and a [vocab, hidden] token_embd; `extra` adds keys / tensors.
template <typename F>
StatusOr<ModelConfig> Config(const std::string& arch, int layers, F extra, int hidden = 64,
                             int heads = 4, int head_dim = 16) {
  GgufWriter w;
  w.SetString("general.architecture", arch);
  w.SetU32(arch + ".block_count", static_cast<uint32_t>(layers));
  w.SetU32(arch + ".embedding_length", static_cast<uint32_t>(hidden));
  w.SetU32(arch + ".feed_forward_length", 96);
  w.SetU32(arch + ".attention.head_count", static_cast<uint32_t>(heads));
  w.SetU32(arch + ".attention.head_count_kv", 2);
  w.SetU32(arch + ".attention.key_length", static_cast<uint32_t>(head_dim));
  std::vector<float> embd(static_cast<size_t>(32 * hidden), 0.f);
  w.AddTensor("token_embd.weight", DType::kF32, Shape{32, hidden},
              std::string_view(reinterpret_cast<const char*>(embd.data()), embd.size() * 4));
  extra(w);
  auto file = GgufFile::OpenFromMemory(w.Serialize(), "test.gguf");
  if (!file.ok()) return file.status();
  auto cfg = ModelConfigFromGguf(**file);
  if (!cfg.ok()) return cfg.status();
  RETURN_IF_ERROR(cfg->Validate());
  return cfg;
}

void AddF32Tensor(GgufWriter& w, const std::string& name, const std::vector<float>& v) {
  w.AddTensor(name, DType::kF32, Shape{static_cast<int64_t>(v.size())},
              std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * 4));
}

TEST(GgufConfigTest, UnsupportedArchitectureNamesTheSupportedOnes) {
  auto cfg = Config("mamba", 2, [](GgufWriter&) {});
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().code(), StatusCode::kUnimplemented);
  const std::string msg = cfg.status().ToString();
  EXPECT_NE(msg.find("test.gguf"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'mamba'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("supported: llama, qwen2, qwen3, gemma2, gemma3, phi3"), std::string::npos)
      << msg;
}

// Llama 3.1 8B's rope (theta 5e5, head_dim 128, llama3 factor 8 over 8192 positions) as llama.cpp's
// converter writes it must give the frequencies of HF's llama3 scaling.
TEST(GgufConfigTest, LlamaRopeFreqsMatchHfLlama3Scaling) {
  const std::vector<float> factors = Llama3RopeFreqFactors(500000.f, 128, 8.f, 1.f, 4.f, 8192);
  auto cfg = Config(
      "llama", 2,
      [&](GgufWriter& w) {
        w.SetF32("llama.rope.freq_base", 500000.f);
        AddF32Tensor(w, "rope_freqs.weight", factors);
      },
      /*hidden=*/512, /*heads=*/4, /*head_dim=*/128);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_TRUE(cfg->rope_interleaved);
  EXPECT_EQ(cfg->rope.type, RopeType::kDefault);
  ASSERT_EQ(cfg->rope.freq_factors, factors);

  RopeConfig hf;
  hf.type = RopeType::kLlama3;
  hf.theta = 500000.f;
  hf.factor = 8.f;
  hf.low_freq_factor = 1.f;
  hf.high_freq_factor = 4.f;
  hf.original_max_position_embeddings = 8192;
  RopeFrequencies want = ComputeRopeFrequencies(hf, 128, 131072);
  RopeFrequencies got =
      ComputeRopeFrequencies(cfg->rope, cfg->rotary_dim, cfg->max_position_embeddings);
  ASSERT_EQ(got.inv_freq.size(), want.inv_freq.size());
  int scaled = 0;
  for (size_t i = 0; i < want.inv_freq.size(); ++i) {
    // The factors are rounded to f32 once more than HF's frequencies: a few ulps.
    EXPECT_NEAR(got.inv_freq[i], want.inv_freq[i], 1e-6 * want.inv_freq[i]) << i;
    if (factors[i] != 1.f) ++scaled;
  }
  EXPECT_GT(scaled, 0);
  EXPECT_EQ(got.attention_factor, 1.f);
}

TEST(GgufConfigTest, RopeFreqsOfTheWrongLengthAreRefused) {
  auto cfg = Config("llama", 2, [](GgufWriter& w) {
    AddF32Tensor(w, "rope_freqs.weight", {1.f, 2.f});
  });
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().ToString().find("rope frequency factors"), std::string::npos)
      << cfg.status().ToString();
}

TEST(GgufConfigTest, QwenKeepsHalfRotation) {
  auto q2 = Config("qwen2", 2, [](GgufWriter&) {});
  ASSERT_TRUE(q2.ok()) << q2.status().ToString();
  EXPECT_FALSE(q2->rope_interleaved);
  EXPECT_TRUE(q2->attention_bias);
  auto q3 = Config("qwen3", 2, [](GgufWriter& w) {
    w.SetString("qwen3.rope.scaling.type", "yarn");
    w.SetF32("qwen3.rope.scaling.factor", 4.f);
    w.SetU32("qwen3.rope.scaling.original_context_length", 32768);
  });
  ASSERT_TRUE(q3.ok()) << q3.status().ToString();
  EXPECT_TRUE(q3->qk_norm);
  EXPECT_EQ(q3->rope.type, RopeType::kYarn);
  EXPECT_EQ(q3->rope.factor, 4.f);
  EXPECT_EQ(q3->rope.original_max_position_embeddings, 32768);
}

// Gemma 2 without the optional keys: HF's soft-caps, a 4096 window on even layers; the norms are
// plain (the file stores 1 + w); the 46-layer 27B scales by hidden / heads.
TEST(GgufConfigTest, Gemma2Defaults) {
  auto cfg = Config("gemma2", 4, [](GgufWriter&) {});
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_FALSE(cfg->norm_plus_one);
  EXPECT_TRUE(cfg->sandwich_norm);
  EXPECT_FALSE(cfg->qk_norm);
  EXPECT_EQ(cfg->activation, Activation::kGeluTanh);
  EXPECT_FLOAT_EQ(cfg->embed_scale, 8.f);
  EXPECT_FLOAT_EQ(cfg->attn_logit_softcap, 50.f);
  EXPECT_FLOAT_EQ(cfg->final_logit_softcap, 30.f);
  EXPECT_EQ(cfg->layer_window, (std::vector<int>{4096, 0, 4096, 0}));
  EXPECT_FLOAT_EQ(cfg->softmax_scale(), 0.25f);

  // 27B: hidden 4608, 32 heads of 128 -> query_pre_attn_scalar 144.
  auto big = Config(
      "gemma2", 46, [](GgufWriter&) {}, 4608, 32, 128);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_FLOAT_EQ(big->softmax_scale(), 1.f / 12.f);
}

// Gemma 3: with a window, five local layers then a global one; local rope unscaled with base
// rope.freq_base_swa (10000 when absent), global rope from the common keys.
TEST(GgufConfigTest, Gemma3SlidingPatternAndRopes) {
  auto cfg = Config("gemma3", 12, [](GgufWriter& w) {
    w.SetU32("gemma3.attention.sliding_window", 512);
    w.SetF32("gemma3.rope.freq_base", 1000000.f);
    w.SetString("gemma3.rope.scaling.type", "linear");
    w.SetF32("gemma3.rope.scaling.factor", 8.f);
  });
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_TRUE(cfg->qk_norm);
  EXPECT_FALSE(cfg->norm_plus_one);
  EXPECT_EQ(cfg->attn_logit_softcap, 0.f);
  EXPECT_EQ(cfg->final_logit_softcap, 0.f);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(cfg->layer_window[static_cast<size_t>(i)], i % 6 == 5 ? 0 : 512) << i;
  EXPECT_EQ(cfg->rope.type, RopeType::kLinear);
  EXPECT_EQ(cfg->rope.factor, 8.f);
  EXPECT_EQ(cfg->rope.theta, 1000000.f);
  EXPECT_EQ(cfg->rope_local.type, RopeType::kDefault);
  EXPECT_EQ(cfg->rope_local.theta, 10000.f);

  // An explicit per-layer pattern (bools) and local base.
  auto custom = Config("gemma3", 3, [](GgufWriter& w) {
    w.SetU32("gemma3.attention.sliding_window", 8);
    w.SetF32("gemma3.rope.freq_base_swa", 20000.f);
    w.Set("gemma3.attention.sliding_window_pattern",
          GgufValue::Array(GgufType::kBool,
                           {GgufValue::Bool(false), GgufValue::Bool(true), GgufValue::Bool(true)}));
  });
  ASSERT_TRUE(custom.ok()) << custom.status().ToString();
  EXPECT_EQ(custom->layer_window, (std::vector<int>{0, 8, 8}));
  EXPECT_EQ(custom->rope_local.theta, 20000.f);

  // No window: every layer global.
  auto none = Config("gemma3", 6, [](GgufWriter&) {});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->layer_window, std::vector<int>(6, 0));

  // 27B: 62 layers, hidden 5376, 32 heads of 128 -> query_pre_attn_scalar 168.
  auto big = Config(
      "gemma3", 62, [](GgufWriter&) {}, 5376, 32, 128);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_FLOAT_EQ(big->softmax_scale(), 1.f / std::sqrt(168.f));
}

TEST(GgufConfigTest, Phi3FusedProjectionsAndWindow) {
  auto cfg = Config("phi3", 2, [](GgufWriter& w) {
    w.SetU32("phi3.rope.dimension_count", 8);
    w.SetU32("phi3.attention.sliding_window", 2047);
  });
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_TRUE(cfg->fused_qkv);
  EXPECT_TRUE(cfg->fused_gate_up);
  EXPECT_EQ(cfg->rotary_dim, 8);
  EXPECT_EQ(cfg->layer_window, (std::vector<int>{2047, 2047}));

  auto longrope = Config("phi3", 2, [](GgufWriter& w) {
    AddF32Tensor(w, "rope_factors_long.weight", std::vector<float>(8, 1.f));
  });
  ASSERT_FALSE(longrope.ok());
  EXPECT_EQ(longrope.status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace loom
