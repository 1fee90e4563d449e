// Test-only: a Hugging Face hub cache built on disk the way huggingface_hub writes one
// (io/hf_cache.h draws the layout): blobs named by a fake etag, snapshot files as relative
// symlinks into ../../blobs, refs as files holding a commit hash.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "io/hf_cache.h"

namespace loom::testing {

class FakeHfCache {
 public:
  explicit FakeHfCache(std::string root) : root_(std::move(root)) {
    std::filesystem::create_directories(root_);
  }

  const std::string& root() const { return root_; }

  // The 40-hex commit hash "000...0n".
  static std::string Commit(int n) {
    char buf[41];
    std::snprintf(buf, sizeof(buf), "%040x", static_cast<unsigned>(n));
    return buf;
  }

  std::string RepoDir(const std::string& repo_id) const {
    return (std::filesystem::path(root_) / HfRepoFolderName(repo_id)).string();
  }

  // Writes `contents` as a blob (named by its contents, so equal files share one) and links
  // snapshots/<commit>/<file> to it, as a download of that file at that commit does.
  void AddFile(const std::string& repo_id, const std::string& commit, const std::string& file,
               const std::string& contents) {
    namespace fs = std::filesystem;
    const fs::path repo = RepoDir(repo_id);
    const std::string etag = Etag(contents);
    fs::create_directories(repo / "blobs");
    std::ofstream(repo / "blobs" / etag, std::ios::binary) << contents;
    LinkFile(repo_id, commit, file, etag);
  }

  // A snapshot link to a blob that is not there (deleted, or a download cut short).
  void AddDanglingFile(const std::string& repo_id, const std::string& commit,
                       const std::string& file) {
    LinkFile(repo_id, commit, file, "deadbeef" + std::to_string(++num_dangling_));
  }

  void SetRef(const std::string& repo_id, const std::string& ref, const std::string& commit) {
    namespace fs = std::filesystem;
    const fs::path path = fs::path(RepoDir(repo_id)) / "refs" / ref;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << commit;  // huggingface_hub writes no newline
  }

 private:
  static std::string Etag(const std::string& contents) {
    return std::to_string(std::hash<std::string>{}(contents)) + "-" +
           std::to_string(contents.size());
  }

  void LinkFile(const std::string& repo_id, const std::string& commit, const std::string& file,
                const std::string& etag) {
    namespace fs = std::filesystem;
    const fs::path link = fs::path(RepoDir(repo_id)) / "snapshots" / commit / file;
    fs::create_directories(link.parent_path());
    // snapshots/<commit>/a/b -> ../../../blobs/etag: one ".." per level below the repo.
    fs::path target;
    for (const fs::path& part : fs::path(file)) {
      if (!part.empty()) target /= "..";
    }
    target = target / ".." / "blobs" / etag;
    std::error_code ec;
    fs::remove(link, ec);
    fs::create_symlink(target, link);
  }

  std::string root_;
  int num_dangling_ = 0;
};

}  // namespace loom::testing
