// CudaTuning: the --cuda-tune parser, its errors, the LOOM_* environment and the precedence of
// flags over the environment (no GPU: plain config).
#include "backend/cuda_tuning.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "backend/env_test_util.h"

namespace loom {
namespace {

using test::FakeEnv;

TEST(CudaTuningTest, DefaultsAreValidAndMatchTheKeyTable) {
  const CudaTuning t;
  EXPECT_TRUE(t.Validate().ok());
  EXPECT_EQ(DescribeCudaTuning(t), "");
  ASSERT_EQ(CudaTuningKeys().size(), 26u);
  for (const CudaTuningKey& k : CudaTuningKeys()) {
    EXPECT_EQ(CudaTuningValue(t, k.name), k.default_value) << k.name;
    EXPECT_FALSE(k.help.empty()) << k.name;
  }
  EXPECT_EQ(t.attn_cluster_splits, 16);
  EXPECT_EQ(t.attn_split_target, 2);
  EXPECT_EQ(t.graph_lookahead, 1);
  EXPECT_EQ(t.cublaslt_tune, 1);
}

TEST(CudaTuningTest, ParsesEveryKind) {
  CudaTuning t;
  ASSERT_TRUE(ApplyCudaTuneArg("attn_cluster_splits=12", &t).ok());
  ASSERT_TRUE(ApplyCudaTuneArg("cuda_pdl=0", &t).ok());
  ASSERT_TRUE(ApplyCudaTuneArg("gemv_queue=off", &t).ok());
  ASSERT_TRUE(ApplyCudaTuneArg("attn_prefill_tile=4x2", &t).ok());
  ASSERT_TRUE(SetCudaTuning("graph_lookahead", "0", &t).ok());
  EXPECT_EQ(t.attn_cluster_splits, 12);
  EXPECT_FALSE(t.cuda_pdl);
  EXPECT_FALSE(t.gemv_queue);
  EXPECT_EQ(t.attn_prefill_warps, 4);
  EXPECT_EQ(t.attn_prefill_m_tiles, 2);
  EXPECT_EQ(t.graph_lookahead, 0);
  EXPECT_TRUE(t.Validate().ok());
  EXPECT_EQ(DescribeCudaTuning(t),
            "attn_cluster_splits=12 attn_prefill_tile=4x2 gemv_queue=0 cuda_pdl=0 "
            "graph_lookahead=0");
  ASSERT_TRUE(ApplyCudaTuneArg("attn_prefill_tile=auto", &t).ok());
  ASSERT_TRUE(ApplyCudaTuneArg("cuda_pdl=TRUE", &t).ok());
  EXPECT_EQ(t.attn_prefill_warps, 0);
  EXPECT_TRUE(t.cuda_pdl);
}

// Each bad argument fails with a message naming it, and leaves the struct as it was.
TEST(CudaTuningTest, BadArgumentsNameTheKeyAndValue) {
  struct Case {
    const char* arg;
    const char* expect;  // a substring of the message
  };
  const Case cases[] = {
      {"attn_cluster_splits=40", "[2, 16]"},
      {"attn_cluster_splits=1", "[2, 16]"},
      {"attn_decode_splits=-1", "[0, 64]"},
      {"attn_decode_splits=12x", "[0, 64]"},
      {"attn_decode_unroll=3", "0, 1, 2 or 4"},
      {"cuda_pdl=2", "0 or 1"},
      {"cuda_pdl=", "0 or 1"},
      {"attn_prefill_tile=8x3", "4x1, 4x2, 8x1 or 8x2"},
      {"attn_prefill_tile=16x1", "4x1, 4x2, 8x1 or 8x2"},
      {"no_such_key=1", "unknown key"},
      {"gemv_spread=2", "retired"},
      {"gemv_ring_kb=160", "retired"},
      {"attn_small_rows=0", "retired"},
      {"attn_cluster_splits", "expected KEY=VALUE"},
      {"=3", "expected KEY=VALUE"},
  };
  for (const Case& c : cases) {
    CudaTuning t;
    const Status s = ApplyCudaTuneArg(c.arg, &t);
    ASSERT_FALSE(s.ok()) << c.arg;
    EXPECT_NE(s.message().find(std::string("--cuda-tune ") + c.arg), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s.message();
    EXPECT_EQ(DescribeCudaTuning(t), "") << c.arg;
  }
}

TEST(CudaTuningTest, ValidateCatchesFieldsSetInCode) {
  CudaTuning t;
  t.attn_split_target = 0;
  Status s = t.Validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("attn_split_target=0"), std::string::npos) << s.message();
  t = CudaTuning{};
  t.attn_prefill_warps = 8;  // m_tiles left 0
  s = t.Validate();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("attn_prefill_tile=8x0"), std::string::npos) << s.message();
}

TEST(CudaTuningTest, EnvironmentVariablesAreTheKeysUpperCased) {
  EXPECT_EQ(CudaTuningEnvName("attn_cluster_splits"), "LOOM_ATTN_CLUSTER_SPLITS");
  CudaTuning t;
  std::vector<std::string> warnings;
  ASSERT_TRUE(ApplyCudaTuningEnv(FakeEnv({{"LOOM_ATTN_CLUSTER_SPLITS", "12"},
                                          {"LOOM_CUDA_FUSE", "0"},
                                          {"LOOM_GRAPH_TAIL", ""},  // empty: unset
                                          {"LOOM_GEMV_SPREAD", "2"}}),
                                 &t, &warnings)
                  .ok());
  EXPECT_EQ(t.attn_cluster_splits, 12);
  EXPECT_FALSE(t.cuda_fuse);
  EXPECT_TRUE(t.graph_tail);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("LOOM_GEMV_SPREAD is ignored"), std::string::npos) << warnings[0];

