// ModelLibrary and the HF cache layout over fake caches built on disk (fake_hf_cache.h): refs,
// snapshots of several revisions linked into shared blobs, a GGUF repo with several quants, a
// broken snapshot, --models-dir, and the errors a missing model gets (the paths looked at, the
// download command).
#include "io/model_library.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "io/fake_hf_cache.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/hf_cache.h"
#include "io/io_test_util.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using testing::FakeHfCache;
using testing::HasError;
using testing::ScratchDir;

const std::string kConfig = R"({"model_type": "llama", "hidden_size": 8})";

TEST(HfCacheTest, FolderNamesRoundTripAsHuggingFaceHubWritesThem) {
  EXPECT_EQ(HfRepoFolderName("Qwen/Qwen3-8B"), "models--Qwen--Qwen3-8B");
  EXPECT_EQ(HfRepoFolderName("gpt2"), "models--gpt2");
  EXPECT_EQ(HfRepoIdFromFolderName("models--Qwen--Qwen3-8B"), "Qwen/Qwen3-8B");
  EXPECT_EQ(HfRepoIdFromFolderName("models--gpt2"), "gpt2");
  EXPECT_EQ(HfRepoIdFromFolderName("datasets--org--data"), std::nullopt);
  EXPECT_EQ(HfRepoIdFromFolderName(".locks"), std::nullopt);
  EXPECT_EQ(HfRepoIdFromFolderName("models--"), std::nullopt);
  EXPECT_TRUE(IsHfCommitHash(FakeHfCache::Commit(7)));
  EXPECT_FALSE(IsHfCommitHash("main"));
  EXPECT_FALSE(IsHfCommitHash(std::string(40, 'A')));  // huggingface_hub's hashes are lowercase
}

TEST(HfCacheTest, ParseModelRefTellsIdsFromPaths) {
  struct Case {
    std::string arg;
    std::optional<std::string> repo;
    std::string quant;
  };
  const Case cases[] = {
      {"Qwen/Qwen3-8B", "Qwen/Qwen3-8B", ""},
      {"gpt2", "gpt2", ""},
      {"unsloth/Qwen3-8B-GGUF:Q4_K_M", "unsloth/Qwen3-8B-GGUF", "Q4_K_M"},
      {"org/name.v1_2:q8_0", "org/name.v1_2", "q8_0"},
      {"./model", std::nullopt, ""},
      {"/abs/model", std::nullopt, ""},
      {"~/model", std::nullopt, ""},
      {"a/b/c", std::nullopt, ""},
      {"a/../b", std::nullopt, ""},
      {"org/", std::nullopt, ""},
      {"org/name:", std::nullopt, ""},
      {"org/na me", std::nullopt, ""},
      {"", std::nullopt, ""},
      {"models/x.gguf", std::nullopt, ""},
  };
  for (const Case& c : cases) {
    const std::optional<ModelRef> ref = ParseModelRef(c.arg);
    ASSERT_EQ(ref.has_value(), c.repo.has_value()) << c.arg;
    if (!ref) continue;
    EXPECT_EQ(ref->repo_id, *c.repo) << c.arg;
    EXPECT_EQ(ref->quant, c.quant) << c.arg;
  }
}

TEST(HfCacheTest, GgufQuantTagIsTheLongestFileTypeWordOfTheName) {
  EXPECT_EQ(GgufQuantTag("Qwen3-8B-Q4_K_M.gguf"), "Q4_K_M");
  EXPECT_EQ(GgufQuantTag("sub/qwen3-8b-q4_k_m.gguf"), "Q4_K_M");
  EXPECT_EQ(GgufQuantTag("llama.Q8_0.gguf"), "Q8_0");
  EXPECT_EQ(GgufQuantTag("gemma-3-4b-it-f16.gguf"), "F16");
  EXPECT_EQ(GgufQuantTag("model-BF16-00001-of-00002.gguf"), "BF16");
  EXPECT_EQ(GgufQuantTag("m-IQ4_XS.gguf"), "IQ4_XS");
  EXPECT_EQ(GgufQuantTag("m-Q4_K.gguf"), "Q4_K");
  EXPECT_EQ(GgufQuantTag("stories260K.gguf"), "");
  EXPECT_EQ(GgufFileTypeName(15), "Q4_K_M");
  EXPECT_EQ(GgufFileTypeName(1), "F16");
  EXPECT_EQ(GgufFileTypeName(32), "BF16");
  EXPECT_EQ(GgufFileTypeName(4), "");  // retired
  EXPECT_EQ(GgufFileTypeName(1000), "");
}

