// The local Hugging Face hub cache, laid out as huggingface_hub writes it (file_download.py):
//
//   <cache>/models--{org}--{name}/        one repo ("org/name"; "name" alone: models--{name})
//     refs/{revision}                      a branch or tag name -> a 40-hex commit hash (no
//     newline;
//                                          "refs/pr/1" lives at refs/refs/pr/1)
//     snapshots/{commit}/{path in repo}    the repo's files at that commit: relative symlinks
//                                          into ../../blobs (copies on filesystems without links)
//     blobs/{etag}                         file contents, shared by every snapshot that has them
//
// Only reading: loom never writes into the cache and never downloads. Which directory is the
// cache ($HF_HUB_CACHE, $HF_HOME/hub, ...) is the CLI's decision (cli/session.cc); this file
// takes it as a parameter.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace loom {

// "models--Qwen--Qwen3-8B" for "Qwen/Qwen3-8B" (huggingface_hub's repo_folder_name).
std::string HfRepoFolderName(std::string_view repo_id);
// The inverse: "Qwen/Qwen3-8B" for "models--Qwen--Qwen3-8B"; nullopt for anything that is not a
// model repo's folder (datasets--*, spaces--*, .locks, version.txt).
std::optional<std::string> HfRepoIdFromFolderName(std::string_view folder);
// True for a full commit hash: 40 lowercase hex digits.
bool IsHfCommitHash(std::string_view s);

// One repo's snapshot, resolved from a revision.
struct HfSnapshot {
  std::string repo_id;
  std::string revision;  // as asked: a branch, a tag or a commit hash
  std::string commit;    // the 40-hex commit the revision names
  std::string dir;       // <cache>/models--org--name/snapshots/<commit>
};

// Resolves `repo_id` at `revision` in `cache_dir`: refs/<revision> holds the commit, or
// `revision` is itself a commit hash with a snapshot directory. Each path it looks at is appended
// to *looked_at (may be null). NotFound when the repo is not cached, or names the refs and
// snapshots the repo does have when the revision is not among them.
StatusOr<HfSnapshot> ResolveHfSnapshot(const std::string& cache_dir, std::string_view repo_id,
                                       std::string_view revision,
                                       std::vector<std::string>* looked_at);

// One cached model repo as found on disk.
struct HfCachedRepo {
  std::string repo_id;
  std::string dir;                          // <cache>/models--org--name
  std::map<std::string, std::string> refs;  // "main" -> commit (every file under refs/)
  std::vector<std::string> snapshots;       // the commits under snapshots/, sorted
};

// Every model repo in `cache_dir`, sorted by repo id. A missing or unreadable cache is an empty
// list; unreadable parts of a repo are left out, never an error.
std::vector<HfCachedRepo> ScanHfCache(const std::string& cache_dir);

// The snapshot `listing` shows by default: refs/main's, else the only snapshot, else the one
// modified last; nullopt when the repo has no snapshot at all.
std::optional<std::string> DefaultHfCommit(const HfCachedRepo& repo);

// The files of a snapshot (or any model directory), links followed.
struct DirectoryFiles {
  std::vector<std::string> files;    // paths relative to the directory, sorted
  std::vector<std::string> missing;  // links whose target does not exist (a missing blob)
  // Sum of the distinct files' sizes: a blob two links point at is counted once.
  int64_t size_bytes = 0;
};

// Walks `dir` recursively (hidden entries skipped). Never fails: unreadable entries are missing.
DirectoryFiles ListDirectoryFiles(const std::string& dir);

}  // namespace loom
