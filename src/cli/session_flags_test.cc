// ModelFlags: the flags that replaced the LOOM_* environment variables, and how the environment
// still fills them (ResolveModelFlags: a flag wins; errors name the flag or the variable).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "backend/env_test_util.h"
#include "cli/session.h"

namespace loom {
namespace {

using test::FakeEnv;

// Parses `args` (after the program name) into ModelFlags the way the commands do.
ModelFlags Parse(std::vector<std::string> args) {
  CLI::App app;
  ModelFlags flags;
  flags.Add(&app);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
  app.parse(args);
  return flags;
}

TEST(ModelFlagsTest, CudaTuneIsRepeatableAndLeavesTheModelPositional) {
  const ModelFlags f =
      Parse({"--cuda-tune", "attn_cluster_splits=12", "some/model", "--cuda-tune=cuda_pdl=0",
             "--step-trace", "--cuda-profile", "--ktrace-file", "k.bin", "--cpu-isa", "avx2"});
  EXPECT_EQ(f.model, "some/model");
  EXPECT_EQ(f.cuda_tune, (std::vector<std::string>{"attn_cluster_splits=12", "cuda_pdl=0"}));
  EXPECT_TRUE(f.step_trace);
  EXPECT_TRUE(f.cuda_profile);
  EXPECT_EQ(f.ktrace_file, "k.bin");
  EXPECT_EQ(f.cpu_isa, "avx2");
}

TEST(ModelFlagsTest, BadCudaTuneFailsAtParseNamingIt) {
  try {
    Parse({"--cuda-tune", "attn_cluster_splits=99"});
    FAIL() << "accepted a bad --cuda-tune";
  } catch (const CLI::ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("attn_cluster_splits=99"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Parse({"--cuda-tune", "gemv_ring_kb=160"}), CLI::ParseError);  // retired
  EXPECT_THROW(Parse({"--cpu-isa", "sse2"}), CLI::ParseError);
}

TEST(ModelFlagsTest, EnvironmentFillsWhatTheFlagsLeaveUnset) {
  const EnvLookup env = FakeEnv({{"LOOM_ATTN_DECODE_SPLITS", "4"},
                                 {"LOOM_GRAPH_LOOKAHEAD", "0"},
                                 {"LOOM_CUDA_PROFILE", "1"},
                                 {"LOOM_STEP_TRACE", "1"},
                                 {"LOOM_KTRACE_FILE", "env.bin"},
                                 {"LOOM_CPU_ISA", "scalar"},
                                 {"LOOM_GEMV_SPREAD", "2"}});
  ModelFlags f;
  std::vector<std::string> warnings;
  ASSERT_TRUE(ResolveModelFlags(env, &f, &warnings).ok());
  EXPECT_EQ(f.cuda_tuning.attn_decode_splits, 4);
  EXPECT_EQ(f.cuda_tuning.graph_lookahead, 0);
  EXPECT_TRUE(f.cuda_profile);
  EXPECT_TRUE(f.step_trace);
  EXPECT_EQ(f.ktrace_file, "env.bin");
  EXPECT_EQ(f.cpu_isa, "scalar");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("LOOM_GEMV_SPREAD"), std::string::npos) << warnings[0];

  // Flags win over the same variables.
  ModelFlags g = Parse(
      {"--cuda-tune", "attn_decode_splits=8", "--ktrace-file", "flag.bin", "--cpu-isa", "avx2"});
  ASSERT_TRUE(ResolveModelFlags(env, &g, nullptr).ok());
  EXPECT_EQ(g.cuda_tuning.attn_decode_splits, 8);
  EXPECT_EQ(g.cuda_tuning.graph_lookahead, 0);  // no flag: the environment's
  EXPECT_EQ(g.ktrace_file, "flag.bin");
  EXPECT_EQ(g.cpu_isa, "avx2");
}

TEST(ModelFlagsTest, NothingSetMeansTheDefaults) {
  ModelFlags f;
  ASSERT_TRUE(ResolveModelFlags(FakeEnv({}), &f, nullptr).ok());
  EXPECT_EQ(DescribeCudaTuning(f.cuda_tuning), "");
  EXPECT_FALSE(f.cuda_profile);
  EXPECT_FALSE(f.step_trace);
  EXPECT_EQ(f.ktrace_file, "");
  EXPECT_EQ(f.cpu_isa, "auto");
}

TEST(ModelFlagsTest, BadEnvironmentValuesNameTheVariable) {
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"LOOM_CPU_ISA", "sse2"},
                                                        {"LOOM_STEP_TRACE", "yes"},
                                                        {"LOOM_CUDA_PROFILE", "2"},
                                                        {"LOOM_ATTN_CLUSTER_SPLITS", "40"}}) {
    ModelFlags f;
    const Status s = ResolveModelFlags(FakeEnv({{name, value}}), &f, nullptr);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_NE(s.message().find(name + "=" + value), std::string::npos) << s.message();
  }
}

// huggingface_hub's order (constants.py): HF_HUB_CACHE, the legacy HUGGINGFACE_HUB_CACHE,
// HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub; "~" is HOME.
TEST(ModelFlagsTest, HfHubCacheDirFollowsHuggingFaceHub) {
  struct Case {
    std::map<std::string, std::string> env;
    std::string dir;
  };
  const std::map<std::string, std::string> all = {{"HF_HUB_CACHE", "/a"},
                                                  {"HUGGINGFACE_HUB_CACHE", "/b"},
                                                  {"HF_HOME", "/c"},
                                                  {"XDG_CACHE_HOME", "/d"},
                                                  {"HOME", "/home/u"}};
  auto without = [&](std::vector<std::string> names) {
    std::map<std::string, std::string> env = all;
    for (const std::string& n : names) env.erase(n);
    return env;
  };
  const Case cases[] = {
      {all, "/a"},
      {without({"HF_HUB_CACHE"}), "/b"},
      {without({"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"}), "/c/hub"},
      {without({"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"}), "/d/huggingface/hub"},
      {{{"HOME", "/home/u"}}, "/home/u/.cache/huggingface/hub"},
      {{{"HOME", "/home/u"}, {"HF_HOME", "~/hf"}}, "/home/u/hf/hub"},
      {{{"HOME", "/home/u"}, {"HF_HUB_CACHE", ""}}, "/home/u/.cache/huggingface/hub"},
      {{}, ""},
  };
  for (const Case& c : cases) EXPECT_EQ(HfHubCacheDir(FakeEnv(c.env)), c.dir);
}

TEST(ModelFlagsTest, LibraryFlagsAndLoomModelsDir) {
  const ModelFlags f =
      Parse({"org/name:Q4_K_M", "--revision", "v1", "--quant", "Q4_K_M", "--models-dir", "/m"});
  EXPECT_EQ(f.model, "org/name:Q4_K_M");
  EXPECT_EQ(f.revision, "v1");
  EXPECT_EQ(f.quant, "Q4_K_M");
  EXPECT_EQ(f.models_dir, "/m");
  const EnvLookup env = FakeEnv({{"LOOM_MODELS_DIR", "/env"}, {"HF_HUB_CACHE", "/hub"}});
  EXPECT_EQ(ResolveLibraryOptions(env, "/m").models_dir, "/m");  // the flag wins
  EXPECT_EQ(ResolveLibraryOptions(env, "").models_dir, "/env");
  EXPECT_EQ(ResolveLibraryOptions(env, "").hub_cache_dir, "/hub");
}

}  // namespace
}  // namespace loom