// One safetensors repo at three commits: main (2), the tag v1 (1), and a snapshot no ref names
// (3); commits 1 and 2 share the weights blob.
class HfRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = std::make_unique<FakeHfCache>(ScratchDir() + "/hub");
    for (int c : {1, 2, 3}) {
      cache_->AddFile("org/model", FakeHfCache::Commit(c), "config.json",
                      R"({"model_type": "llama", "rev": )" + std::to_string(c) + "}");
    }
    cache_->AddFile("org/model", FakeHfCache::Commit(1), "model.safetensors",
                    std::string(1000, 'w'));
    cache_->AddFile("org/model", FakeHfCache::Commit(2), "model.safetensors",
                    std::string(1000, 'w'));
    cache_->SetRef("org/model", "main", FakeHfCache::Commit(2));
    cache_->SetRef("org/model", "v1", FakeHfCache::Commit(1));
    cache_->SetRef("org/model", "refs/pr/1", FakeHfCache::Commit(3));
  }

  ModelLibrary Library() const { return ModelLibrary({cache_->root(), ""}); }
  std::string Snapshot(int c) const {
    return cache_->RepoDir("org/model") + "/snapshots/" + FakeHfCache::Commit(c);
  }

  std::unique_ptr<FakeHfCache> cache_;
};

TEST_F(HfRepoTest, RevisionIsABranchATagOrACommit) {
  struct Case {
    std::string revision;
    int commit;
  };
  for (const Case& c : {Case{"", 2}, Case{"main", 2}, Case{"v1", 1}, Case{"refs/pr/1", 3},
                        Case{FakeHfCache::Commit(3), 3}}) {
    StatusOr<ResolvedModel> r = Library().Resolve("org/model", c.revision, "");
    ASSERT_TRUE(r.ok()) << c.revision << ": " << r.status().ToString();
    EXPECT_EQ(r->path, Snapshot(c.commit)) << c.revision;
    EXPECT_EQ(r->commit, FakeHfCache::Commit(c.commit));
    EXPECT_EQ(r->revision, c.revision.empty() ? "main" : c.revision);
    EXPECT_EQ(r->id, "org/model");
    EXPECT_EQ(r->source, "hf-cache");
  }
}

TEST_F(HfRepoTest, AnUnknownRevisionNamesWhatTheCacheHas) {
  const Status s = Library().Resolve("org/model", "v2", "").status();
  EXPECT_TRUE(HasError(s, StatusCode::kNotFound,
                       {"not at revision v2", "refs/v2", "main -> " + FakeHfCache::Commit(2),
                        "v1 -> " + FakeHfCache::Commit(1), "snapshot " + FakeHfCache::Commit(3),
                        "huggingface-cli download org/model --revision v2"}));
  // A ref whose snapshot is gone.
  cache_->SetRef("org/model", "gone", FakeHfCache::Commit(9));
  EXPECT_TRUE(HasError(Library().Resolve("org/model", "gone", "").status(), StatusCode::kNotFound,
                       {"commit " + FakeHfCache::Commit(9), "is not in the cache"}));
}

TEST_F(HfRepoTest, ScanFindsRefsAndSnapshotsAndSizesCountABlobOnce) {
  const std::vector<HfCachedRepo> repos = ScanHfCache(cache_->root());
  ASSERT_EQ(repos.size(), 1u);
  EXPECT_EQ(repos[0].repo_id, "org/model");
  EXPECT_EQ(repos[0].refs.size(), 3u);
  EXPECT_EQ(repos[0].refs.at("refs/pr/1"), FakeHfCache::Commit(3));
  EXPECT_EQ(repos[0].snapshots,
            (std::vector<std::string>{FakeHfCache::Commit(1), FakeHfCache::Commit(2),
                                      FakeHfCache::Commit(3)}));
  EXPECT_EQ(DefaultHfCommit(repos[0]), FakeHfCache::Commit(2));

  // The same weights linked twice in one snapshot are one blob on disk.
  cache_->AddFile("org/model", FakeHfCache::Commit(2), "copy/model.safetensors",
                  std::string(1000, 'w'));
  const DirectoryFiles files = ListDirectoryFiles(Snapshot(2));
  EXPECT_EQ(files.files, (std::vector<std::string>{"config.json", "copy/model.safetensors",
                                                   "model.safetensors"}));
  EXPECT_TRUE(files.missing.empty());
  const int64_t config_bytes = static_cast<int64_t>(fs::file_size(Snapshot(2) + "/config.json"));
  EXPECT_EQ(files.size_bytes, 1000 + config_bytes);

  const std::vector<LibraryEntry> list = Library().List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].id, "org/model");
  EXPECT_EQ(list[0].revision, "main");
  EXPECT_EQ(list[0].commit, FakeHfCache::Commit(2));
  EXPECT_EQ(list[0].format, "safetensors");
  EXPECT_EQ(list[0].size_bytes, 1000 + config_bytes);
  EXPECT_TRUE(list[0].problems.empty());
}

