#include "cli/pooling_config.h"

#include <filesystem>
#include <vector>

#include "io/json_file.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The Pooling module's folder from modules.json ("" when the pipeline has none).
StatusOr<std::string> PoolingModulePath(const fs::path& modules_file) {
  ASSIGN_OR_RETURN(json modules, LoadJsonFile(modules_file.string()));
  if (!modules.is_array()) {
    return InvalidArgumentError(modules_file.string() + ": expected an array of modules");
  }
  for (const json& m : modules) {
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string()) continue;
    const std::string type = m["type"].get<std::string>();
    // "sentence_transformers.models.Pooling" (or ...models.Pooling.Pooling in newer versions).
    if (type.find("models.Pooling") == std::string::npos) continue;
    return m.contains("path") && m["path"].is_string() ? m["path"].get<std::string>()
                                                       : std::string();
  }
  return std::string();
}

}  // namespace

std::optional<Pooling> ParsePoolingName(const std::string& name) {
  if (name == "last" || name == "lasttoken") return Pooling::kLast;
  if (name == "mean" || name == "mean_tokens") return Pooling::kMean;
  if (name == "cls" || name == "cls_token") return Pooling::kCls;
  return std::nullopt;
}

StatusOr<std::optional<Pooling>> ReadSentenceTransformersPooling(const std::string& model_dir) {
  const fs::path dir(model_dir);
  std::error_code ec;
  const fs::path modules_file = dir / "modules.json";
  const std::optional<Pooling> none;
  if (!fs::is_directory(dir, ec) || !fs::exists(modules_file, ec)) return none;
  ASSIGN_OR_RETURN(std::string module, PoolingModulePath(modules_file));
  if (module.empty()) return none;
  const fs::path config_file = dir / module / "config.json";
  ASSIGN_OR_RETURN(json config, LoadJsonFile(config_file.string()));
  if (!config.is_object()) {
    return InvalidArgumentError(config_file.string() + ": expected a JSON object");
  }
  // Newer sentence-transformers may write the mode as one string.
  if (config.contains("pooling_mode") && config["pooling_mode"].is_string()) {
    const std::string mode = config["pooling_mode"].get<std::string>();
    if (std::optional<Pooling> p = ParsePoolingName(mode)) return p;
    return InvalidArgumentError(config_file.string() + ": pooling_mode \"" + mode +
                                "\" is not implemented (loom pools by lasttoken, mean or cls)");
  }
  struct Mode {
    const char* key;
    std::optional<Pooling> pooling;  // none: not implemented
  };
  const std::vector<Mode> modes = {{"pooling_mode_lasttoken", Pooling::kLast},
                                   {"pooling_mode_mean_tokens", Pooling::kMean},
                                   {"pooling_mode_cls_token", Pooling::kCls},
                                   {"pooling_mode_max_tokens", std::nullopt},
                                   {"pooling_mode_mean_sqrt_len_tokens", std::nullopt},
                                   {"pooling_mode_weightedmean_tokens", std::nullopt}};
  std::vector<const Mode*> set;
  for (const Mode& m : modes) {
    if (config.contains(m.key) && config[m.key].is_boolean() && config[m.key].get<bool>()) {
      set.push_back(&m);
    }
  }
  if (set.empty()) return none;
  if (set.size() > 1) {
    return InvalidArgumentError(config_file.string() +
                                ": several pooling modes at once (concatenated) are not "
                                "implemented (loom pools by one of lasttoken, mean or cls)");
  }
  if (!set[0]->pooling.has_value()) {
    return InvalidArgumentError(config_file.string() + ": " + set[0]->key +
                                " is not implemented (loom pools by lasttoken, mean or cls)");
  }
  return set[0]->pooling;
}

StatusOr<PoolingChoice> ResolvePooling(const std::string& flag, const std::string& model_path) {
  PoolingChoice choice;
  if (flag != "auto") {
    std::optional<Pooling> p = ParsePoolingName(flag);
    if (!p.has_value()) {
      return InvalidArgumentError("--pooling must be auto, last, mean or cls, got " + flag);
    }
    choice.pooling = *p;
    choice.source = "--pooling";
    return choice;
  }
  StatusOr<std::optional<Pooling>> declared = ReadSentenceTransformersPooling(model_path);
  if (!declared.ok()) {
    return InvalidArgumentError(std::string(declared.status().message()) +
                                "; pass --pooling last|mean|cls to choose one");
  }
  if (declared->has_value()) {
    choice.pooling = **declared;
    choice.source = "sentence-transformers config";
    return choice;
  }
  choice.source = "default";
  return choice;
}

}  // namespace loom