  // A bad value names the variable; nothing is applied.
  CudaTuning u;
  const Status s = ApplyCudaTuningEnv(
      FakeEnv({{"LOOM_CUDA_FUSE", "0"}, {"LOOM_ATTN_DECODE_SPLITS", "many"}}), &u);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("LOOM_ATTN_DECODE_SPLITS=many"), std::string::npos) << s.message();
  EXPECT_TRUE(u.cuda_fuse);
}

// Defaults, then the environment, then the flags in order: a flag wins over the environment.
TEST(CudaTuningTest, FlagsWinOverTheEnvironment) {
  const EnvLookup env =
      FakeEnv({{"LOOM_ATTN_CLUSTER_SPLITS", "12"}, {"LOOM_GRAPH_LOOKAHEAD", "0"}});
  const std::vector<std::string> none;
  StatusOr<CudaTuning> t = ResolveCudaTuning(none, env);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->attn_cluster_splits, 12);
  EXPECT_EQ(t->graph_lookahead, 0);

  const std::vector<std::string> flags = {"attn_cluster_splits=8", "cuda_pdl=0",
                                          "attn_cluster_splits=16"};
  t = ResolveCudaTuning(flags, env);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->attn_cluster_splits, 16);  // the last flag
  EXPECT_EQ(t->graph_lookahead, 0);       // from the environment, no flag
  EXPECT_FALSE(t->cuda_pdl);

  // A bad flag fails even when the environment is fine, and the other way round.
  EXPECT_FALSE(ResolveCudaTuning(std::vector<std::string>{"cuda_pdl=maybe"}, env).ok());
  EXPECT_FALSE(ResolveCudaTuning(none, FakeEnv({{"LOOM_CUDA_PDL", "maybe"}})).ok());
  // A flag does not rescue a bad environment value (it is reported, not silently overridden).
  EXPECT_FALSE(ResolveCudaTuning(std::vector<std::string>{"cuda_pdl=1"},
                                 FakeEnv({{"LOOM_CUDA_PDL", "maybe"}}))
                   .ok());
}

// docs/cli.md documents every key with its default (a row "| `key` | `default` | ...") and names
// every retired one.
TEST(CudaTuningTest, CliDocListsEveryKey) {
  std::ifstream in(std::string(LOOM_SOURCE_DIR) + "/docs/cli.md");
  ASSERT_TRUE(in.good()) << "docs/cli.md not found under " << LOOM_SOURCE_DIR;
  std::stringstream doc;
  doc << in.rdbuf();
  for (const CudaTuningKey& k : CudaTuningKeys()) {
    const std::string row =
        "| `" + std::string(k.name) + "` | `" + std::string(k.default_value) + "` |";
    EXPECT_NE(doc.str().find(row), std::string::npos) << "docs/cli.md lacks the row " << row;
  }
  for (const CudaTuningKey& k : RetiredCudaTuningKeys()) {
    EXPECT_NE(doc.str().find("`" + std::string(k.name) + "`"), std::string::npos) << k.name;
  }
}

}  // namespace
}  // namespace loom