TEST(HfCacheTest, EnvironmentlessCacheDirectoryIsNoCache) {
  const ModelLibrary library({"", ""});
  EXPECT_TRUE(HasError(library.Resolve("org/model", "", "").status(), StatusCode::kNotFound,
                       {"no Hugging Face cache", "huggingface-cli download org/model"}));
  EXPECT_TRUE(library.List().empty());
}

// A GGUF repo (unsloth's layout): quants side by side, one in a folder, a vision projector.
class GgufRepoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = std::make_unique<FakeHfCache>(ScratchDir() + "/hub");
    const std::string c = FakeHfCache::Commit(1);
    for (const char* f : {"Qwen3-8B-Q4_K_M.gguf", "Qwen3-8B-Q4_K_S.gguf", "Qwen3-8B-Q8_0.gguf",
                          "BF16/Qwen3-8B-BF16-00001-of-00002.gguf",
                          "BF16/Qwen3-8B-BF16-00002-of-00002.gguf", "mmproj-F16.gguf"}) {
      cache_->AddFile("unsloth/Qwen3-8B-GGUF", c, f, std::string("GGUF ") + f);
    }
    cache_->AddFile("unsloth/Qwen3-8B-GGUF", c, "README.md", "# readme");
    cache_->SetRef("unsloth/Qwen3-8B-GGUF", "main", c);
  }

  std::string Snapshot() const {
    return cache_->RepoDir("unsloth/Qwen3-8B-GGUF") + "/snapshots/" + FakeHfCache::Commit(1);
  }
  ModelLibrary Library() const { return ModelLibrary({cache_->root(), ""}); }

  std::unique_ptr<FakeHfCache> cache_;
};

TEST_F(GgufRepoTest, TheQuantTagPicksTheFile) {
  struct Case {
    std::string model, quant, file, id;
  };
  const Case cases[] = {
      {"unsloth/Qwen3-8B-GGUF:Q4_K_M", "", "Qwen3-8B-Q4_K_M.gguf", "unsloth/Qwen3-8B-GGUF:Q4_K_M"},
      {"unsloth/Qwen3-8B-GGUF", "q8_0", "Qwen3-8B-Q8_0.gguf", "unsloth/Qwen3-8B-GGUF:Q8_0"},
      {"unsloth/Qwen3-8B-GGUF:Q4_K_S", "q4_k_s", "Qwen3-8B-Q4_K_S.gguf",
       "unsloth/Qwen3-8B-GGUF:Q4_K_S"},
      // The first part of a split file stands for it; the later parts are no candidates.
      {"unsloth/Qwen3-8B-GGUF:BF16", "", "BF16/Qwen3-8B-BF16-00001-of-00002.gguf",
       "unsloth/Qwen3-8B-GGUF:BF16"},
      // A whole file name works too.
      {"unsloth/Qwen3-8B-GGUF:Qwen3-8B-Q8_0", "", "Qwen3-8B-Q8_0.gguf",
       "unsloth/Qwen3-8B-GGUF:Q8_0"},
  };
  for (const Case& c : cases) {
    StatusOr<ResolvedModel> r = Library().Resolve(c.model, "", c.quant);
    ASSERT_TRUE(r.ok()) << c.model << ": " << r.status().ToString();
    EXPECT_EQ(r->path, Snapshot() + "/" + c.file) << c.model;
    EXPECT_EQ(r->id, c.id) << c.model;
  }
}

