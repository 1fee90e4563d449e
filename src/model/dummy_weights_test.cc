// MakeDummyModel on the CPU backend: the checked-in bench configs parse to their published
// shapes; a shrunken config of each architecture family builds every role tensor with the
// LoadWeights shape, runs a finite forward, and is deterministic per seed. Also the decoder's
// attention planning (one plan a step) on those models.
#include "model/dummy_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "io/json_file.h"
#include "model/arch/arch.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

std::string ConfigPath(const std::string& name) {
  return std::string(LOOM_SOURCE_DIR) + "/bench/configs/" + name + ".json";
}

ModelConfig Parse(const nlohmann::json& j) {
  auto arch = FindArchForHfConfig(j);
  CHECK_OK(arch.status());
  ModelConfig c;
  CHECK_OK((*arch)->from_hf(j, &c));
  CHECK_OK(c.Validate());
  return c;
}

TEST(DummyWeightsTest, BenchConfigsHavePublishedShapes) {
  struct Want {
    std::string name, arch;
    int hidden, layers, heads, kv_heads, head_dim, ffn, vocab;
    bool tie;
  };
  const Want wants[] = {
      {"llama-3.1-8b", "llama", 4096, 32, 32, 8, 128, 14336, 128256, false},
      {"llama-3.2-1b", "llama", 2048, 16, 32, 8, 64, 8192, 128256, true},
      {"qwen3-8b", "qwen3", 4096, 36, 32, 8, 128, 12288, 151936, false},
      {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 151936, true},
      {"gemma-3-4b", "gemma3", 2560, 34, 8, 4, 256, 10240, 262208, true},
      {"qwen3-30b-a3b", "qwen3_moe", 2048, 48, 32, 4, 128, 6144, 151936, false},
      {"gpt-oss-20b", "gpt_oss", 2880, 24, 64, 8, 64, 2880, 201088, false},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.name);
    auto j = LoadJsonFile(ConfigPath(w.name));
    ASSERT_TRUE(j.ok()) << j.status().message();
    ModelConfig c = Parse(*j);
    EXPECT_EQ(c.arch, w.arch);
    EXPECT_EQ(c.hidden_size, w.hidden);
    EXPECT_EQ(c.num_layers, w.layers);
    EXPECT_EQ(c.num_heads, w.heads);
    EXPECT_EQ(c.num_kv_heads, w.kv_heads);
    EXPECT_EQ(c.head_dim, w.head_dim);
    EXPECT_EQ(c.intermediate_size, w.ffn);
    EXPECT_EQ(c.vocab_size, w.vocab);
    EXPECT_EQ(c.tie_word_embeddings, w.tie);
  }
  ModelConfig oss = Parse(*LoadJsonFile(ConfigPath("gpt-oss-20b")));
  EXPECT_EQ(oss.num_experts, 32);
  EXPECT_EQ(oss.num_experts_per_tok, 4);
  EXPECT_EQ(oss.moe_intermediate_size, 2880);
  EXPECT_EQ(oss.layer_window[0], 128);
  EXPECT_EQ(oss.layer_window[1], 0);
  EXPECT_EQ(oss.rope.type, RopeType::kYarn);
  EXPECT_EQ(oss.rope.factor, 32.f);
  EXPECT_FALSE(oss.rope.truncate);
  EXPECT_TRUE(oss.attention_sinks);
  ModelConfig l8 = Parse(*LoadJsonFile(ConfigPath("llama-3.1-8b")));
  EXPECT_EQ(l8.rope.type, RopeType::kLlama3);
  EXPECT_EQ(l8.rope.factor, 8.f);
  EXPECT_EQ(l8.rope.theta, 500000.f);
  EXPECT_EQ(l8.rope.original_max_position_embeddings, 8192);
  ModelConfig l1 = Parse(*LoadJsonFile(ConfigPath("llama-3.2-1b")));
  EXPECT_EQ(l1.rope.type, RopeType::kLlama3);
  EXPECT_EQ(l1.rope.factor, 32.f);
  ModelConfig q = Parse(*LoadJsonFile(ConfigPath("qwen3-8b")));
  EXPECT_TRUE(q.qk_norm);
  EXPECT_EQ(q.rope.theta, 1000000.f);
  ModelConfig moe = Parse(*LoadJsonFile(ConfigPath("qwen3-30b-a3b")));
  EXPECT_EQ(moe.num_experts, 128);
  EXPECT_EQ(moe.num_experts_per_tok, 8);
  EXPECT_EQ(moe.moe_intermediate_size, 768);
  EXPECT_TRUE(moe.moe_norm_topk_prob);
  EXPECT_TRUE(moe.is_moe(0) && moe.is_moe(47));
  ModelConfig g = Parse(*LoadJsonFile(ConfigPath("gemma-3-4b")));
  EXPECT_EQ(g.activation, Activation::kGeluTanh);
  EXPECT_FLOAT_EQ(g.softmax_scale(), 1.f / 16.f);  // query_pre_attn_scalar 256
  EXPECT_EQ(g.rope.type, RopeType::kLinear);
  EXPECT_EQ(g.rope.factor, 8.f);
  EXPECT_EQ(g.rope_local.theta, 10000.f);
  for (int i = 0; i < g.num_layers; ++i) {  // every 6th layer global, the others window 1024
    EXPECT_EQ(g.layer_window[static_cast<size_t>(i)], (i + 1) % 6 == 0 ? 0 : 1024) << i;
  }
}

