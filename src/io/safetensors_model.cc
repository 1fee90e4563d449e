#include "io/safetensors_model.h"

#include <algorithm>
#include <filesystem>

#include "io/json_file.h"

namespace loom {
namespace fs = std::filesystem;

namespace {

bool IsRegularFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// A shard name from index.json must be a plain file name inside the model directory.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos;
}

}  // namespace

StatusOr<SafetensorsModel> SafetensorsModel::Open(const std::string& dir) {
  SafetensorsModel model;
  model.dir_ = dir;
  const fs::path root(dir);
  std::error_code ec;

  if (IsRegularFile(root)) {
    ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(dir));
    for (const std::string& name : file->names()) model.entries_[name] = file.get();
    model.files_.push_back(std::move(file));
    return model;
  }
  if (!fs::is_directory(root, ec)) return NotFoundError(dir + ": no such model directory");

  const fs::path index_path = root / "model.safetensors.index.json";
  if (IsRegularFile(index_path)) {
    const std::string index_name = index_path.string();
    ASSIGN_OR_RETURN(nlohmann::json index, LoadJsonFile(index_name));
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      return InvalidArgumentError(index_name + ": missing \"weight_map\" object");
    }
    std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
    for (const auto& [tensor, shard_json] : index["weight_map"].items()) {
      if (!shard_json.is_string() || !IsPlainFileName(shard_json.get<std::string>())) {
        return InvalidArgumentError(index_name + ": weight_map[\"" + tensor +
                                    "\"] must be a file name in the model directory");
      }
      const std::string shard = shard_json.get<std::string>();
      auto it = shards.find(shard);
      if (it == shards.end()) {
        const fs::path shard_path = root / shard;
        if (!IsRegularFile(shard_path)) {
          return NotFoundError(index_name + ": names shard '" + shard + "' (for tensor '" + tensor +
                               "') which does not exist in " + dir);
        }
        ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(shard_path.string()));
        it = shards.emplace(shard, std::move(file)).first;
      }
      if (it->second->Find(tensor) == nullptr) {
        return NotFoundError(index_name + ": tensor '" + tensor + "' is missing from shard '" +
                             shard + "'");
      }
      model.entries_[tensor] = it->second.get();
    }
    if (shards.empty()) return InvalidArgumentError(index_name + ": weight_map is empty");
    for (auto& [shard, file] : shards) model.files_.push_back(std::move(file));
    return model;
  }

  std::vector<fs::path> paths;
  const fs::path single = root / "model.safetensors";
  if (IsRegularFile(single)) {
    paths.push_back(single);
  } else {
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      if (entry.path().extension() == ".safetensors" && IsRegularFile(entry.path())) {
        paths.push_back(entry.path());
      }
    }
    std::sort(paths.begin(), paths.end());
  }
  if (paths.empty()) {
    return NotFoundError(dir +
                         ": no model.safetensors, model.safetensors.index.json or "
                         "*.safetensors file");
  }
  for (const fs::path& p : paths) {
    ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(p.string()));
    for (const std::string& name : file->names()) {
      auto [it, inserted] = model.entries_.emplace(name, file.get());
      if (!inserted) {
        return InvalidArgumentError(dir + ": tensor '" + name + "' appears in both " +
                                    it->second->path() + " and " + file->path());
      }
    }
    model.files_.push_back(std::move(file));
  }
  return model;
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, file] : entries_) out.push_back(name);
  return out;
}

const SafetensorsTensorInfo* SafetensorsModel::Find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second->Find(name);
}

StatusOr<Tensor> SafetensorsModel::GetTensor(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return NotFoundError(dir_ + ": model has no tensor named '" + name + "'");
  }
  return it->second->GetTensor(name);
}

}  // namespace loom