TEST_F(GgufRepoTest, NoQuantOrAnAmbiguousOneListsTheCandidates) {
  EXPECT_TRUE(HasError(
      Library().Resolve("unsloth/Qwen3-8B-GGUF", "", "").status(), StatusCode::kInvalidArgument,
      {"holds 4 GGUF files", "--quant TAG or MODEL:TAG", "Qwen3-8B-Q4_K_M.gguf (Q4_K_M)",
       "Qwen3-8B-Q8_0.gguf (Q8_0)", "BF16/Qwen3-8B-BF16-00001-of-00002.gguf (BF16)"}));
  // Q4_K is a word of neither Q4_K_M nor Q4_K_S.
  EXPECT_TRUE(HasError(Library().Resolve("unsloth/Qwen3-8B-GGUF:Q4_K", "", "").status(),
                       StatusCode::kInvalidArgument,
                       {"has no GGUF file of quant Q4_K", "Qwen3-8B-Q4_K_S.gguf (Q4_K_S)"}));
  EXPECT_TRUE(HasError(Library().Resolve("unsloth/Qwen3-8B-GGUF:Q4_K_M", "", "Q8_0").status(),
                       StatusCode::kInvalidArgument, {"names quant Q4_K_M but --quant says Q8_0"}));
}

TEST_F(GgufRepoTest, ListShowsOneEntryPerQuantThatResolvesBack) {
  const std::vector<LibraryEntry> list = Library().List();
  std::vector<std::string> ids;
  for (const LibraryEntry& e : list) ids.push_back(e.id);
  EXPECT_EQ(ids, (std::vector<std::string>{
                     "unsloth/Qwen3-8B-GGUF:BF16", "unsloth/Qwen3-8B-GGUF:Q4_K_M",
                     "unsloth/Qwen3-8B-GGUF:Q4_K_S", "unsloth/Qwen3-8B-GGUF:Q8_0"}));
  for (const LibraryEntry& e : list) {
    EXPECT_EQ(e.format, "gguf");
    EXPECT_EQ(e.size_bytes, static_cast<int64_t>(fs::file_size(e.path)));
    StatusOr<ResolvedModel> r = Library().Resolve(e.id, "", "");
    ASSERT_TRUE(r.ok()) << e.id << ": " << r.status().ToString();
    EXPECT_EQ(r->path, e.path);
    EXPECT_EQ(r->id, e.id);
  }
}

TEST(ModelLibraryTest, BrokenSnapshotsAreListedAndRefusedWithTheReason) {
  FakeHfCache cache(ScratchDir() + "/hub");
  const std::string c = FakeHfCache::Commit(1);
  // Weights there, config.json's blob gone.
  cache.AddDanglingFile("org/no-blob", c, "config.json");
  cache.AddFile("org/no-blob", c, "model.safetensors", "weights");
  cache.SetRef("org/no-blob", "main", c);
  // Only the tokenizer was downloaded.
  cache.AddFile("org/no-config", c, "tokenizer.json", "{}");
  cache.SetRef("org/no-config", "main", c);
  // A ref and nothing else.
  cache.SetRef("org/no-snapshot", "main", c);
  // A GGUF repo missing one quant's blob: the others still load.
  cache.AddFile("org/gguf", c, "m-Q8_0.gguf", "GGUF q8");
  cache.AddDanglingFile("org/gguf", c, "m-Q4_0.gguf");
  cache.SetRef("org/gguf", "main", c);
  // main moved on to a commit that was never downloaded.
  cache.AddFile("org/stale", c, "config.json", kConfig);
  cache.SetRef("org/stale", "main", FakeHfCache::Commit(2));
  const ModelLibrary library({cache.root(), ""});

  const std::vector<LibraryEntry> list = library.List();
  ASSERT_EQ(list.size(), 6u);
  EXPECT_EQ(list[0].id, "org/gguf:Q4_0");
  EXPECT_EQ(list[0].problems, (std::vector<std::string>{"missing blob: m-Q4_0.gguf"}));
  EXPECT_EQ(list[1].id, "org/gguf:Q8_0");
  EXPECT_TRUE(list[1].problems.empty());
  EXPECT_EQ(list[2].id, "org/no-blob");
  EXPECT_EQ(list[2].format, "safetensors");
  EXPECT_EQ(list[2].problems, (std::vector<std::string>{"missing blobs: config.json"}));
  EXPECT_EQ(list[3].id, "org/no-config");
  EXPECT_EQ(list[3].format, "");
  EXPECT_EQ(list[3].problems, (std::vector<std::string>{"no config.json"}));
  EXPECT_EQ(list[4].id, "org/no-snapshot");
  EXPECT_EQ(list[4].problems.size(), 1u);
  EXPECT_EQ(list[5].id, "org/stale");
  EXPECT_EQ(list[5].commit, c);
  EXPECT_EQ(list[5].revision, "");
  EXPECT_EQ(list[5].problems,
            (std::vector<std::string>{"refs/main names commit " + FakeHfCache::Commit(2) +
                                      ", which has no snapshot (listed: " + c + ")"}));

  EXPECT_TRUE(HasError(library.Resolve("org/no-blob", "", "").status(),
                       StatusCode::kFailedPrecondition,
                       {"is incomplete: missing blobs for config.json",
                        "re-run huggingface-cli download org/no-blob"}));
  EXPECT_TRUE(HasError(library.Resolve("org/no-config", "", "").status(),
                       StatusCode::kFailedPrecondition, {"neither config.json nor a .gguf file"}));
  EXPECT_TRUE(HasError(library.Resolve("org/no-snapshot", "", "").status(), StatusCode::kNotFound,
                       {"is not in the cache"}));
  StatusOr<ResolvedModel> q8 = library.Resolve("org/gguf:Q8_0", "", "");
  ASSERT_TRUE(q8.ok()) << q8.status().ToString();
  EXPECT_TRUE(HasError(library.Resolve("org/gguf:Q4_0", "", "").status(),
                       StatusCode::kFailedPrecondition, {"missing blobs for m-Q4_0.gguf"}));
}