// A bench config shrunk to test size, written to a temp dir.
std::string Shrunk(const std::string& name) {
  nlohmann::json j = *LoadJsonFile(ConfigPath(name));
  j["hidden_size"] = 64;
  j["intermediate_size"] = 96;
  j["num_hidden_layers"] = 3;
  j["num_attention_heads"] = 4;
  j["num_key_value_heads"] = 2;
  j["head_dim"] = 16;
  j["vocab_size"] = 300;
  j["max_position_embeddings"] = 64;
  if (j.contains("sliding_window") && j["sliding_window"].is_number()) j["sliding_window"] = 4;
  if (j.contains("sliding_window_pattern")) j["sliding_window_pattern"] = 2;
  const fs::path dir = fs::temp_directory_path() / ("loom_dummy_" + name);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << j.dump(2);
  return dir.string();
}

std::vector<float> Logits(const Model& m, Backend* be, const std::vector<int32_t>& ids) {
  const int64_t n = static_cast<int64_t>(ids.size());
  auto kv = m.AllocateKv(4, 16, DType::kF32);
  auto i32 = [&](std::vector<int32_t> v) {
    Tensor t = HostTensor(DType::kI32, Shape{static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data_as<int32_t>());
    return be->Upload(t);
  };
  std::vector<int32_t> pos(ids.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
  ForwardInput in;
  in.token_ids = i32(ids);
  in.positions = i32(pos);
  in.sample_rows = i32({static_cast<int32_t>(n - 1)});
  in.num_sample_rows = 1;
  in.meta.num_seqs = 1;
  in.meta.num_tokens = static_cast<int>(n);
  in.meta.max_query_len = static_cast<int>(n);
  in.meta.max_kv_len = static_cast<int>(n);
  in.meta.block_size = 16;
  in.meta.query_start = i32({0, static_cast<int32_t>(n)});
  in.meta.kv_len = i32({static_cast<int32_t>(n)});
  in.meta.page_indptr = i32({0, 1});
  in.meta.page_indices = i32({2});
  std::vector<int32_t> slots = pos;  // block 2 of 16 tokens
  for (auto& s : slots) s += 32;
  in.meta.slot_mapping = i32(slots);
  Tensor logits = be->Alloc(DType::kF32, Shape{1, m.config().vocab_size});
  CHECK_OK(m.Forward(in, kv, logits));
  const float* p = logits.data_as<float>();
  return std::vector<float>(p, p + m.config().vocab_size);
}

TEST(DummyWeightsTest, BuildsEveryArchFamilyWithLoaderShapes) {
  CpuBackend be(1);
  for (const char* name : {"llama-3.2-1b", "qwen3-0.6b", "gemma-3-4b", "llama-3.1-8b"}) {
    SCOPED_TRACE(name);
    const std::string dir = Shrunk(name);
    auto m = MakeDummyModel(dir, &be, DType::kBF16, 3);
    ASSERT_TRUE(m.ok()) << m.status().message();
    const ModelConfig& c = (*m)->config();
    const Weights& w = (*m)->weights();
    EXPECT_EQ(w.embed.shape(), (Shape{300, 64}));
    EXPECT_EQ(w.lm_head.shape(), (Shape{300, 64}));
    EXPECT_EQ(w.lm_head.data() == w.embed.data(), c.tie_word_embeddings);
    EXPECT_EQ(w.dtype, DType::kBF16);
    ASSERT_EQ(w.layers.size(), 3u);
    for (const LayerWeights& l : w.layers) {
      EXPECT_EQ(l.wq.shape(), (Shape{64, 64}));
      EXPECT_EQ(l.wk.shape(), (Shape{32, 64}));
      EXPECT_EQ(l.wv.shape(), (Shape{32, 64}));
      EXPECT_EQ(l.wo.shape(), (Shape{64, 64}));
      EXPECT_EQ(l.w_gate.shape(), (Shape{96, 64}));
      EXPECT_EQ(l.w_up.shape(), (Shape{96, 64}));
      EXPECT_EQ(l.w_down.shape(), (Shape{64, 96}));
      EXPECT_EQ(l.attn_norm.shape(), (Shape{64}));
      EXPECT_EQ(l.ffn_norm.shape(), (Shape{64}));
      EXPECT_EQ(l.q_norm.defined(), c.qk_norm);
      EXPECT_EQ(l.post_attn_norm.defined(), c.sandwich_norm);
      if (c.qk_norm) {
        EXPECT_EQ(l.q_norm.shape(), (Shape{16}));
      }
      // std 0.02 uniform: |w| < 0.0347, not all equal.
      const uint16_t* p = l.wq.data_as<const uint16_t>();
      float lo = 1, hi = -1;
      for (int64_t i = 0; i < l.wq.numel(); ++i) {
        lo = std::min(lo, Bf16ToF32(p[i]));
        hi = std::max(hi, Bf16ToF32(p[i]));
      }
      EXPECT_LT(hi, 0.035f);
      EXPECT_GT(lo, -0.035f);
      EXPECT_GT(hi - lo, 0.05f);
    }
    EXPECT_EQ((*m)->info().format, "dummy");
    std::vector<float> a = Logits(**m, &be, {1, 5, 9, 2, 7});
    for (float v : a) ASSERT_TRUE(std::isfinite(v));
    auto same = MakeDummyModel(dir, &be, DType::kBF16, 3);
    auto other = MakeDummyModel(dir, &be, DType::kBF16, 4);
    ASSERT_TRUE(same.ok() && other.ok());
    EXPECT_EQ(Logits(**same, &be, {1, 5, 9, 2, 7}), a);
    EXPECT_NE(Logits(**other, &be, {1, 5, 9, 2, 7}), a);
  }
}

// A CPU backend that hands out attention plans and checks every layer runs the step's one.
class PlanCountingBackend : public CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  std::shared_ptr<const AttentionPlan> PlanAttention(const AttentionMeta& meta,
                                                     const AttentionShape& shape) override {
    EXPECT_EQ(CpuBackend::PlanAttention(meta, shape), nullptr);  // the CPU's own: none
    auto plan = std::make_shared<AttentionPlan>();
    plan->shape = shape;
    last_plan_ = plan;
    ++plans_;
    return plan;
  }
  void Attention(const Tensor& q, const KvLayer& layer, const AttentionMeta& meta,
                 const AttentionParams& params, const Tensor& out) override {
    EXPECT_EQ(meta.plan, last_plan_);
    EXPECT_EQ(meta.plan->shape,
              (AttentionShape{params.num_heads, params.num_kv_heads, params.head_dim}));
    ++attention_calls_;
    CpuBackend::Attention(q, layer, meta, params, out);
  }
  int plans_ = 0, attention_calls_ = 0;

 private:
  std::shared_ptr<const AttentionPlan> last_plan_;
};

// Model::Forward plans the step's attention once (Backend::PlanAttention) and every layer's
// Attention gets that plan, local (windowed) and global layers alike; results are unchanged.
TEST(DecoderTest, PlansAttentionOncePerStep) {
  for (const char* name : {"llama-3.2-1b", "gemma-3-4b"}) {
    SCOPED_TRACE(name);
    const std::string dir = Shrunk(name);
    CpuBackend plain(1);
    PlanCountingBackend counting(1);
    auto a = MakeDummyModel(dir, &plain, DType::kBF16, 3);
    auto b = MakeDummyModel(dir, &counting, DType::kBF16, 3);
    ASSERT_TRUE(a.ok() && b.ok());
    const std::vector<int32_t> ids = {1, 5, 9, 2, 7};
    EXPECT_EQ(Logits(**b, &counting, ids), Logits(**a, &plain, ids));
    EXPECT_EQ(counting.plans_, 1);
    EXPECT_EQ(counting.attention_calls_, (*b)->config().num_layers);
  }
}

TEST(DummyWeightsTest, BadInputNamesTheFile) {
  CpuBackend be(1);
  auto missing = MakeDummyModel("/nonexistent/dir", &be);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/dir"), std::string::npos);
  const fs::path dir = fs::temp_directory_path() / "loom_dummy_bad";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["NoSuchForCausalLM"]})";
  auto bad = MakeDummyModel(dir.string(), &be);
  ASSERT_FALSE(bad.ok());
  auto q8 = MakeDummyModel(Shrunk("qwen3-0.6b"), &be, DType::kQ8_0);
  ASSERT_FALSE(q8.ok());
  EXPECT_NE(q8.status().message().find("dtype"), std::string::npos);
  // MLP biases are not part of the decoder: such a checkpoint is refused, not run without them.
  nlohmann::json j = *LoadJsonFile(ConfigPath("llama-3.2-1b"));
  j["mlp_bias"] = true;
  std::ofstream(dir / "config.json") << j.dump(2);
  auto mlp_bias = MakeDummyModel(dir.string(), &be);
  ASSERT_FALSE(mlp_bias.ok());
  EXPECT_EQ(mlp_bias.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(mlp_bias.status().message().find("mlp_bias"), std::string::npos);
}

}  // namespace
}  // namespace loom
