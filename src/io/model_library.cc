#include "io/model_library.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <utility>

#include "base/strings.h"
#include "io/gguf_types.h"
#include "io/hf_cache.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) { return Upper(a) == Upper(b); }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool IsGgufName(std::string_view name) { return EndsWith(Upper(name), ".GGUF"); }

std::string Stem(std::string_view file_name) {
  std::string name = fs::path(std::string(file_name)).filename().string();
  return IsGgufName(name) ? name.substr(0, name.size() - 5) : name;
}

// True when `word` stands in `text` (both upper case) at a word boundary: after the start, '-',
// '.' or '_', and before the end, '-' or '.' (not '_': "Q4_K" is not a word of "Q4_K_M").
bool HasWord(const std::string& text, const std::string& word) {
  if (word.empty()) return false;
  for (size_t pos = text.find(word); pos != std::string::npos; pos = text.find(word, pos + 1)) {
    const size_t end = pos + word.size();
    const bool before =
        pos == 0 || text[pos - 1] == '-' || text[pos - 1] == '.' || text[pos - 1] == '_';
    const bool after = end == text.size() || text[end] == '-' || text[end] == '.';
    if (before && after) return true;
  }
  return false;
}

bool IsDirectory(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool Exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

int64_t FileSize(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

// The part number N of a split file's stem ending in "-N-of-M" (llama.cpp's gguf-split names,
// e.g. "model-00002-of-00003"), or -1 when the stem has no such suffix. Written by hand: GCC 12's
// <regex> does not build warning-free under -fsanitize with -Werror.
int SplitPartNumber(std::string_view stem) {
  auto digits_before = [&](size_t end) {  // start of the run of digits ending at `end`
    size_t b = end;
    while (b > 0 && stem[b - 1] >= '0' && stem[b - 1] <= '9') --b;
    return b;
  };
  const size_t total_begin = digits_before(stem.size());
  if (total_begin == stem.size()) return -1;
  constexpr std::string_view kOf = "-of-";
  if (total_begin < kOf.size() || stem.substr(total_begin - kOf.size(), kOf.size()) != kOf) {
    return -1;
  }
  const size_t part_end = total_begin - kOf.size();
  const size_t part_begin = digits_before(part_end);
  if (part_begin == part_end || part_begin == 0 || stem[part_begin - 1] != '-') return -1;
  int part = 0;
  for (size_t i = part_begin; i < part_end; ++i) {
    part = std::min(part * 10 + (stem[i] - '0'), 1 << 20);
  }
  return part;
}

// The .gguf files of a model directory that can be a model on their own: not a vision
// projector (mmproj*) and not the second or later part of a split file.
std::vector<std::string> GgufCandidates(const std::vector<std::string>& rel_files) {
  std::vector<std::string> out;
  for (const std::string& f : rel_files) {
    if (!IsGgufName(f)) continue;
    const std::string stem = Stem(f);
    if (Upper(stem).rfind("MMPROJ", 0) == 0) continue;
    const int part = SplitPartNumber(stem);
    if (part >= 0 && part != 1) continue;  // a later part of a split file
    out.push_back(f);
  }
  return out;
}

// The id suffix a GGUF file of a several-file repo is known by: its quant tag, else its stem.
std::string FileTag(const std::string& rel_file) {
  const std::string tag = GgufQuantTag(rel_file);
  return tag.empty() ? Stem(rel_file) : tag;
}

std::string DescribeCandidates(const std::vector<std::string>& candidates) {
  std::vector<std::string> items;
  for (const std::string& c : candidates) {
    const std::string tag = GgufQuantTag(c);
    items.push_back(tag.empty() ? c : c + " (" + tag + ")");
  }
  return JoinStrings(items, ", ");
}

// The file among `candidates` (relative to `dir`) that `quant` picks: the one whose stem is
// `quant`, else the only one with `quant` as a word of its stem; with no quant, the only file.
// `what` names the directory or repo in messages.
StatusOr<std::string> PickGguf(const std::string& what, const std::vector<std::string>& candidates,
                               const std::string& quant) {
  if (candidates.empty()) {
    return FailedPreconditionError(what + " holds no .gguf model file");
  }
  if (quant.empty()) {
    if (candidates.size() == 1) return candidates[0];
    return InvalidArgumentError(what + " holds " + std::to_string(candidates.size()) +
                                " GGUF files: pick one with --quant TAG or MODEL:TAG; the files "
                                "are " +
                                DescribeCandidates(candidates));
  }
  std::vector<std::string> matches;
  for (const std::string& c : candidates) {
    if (EqualsIgnoreCase(Stem(c), quant)) return c;
    if (HasWord(Upper(Stem(c)), Upper(quant))) matches.push_back(c);
  }
  if (matches.size() == 1) return matches[0];
  if (matches.empty()) {
    return InvalidArgumentError(what + " has no GGUF file of quant " + quant + "; it has " +
                                DescribeCandidates(candidates));
  }
  return InvalidArgumentError("quant " + quant + " matches " + std::to_string(matches.size()) +
                              " files of " + what + ": " + DescribeCandidates(matches) +
                              "; give the whole tag or the file's name");
}

// A model directory's model: the directory itself when it has config.json (unless `quant` asks
// for one of its GGUF files), else one of its GGUF files. `id` is the id of the directory; a
// picked file of a several-file directory gets ":TAG". A missing blob or a directory with
// neither is FailedPrecondition; `download` ("" = none) is the command that would mend it.
StatusOr<ResolvedModel> PickInDirectory(const std::string& dir, const std::string& id,
                                        const std::string& quant, const std::string& download) {
  const DirectoryFiles files = ListDirectoryFiles(dir);
  const bool has_config =
      std::find(files.files.begin(), files.files.end(), "config.json") != files.files.end();
  const std::vector<std::string> candidates = GgufCandidates(files.files);
  const bool want_gguf = !candidates.empty() && (!has_config || !quant.empty());
  const std::string rerun = download.empty() ? std::string() : "re-run " + download;
  // A GGUF repo stays usable when the file asked for by its tag is there.
  if (!files.missing.empty() &&
      !(want_gguf && !quant.empty() && PickGguf(dir, candidates, quant).ok())) {
    return FailedPreconditionError(dir + " is incomplete: missing blobs for " +
                                   JoinStrings(files.missing, ", ") + " (an interrupted download?" +
                                   (rerun.empty() ? "" : " " + rerun) + ")");
  }
  ResolvedModel out;
  out.id = id;
  if (has_config && !want_gguf) {
    if (!quant.empty()) {
      return InvalidArgumentError("quant " + quant + ": " + dir +
                                  " is a safetensors model (config.json, no .gguf files); a "
                                  "quant picks a file of a GGUF repo");
    }
    out.path = dir;
    return out;
  }
  if (candidates.empty()) {
    return FailedPreconditionError(dir + " has neither config.json nor a .gguf file" +
                                   (rerun.empty() ? "" : " (" + rerun + ")"));
  }
  ASSIGN_OR_RETURN(const std::string file, PickGguf(dir, candidates, quant));
  out.path = (fs::path(dir) / file).string();
  // As List() names it: a repo of several files, present or not, tags each.
  if (candidates.size() + GgufCandidates(files.missing).size() > 1) {
    out.id += ":" + FileTag(file);
  }
  return out;
}

// `huggingface-cli download` of what `ref` names.
std::string DownloadCommand(const ModelRef& ref, const std::string& revision) {
  std::string cmd = "huggingface-cli download " + ref.repo_id;
  if (!revision.empty() && revision != "main") cmd += " --revision " + revision;
  if (!ref.quant.empty()) cmd += " --include '*" + ref.quant + "*.gguf'";
  return cmd;
}

// The entries of one model directory: one for a safetensors model, one per GGUF file.
void AddDirectoryEntries(const std::string& dir, const std::string& id, LibraryEntry base,
                         std::vector<LibraryEntry>* out) {
  const DirectoryFiles files = ListDirectoryFiles(dir);
  const bool has_config =
      std::find(files.files.begin(), files.files.end(), "config.json") != files.files.end();
  const bool config_missing =
      std::find(files.missing.begin(), files.missing.end(), "config.json") != files.missing.end();
  std::vector<std::string> candidates = GgufCandidates(files.files);
  const std::vector<std::string> missing_ggufs = GgufCandidates(files.missing);
  if (has_config || config_missing || (candidates.empty() && missing_ggufs.empty())) {
    LibraryEntry e = std::move(base);
    e.id = id;
    e.path = dir;
    const bool safetensors =
        has_config || config_missing ||
        std::any_of(files.files.begin(), files.files.end(),
                    [](const std::string& f) { return EndsWith(f, ".safetensors"); });
    e.format = safetensors ? "safetensors" : "";
    e.size_bytes = files.size_bytes;
    if (!files.missing.empty())
      e.problems.push_back("missing blobs: " + JoinStrings(files.missing, ", "));
    if (!has_config && !config_missing) e.problems.push_back("no config.json");
    out->push_back(std::move(e));
    return;
  }
  std::vector<std::string> all = candidates;
  all.insert(all.end(), missing_ggufs.begin(), missing_ggufs.end());
  std::sort(all.begin(), all.end());
  for (const std::string& f : all) {
    LibraryEntry e = base;
    e.id = all.size() > 1 ? id + ":" + FileTag(f) : id;
    e.path = (fs::path(dir) / f).string();
    e.format = "gguf";
    e.size_bytes = FileSize(e.path);
    if (std::find(missing_ggufs.begin(), missing_ggufs.end(), f) != missing_ggufs.end()) {
      e.problems.push_back("missing blob: " + f);
    }
    out->push_back(std::move(e));
  }
}

bool LooksLikeModelDir(const fs::path& dir) {
  if (Exists(dir / "config.json")) return true;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (IsGgufName(it->path().filename().string())) return true;
  }
  return false;
}

std::vector<fs::path> SortedChildren(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] != '.') out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::optional<ModelRef> ParseModelRef(std::string_view arg) {
  ModelRef ref;
  std::string_view repo = arg;
  if (const size_t colon = arg.find(':'); colon != std::string_view::npos) {
    repo = arg.substr(0, colon);
    ref.quant = std::string(arg.substr(colon + 1));
    if (ref.quant.empty()) return std::nullopt;
  }
  if (repo.empty() || repo[0] == '.' || repo[0] == '/' || repo[0] == '~') return std::nullopt;
  // A file name that does not exist is a mistyped path, not a repo.
  if (IsGgufName(repo)) return std::nullopt;
  if (repo.find("..") != std::string_view::npos || std::count(repo.begin(), repo.end(), '/') > 1 ||
      repo.back() == '/') {
    return std::nullopt;
  }
  auto word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  };
  if (!std::all_of(repo.begin(), repo.end(), [&](char c) { return word_char(c) || c == '/'; }) ||
      !std::all_of(ref.quant.begin(), ref.quant.end(), word_char)) {
    return std::nullopt;
  }
  ref.repo_id = std::string(repo);
  return ref;
}