TEST(ModelLibraryTest, AMissingModelNamesEveryPathLookedAtAndTheDownloadCommand) {
  const std::string root = ScratchDir();
  fs::create_directories(root + "/models");
  const ModelLibrary library({root + "/hub", root + "/models"});
  const Status s = library.Resolve("Qwen/Qwen3-8B", "", "").status();
  EXPECT_TRUE(HasError(
      s, StatusCode::kNotFound,
      {"model Qwen/Qwen3-8B was not found locally", "loom does not download models",
       root + "/models/Qwen/Qwen3-8B (--models-dir)", root + "/models/Qwen3-8B (--models-dir)",
       root + "/models/Qwen3-8B*.gguf (--models-dir)",
       root + "/hub/models--Qwen--Qwen3-8B (Hugging Face cache)",
       "Fetch it with: huggingface-cli download Qwen/Qwen3-8B"}));
  EXPECT_TRUE(HasError(library.Resolve("org/x-GGUF:Q4_K_M", "v2", "").status(),
                       StatusCode::kNotFound,
                       {"huggingface-cli download org/x-GGUF --revision v2 --include "
                        "'*Q4_K_M*.gguf'"}));
  // Not an id, not a path.
  EXPECT_TRUE(HasError(library.Resolve("./nowhere", "", "").status(), StatusCode::kNotFound,
                       {"./nowhere: no such file or directory"}));
}

TEST(ModelLibraryTest, ModelsDirIsSearchedFirstInItsThreeShapes) {
  const std::string root = ScratchDir();
  FakeHfCache cache(root + "/hub");
  cache.AddFile("org/a", FakeHfCache::Commit(1), "config.json", kConfig);
  cache.SetRef("org/a", "main", FakeHfCache::Commit(1));
  const std::string dir = root + "/models";
  fs::create_directories(dir + "/org/a");
  testing::WriteBytes(dir + "/org/a/config.json", kConfig);
  fs::create_directories(dir + "/b");
  testing::WriteBytes(dir + "/b/b-Q8_0.gguf", "GGUF");
  testing::WriteBytes(dir + "/c-Q4_K_M.gguf", "GGUF");
  testing::WriteBytes(dir + "/c-Q8_0.gguf", "GGUF");
  testing::WriteBytes(dir + "/d.gguf", "GGUF");
  fs::create_directories(dir + "/empty-org");
  const ModelLibrary library({cache.root(), dir});

  struct Case {
    std::string model, path, id;
  };
  const Case cases[] = {
      {"org/a", dir + "/org/a", "org/a"},  // wins over the HF cache's org/a
      {"someone/b", dir + "/b/b-Q8_0.gguf", "someone/b"},
      {"b", dir + "/b/b-Q8_0.gguf", "b"},
      {"c:Q4_K_M", dir + "/c-Q4_K_M.gguf", "c:Q4_K_M"},
      {"c-Q8_0", dir + "/c-Q8_0.gguf", "c-Q8_0"},
      {"d", dir + "/d.gguf", "d"},
  };
  for (const Case& c : cases) {
    StatusOr<ResolvedModel> r = library.Resolve(c.model, "", "");
    ASSERT_TRUE(r.ok()) << c.model << ": " << r.status().ToString();
    EXPECT_EQ(r->path, c.path) << c.model;
    EXPECT_EQ(r->id, c.id) << c.model;
    EXPECT_EQ(r->source, "models-dir") << c.model;
  }
  EXPECT_TRUE(HasError(library.Resolve("c", "", "").status(), StatusCode::kInvalidArgument,
                       {"holds 2 GGUF files", "c-Q4_K_M.gguf (Q4_K_M)", "c-Q8_0.gguf (Q8_0)"}));

  std::vector<std::string> ids;
  for (const LibraryEntry& e : library.List()) ids.push_back(e.source + " " + e.id);
  EXPECT_EQ(ids,
            (std::vector<std::string>{"models-dir b", "models-dir c-Q4_K_M", "models-dir c-Q8_0",
                                      "models-dir d", "models-dir org/a", "hf-cache org/a"}));
}

