#include "io/hf_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "base/strings.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kModelsPrefix = "models--";

// The first line of a small text file, trimmed; nullopt when it cannot be read.
std::optional<std::string> ReadRef(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
    line.pop_back();
  }
  return line;
}

bool IsDirectory(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

}  // namespace

std::string HfRepoFolderName(std::string_view repo_id) {
  std::string out(kModelsPrefix);
  for (char c : repo_id) {
    if (c == '/') {
      out += "--";
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::string> HfRepoIdFromFolderName(std::string_view folder) {
  if (folder.substr(0, kModelsPrefix.size()) != kModelsPrefix) return std::nullopt;
  std::string rest(folder.substr(kModelsPrefix.size()));
  if (rest.empty()) return std::nullopt;
  // huggingface_hub splits on "--"; an org or name never contains it.
  const size_t sep = rest.find("--");
  if (sep == std::string::npos) return rest;
  if (sep == 0 || sep + 2 >= rest.size()) return std::nullopt;
  return rest.substr(0, sep) + "/" + rest.substr(sep + 2);
}

bool IsHfCommitHash(std::string_view s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

StatusOr<HfSnapshot> ResolveHfSnapshot(const std::string& cache_dir, std::string_view repo_id,
                                       std::string_view revision,
                                       std::vector<std::string>* looked_at) {
  std::vector<std::string> ignored;
  if (looked_at == nullptr) looked_at = &ignored;
  const fs::path repo_dir = fs::path(cache_dir) / HfRepoFolderName(repo_id);
  HfSnapshot snap;
  snap.repo_id = std::string(repo_id);
  snap.revision = std::string(revision);
  if (!IsDirectory(repo_dir)) {
    looked_at->push_back(repo_dir.string());
    return NotFoundError(std::string(repo_id) + " is not in the Hugging Face cache (" +
                         repo_dir.string() + " does not exist)");
  }
  const fs::path ref = repo_dir / "refs" / std::string(revision);
  looked_at->push_back(ref.string());
  if (std::optional<std::string> commit = ReadRef(ref); commit.has_value()) {
    snap.commit = *commit;
  } else if (IsHfCommitHash(revision)) {
    snap.commit = std::string(revision);
  }
  if (!snap.commit.empty()) {
    snap.dir = (repo_dir / "snapshots" / snap.commit).string();
    looked_at->push_back(snap.dir);
    if (IsDirectory(snap.dir)) return snap;
    return NotFoundError(std::string(repo_id) + " revision " + std::string(revision) +
                         " is commit " + snap.commit + ", but its snapshot " + snap.dir +
                         " is not in the cache (an interrupted download?)");
  }
  // Say what the repo does have, so that a typo in --revision is easy to see.
  std::vector<std::string> have;
  for (const HfCachedRepo& r : ScanHfCache(cache_dir)) {
    if (r.repo_id != repo_id) continue;
    for (const auto& [name, commit] : r.refs) have.push_back(name + " -> " + commit);
    for (const std::string& s : r.snapshots) have.push_back("snapshot " + s);
  }
  return NotFoundError(
      std::string(repo_id) + " is in the Hugging Face cache but not at revision " +
      std::string(revision) + " (" + ref.string() + " does not exist; the cache has " +
      (have.empty() ? std::string("no refs or snapshots") : JoinStrings(have, ", ")) + ")");
}

std::vector<HfCachedRepo> ScanHfCache(const std::string& cache_dir) {
  std::vector<HfCachedRepo> repos;
  std::error_code ec;
  for (fs::directory_iterator it(cache_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::optional<std::string> id = HfRepoIdFromFolderName(it->path().filename().string());
    if (!id.has_value() || !IsDirectory(it->path())) continue;
    HfCachedRepo repo;
    repo.repo_id = *id;
    repo.dir = it->path().string();
    const fs::path refs = it->path() / "refs";
    std::error_code rec;
    for (fs::recursive_directory_iterator r(refs, rec), rend; !rec && r != rend; r.increment(rec)) {
      std::error_code fec;
      if (!r->is_regular_file(fec)) continue;
      if (std::optional<std::string> commit = ReadRef(r->path()); commit.has_value()) {
        repo.refs[r->path().lexically_relative(refs).generic_string()] = *commit;
      }
    }
    std::error_code sec;
    for (fs::directory_iterator s(it->path() / "snapshots", sec), send; !sec && s != send;
         s.increment(sec)) {
      if (IsDirectory(s->path())) repo.snapshots.push_back(s->path().filename().string());
    }
    std::sort(repo.snapshots.begin(), repo.snapshots.end());
    repos.push_back(std::move(repo));
  }
  std::sort(repos.begin(), repos.end(),
            [](const HfCachedRepo& a, const HfCachedRepo& b) { return a.repo_id < b.repo_id; });
  return repos;
}

std::optional<std::string> DefaultHfCommit(const HfCachedRepo& repo) {
  auto has = [&](const std::string& c) {
    return std::find(repo.snapshots.begin(), repo.snapshots.end(), c) != repo.snapshots.end();
  };
  if (auto main = repo.refs.find("main"); main != repo.refs.end() && has(main->second)) {
    return main->second;
  }
  if (repo.snapshots.empty()) return std::nullopt;
  std::optional<std::string> newest;
  fs::file_time_type newest_time;
  for (const std::string& s : repo.snapshots) {
    std::error_code ec;
    const fs::file_time_type t = fs::last_write_time(fs::path(repo.dir) / "snapshots" / s, ec);
    if (!newest.has_value() || (!ec && t > newest_time)) {
      newest = s;
      newest_time = t;
    }
  }
  return newest;
}

DirectoryFiles ListDirectoryFiles(const std::string& dir) {
  DirectoryFiles out;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::error_code ec;
  const fs::path root(dir);
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (IsDirectory(it->path())) it.disable_recursion_pending();
      continue;
    }
    // Lexically: fs::relative would follow the link into blobs/.
    const std::string rel = it->path().lexically_relative(root).generic_string();
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0) {
      out.missing.push_back(rel);  // a dangling link: its blob is not there
      continue;
    }
    if (S_ISDIR(st.st_mode)) continue;
    out.files.push_back(rel);
    if (seen.insert({st.st_dev, st.st_ino}).second) out.size_bytes += st.st_size;
  }
  std::sort(out.files.begin(), out.files.end());
  std::sort(out.missing.begin(), out.missing.end());
  return out;
}

}  // namespace loom