std::string GgufQuantTag(std::string_view file_name) {
  const std::string stem = Upper(Stem(file_name));
  std::string best;
  auto consider = [&](const std::string& tag) {
    if (tag.size() > best.size() && HasWord(stem, tag)) best = tag;
  };
  for (int64_t t = 0; t < 64; ++t) consider(GgufFileTypeName(t));
  // Names files carry that are no llama_ftype of their own.
  for (const char* tag : {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q8_K", "MXFP4"}) consider(tag);
  return best;
}

StatusOr<ResolvedModel> ModelLibrary::Resolve(const std::string& model, const std::string& revision,
                                              const std::string& quant) const {
  const std::string rev = revision.empty() ? "main" : revision;
  if (Exists(model)) {
    if (!IsDirectory(model)) {
      if (!quant.empty()) {
        return InvalidArgumentError("--quant " + quant + ": " + model +
                                    " is a file; --quant picks a file of a GGUF repo or directory");
      }
      return ResolvedModel{model, fs::path(model).filename().string(), "path", "", ""};
    }
    std::string dir = model;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    // A Hugging Face directory, or no model directory at all (LoadModel says so).
    if (quant.empty() && (Exists(fs::path(dir) / "config.json") ||
                          GgufCandidates(ListDirectoryFiles(dir).files).empty())) {
      return ResolvedModel{dir, fs::path(dir).filename().string(), "path", "", ""};
    }
    ASSIGN_OR_RETURN(ResolvedModel r,
                     PickInDirectory(dir, fs::path(dir).filename().string(), quant, ""));
    r.id = fs::path(r.path).filename().string();
    r.source = "path";
    return r;
  }
  std::optional<ModelRef> ref = ParseModelRef(model);
  if (!ref.has_value()) {
    return NotFoundError(model +
                         ": no such file or directory (expected a Hugging Face model directory, "
                         "a .gguf file or a model id such as Qwen/Qwen3-8B)");
  }
  if (!ref->quant.empty() && !quant.empty() && !EqualsIgnoreCase(ref->quant, quant)) {
    return InvalidArgumentError(model + " names quant " + ref->quant + " but --quant says " +
                                quant + "; give one of them");
  }
  if (ref->quant.empty()) ref->quant = quant;
  const std::string download = DownloadCommand(*ref, rev);

  std::vector<std::string> looked_at;
  if (!options_.models_dir.empty()) {
    const fs::path dir(options_.models_dir);
    const std::string name = ref->repo_id.substr(ref->repo_id.find('/') + 1);
    std::vector<fs::path> dirs;
    if (ref->repo_id != name) dirs.push_back(dir / ref->repo_id);
    dirs.push_back(dir / name);
    for (const fs::path& d : dirs) {
      looked_at.push_back(d.string() + " (--models-dir)");
      if (!IsDirectory(d)) continue;
      ASSIGN_OR_RETURN(ResolvedModel r, PickInDirectory(d.string(), ref->repo_id, ref->quant, ""));
      r.source = "models-dir";
      return r;
    }
    // DIR/name*.gguf: the file named `name`, else those whose stem starts with the word `name`.
    looked_at.push_back((dir / (name + "*.gguf")).string() + " (--models-dir)");
    std::vector<std::string> files;
    const std::string upper_name = Upper(name);
    for (const fs::path& p : SortedChildren(dir)) {
      const std::string file = p.filename().string();
      if (!IsGgufName(file) || IsDirectory(p)) continue;
      const std::string stem = Upper(Stem(file));
      if (stem == upper_name && ref->quant.empty()) {
        return ResolvedModel{p.string(), ref->repo_id, "models-dir", "", ""};
      }
      if (stem.rfind(upper_name, 0) == 0 &&
          (stem.size() == upper_name.size() || stem[upper_name.size()] == '-' ||
           stem[upper_name.size()] == '.' || stem[upper_name.size()] == '_')) {
        files.push_back(file);
      }
    }
    if (!files.empty()) {
      ASSIGN_OR_RETURN(const std::string file,
                       PickGguf(options_.models_dir + " (" + name + "*.gguf)", files, ref->quant));
      ResolvedModel r{(dir / file).string(), ref->repo_id, "models-dir", "", ""};
      if (files.size() > 1) r.id += ":" + FileTag(file);
      return r;
    }
  }
  if (!options_.hub_cache_dir.empty()) {
    const size_t before = looked_at.size();
    StatusOr<HfSnapshot> snap =
        ResolveHfSnapshot(options_.hub_cache_dir, ref->repo_id, rev, &looked_at);
    for (size_t i = before; i < looked_at.size(); ++i) looked_at[i] += " (Hugging Face cache)";
    if (snap.ok()) {
      ASSIGN_OR_RETURN(ResolvedModel r,
                       PickInDirectory(snap->dir, ref->repo_id, ref->quant, download));
      r.source = "hf-cache";
      r.revision = rev;
      r.commit = snap->commit;
      return r;
    }
    // The repo is cached, the revision is not: that message says what the repo has.
    if (IsDirectory(fs::path(options_.hub_cache_dir) / HfRepoFolderName(ref->repo_id))) {
      return NotFoundError(std::string(snap.status().message()) +
                           "; loom does not download models: " + download);
    }
  } else {
    looked_at.push_back("(no Hugging Face cache: no HF_HUB_CACHE, HF_HOME or HOME)");
  }
  return NotFoundError("model " + model +
                       " was not found locally, and loom does not download models. Looked at:\n  " +
                       JoinStrings(looked_at, "\n  ") + "\nFetch it with: " + download);
}

std::vector<LibraryEntry> ModelLibrary::List() const {
  std::vector<LibraryEntry> out;
  if (!options_.models_dir.empty()) {
    LibraryEntry base;
    base.source = "models-dir";
    for (const fs::path& p : SortedChildren(options_.models_dir)) {
      const std::string name = p.filename().string();
      if (!IsDirectory(p)) {
        if (!IsGgufName(name)) continue;
        LibraryEntry e = base;
        e.id = Stem(name);
        e.path = p.string();
        e.format = "gguf";
        e.size_bytes = FileSize(p);
        out.push_back(std::move(e));
        continue;
      }
      if (LooksLikeModelDir(p)) {
        AddDirectoryEntries(p.string(), name, base, &out);
        continue;
      }
      for (const fs::path& q : SortedChildren(p)) {  // DIR/org/name
        if (IsDirectory(q) && LooksLikeModelDir(q)) {
          AddDirectoryEntries(q.string(), name + "/" + q.filename().string(), base, &out);
        }
      }
    }
  }
  if (!options_.hub_cache_dir.empty()) {
    for (const HfCachedRepo& repo : ScanHfCache(options_.hub_cache_dir)) {
      LibraryEntry base;
      base.source = "hf-cache";
      const std::optional<std::string> commit = DefaultHfCommit(repo);
      if (!commit.has_value()) {
        base.id = repo.repo_id;
        base.path = repo.dir;
        base.problems.push_back("no snapshot (nothing downloaded yet?)");
        out.push_back(std::move(base));
        continue;
      }
      base.commit = *commit;
      if (auto main = repo.refs.find("main"); main != repo.refs.end() && main->second != *commit) {
        // The id alone resolves to main, which cannot load; this snapshot needs --revision.
        base.problems.push_back("refs/main names commit " + main->second +
                                ", which has no snapshot (listed: " + *commit + ")");
      }
      std::vector<std::string> refs;
      for (const auto& [name, c] : repo.refs) {
        if (c == *commit) refs.push_back(name);
      }
      base.revision = JoinStrings(refs, ",");
      AddDirectoryEntries((fs::path(repo.dir) / "snapshots" / *commit).string(), repo.repo_id, base,
                          &out);
    }
  }
  return out;
}

}  // namespace loom