TEST(ModelLibraryTest, AnExistingPathIsTakenAsItIs) {
  const std::string root = ScratchDir();
  fs::create_directories(root + "/hf");
  testing::WriteBytes(root + "/hf/config.json", kConfig);
  fs::create_directories(root + "/ggufs");
  testing::WriteBytes(root + "/ggufs/m-Q4_0.gguf", "GGUF");
  testing::WriteBytes(root + "/ggufs/m-Q8_0.gguf", "GGUF");
  const ModelLibrary library({root + "/hub", ""});
  StatusOr<ResolvedModel> hf = library.Resolve(root + "/hf/", "", "");
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  EXPECT_EQ(hf->path, root + "/hf");
  EXPECT_EQ(hf->id, "hf");
  EXPECT_EQ(hf->source, "path");
  StatusOr<ResolvedModel> file = library.Resolve(root + "/ggufs/m-Q4_0.gguf", "", "");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->id, "m-Q4_0.gguf");
  // A directory of GGUF files: --quant picks one, as in a repo.
  StatusOr<ResolvedModel> picked = library.Resolve(root + "/ggufs", "", "Q8_0");
  ASSERT_TRUE(picked.ok()) << picked.status().ToString();
  EXPECT_EQ(picked->path, root + "/ggufs/m-Q8_0.gguf");
  EXPECT_TRUE(HasError(library.Resolve(root + "/ggufs/m-Q4_0.gguf", "", "Q8_0").status(),
                       StatusCode::kInvalidArgument, {"is a file"}));
  EXPECT_TRUE(HasError(library.Resolve(root + "/hf", "", "Q8_0").status(),
                       StatusCode::kInvalidArgument, {"is a safetensors model"}));
  // A directory with both: the quant asks for the GGUF file.
  testing::WriteBytes(root + "/hf/m-Q8_0.gguf", "GGUF");
  StatusOr<ResolvedModel> both = library.Resolve(root + "/hf", "", "Q8_0");
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(both->path, root + "/hf/m-Q8_0.gguf");
  StatusOr<ResolvedModel> dir = library.Resolve(root + "/hf", "", "");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(dir->path, root + "/hf");
}

// GgufFile::OpenHeader reads what `loom list` needs of a file whose tensor types loom cannot
// load (here q5_K, ggml type 13, patched into a q8_0 file's header).
TEST(GgufHeaderTest, OpenHeaderAcceptsTensorTypesLoomCannotLoad) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetU32("general.file_type", 12);
  w.AddTensor("blk.0.w", DType::kF32, Shape{2, 3}, testing::FloatBytes({0, 1, 2, 3, 4, 5}));
  std::string bytes = w.Serialize();
  const std::string name = testing::Le64(7) + "blk.0.w";
  const size_t at = bytes.find(name);
  ASSERT_NE(at, std::string::npos);
  const size_t type_at = at + name.size() + 4 + 2 * 8;  // n_dims, ne[0..1]
  ASSERT_EQ(bytes[type_at], 0);                         // f32
  bytes[type_at] = 11;                                  // q3_K
  const std::string path = ScratchDir() + "/q3k.gguf";
  testing::WriteBytes(path, bytes);

  EXPECT_EQ(GgufFile::Open(path).status().code(), StatusCode::kUnimplemented);
  StatusOr<std::shared_ptr<GgufFile>> f = GgufFile::OpenHeader(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE((*f)->header_only());
  EXPECT_EQ((*f)->architecture(), "llama");
  ASSERT_EQ((*f)->tensors().size(), 1u);
  EXPECT_EQ((*f)->tensors()[0].ggml_type, 11u);
  EXPECT_EQ((*f)->tensors()[0].shape, (Shape{2, 3}));
  EXPECT_EQ(GgufFileTypeName(*(*f)->GetInt("general.file_type")), "Q3_K_M");
  EXPECT_EQ((*f)->GetTensor("blk.0.w").status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace loom
