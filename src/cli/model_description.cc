#include "cli/model_description.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "base/mapped_file.h"
#include "io/gguf.h"
#include "io/hf_cache.h"
#include "io/json_file.h"
#include "tokenizer/chat_template/chat_template.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

int64_t JsonInt(const json& obj, const char* key, int64_t def = 0) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() ? it->get<int64_t>() : def;
}

std::string JsonString(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The element count and per-dtype elements of the tensors in one safetensors file's header
// (the 8-byte length and the JSON after it; the data is not read).
struct HeaderCount {
  int64_t num_params = 0;
  std::map<std::string, int64_t> elems_by_dtype;
};

Status CountSafetensorsHeader(const std::string& path, HeaderCount* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot be opened");
  unsigned char len_bytes[8] = {};
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | len_bytes[i];
  if (!in || len == 0 || len > 100'000'000) {
    return InvalidArgumentError(path + ": not a safetensors file (header length " +
                                std::to_string(len) + ")");
  }
  std::string header(len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(len));
  if (!in) return InvalidArgumentError(path + ": truncated safetensors header");
  ASSIGN_OR_RETURN(const json j, ParseJson(header, path));
  if (!j.is_object()) return InvalidArgumentError(path + ": safetensors header is not an object");
  for (const auto& [name, info] : j.items()) {
    if (name == "__metadata__" || !info.is_object()) continue;
    int64_t numel = 1;
    if (auto shape = info.find("shape"); shape != info.end() && shape->is_array()) {
      for (const json& d : *shape) numel *= d.is_number_integer() ? d.get<int64_t>() : 0;
    }
    // MXFP4 (gpt-oss): `_blocks` bytes hold two 4-bit weights each; `_scales` are exponents.
    const std::string dtype = JsonString(info, "dtype");
    if (dtype == "U8" && name.ends_with("_scales")) continue;
    if (dtype == "U8" && name.ends_with("_blocks")) numel *= 2;
    out->num_params += numel;
    out->elems_by_dtype[dtype] += numel;
  }
  return OkStatus();
}

// The safetensors files a directory's model is made of, as SafetensorsModel picks them: the
// index's shards, else model.safetensors, else every *.safetensors.
std::vector<std::string> SafetensorsFiles(const fs::path& dir) {
  std::set<std::string> files;
  if (StatusOr<json> index = LoadJsonFile((dir / "model.safetensors.index.json").string());
      index.ok() && index->is_object()) {
    if (auto map = index->find("weight_map"); map != index->end() && map->is_object()) {
      for (const auto& [tensor, file] : map->items()) {
        if (file.is_string()) files.insert((dir / file.get<std::string>()).string());
      }
    }
    return {files.begin(), files.end()};
  }
  if (Exists(dir / "model.safetensors")) return {(dir / "model.safetensors").string()};
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".safetensors") files.insert(it->path().string());
  }
  return {files.begin(), files.end()};
}

// A dense decoder's parameters from config.json's sizes: embeddings (twice unless tied), per
// layer q/k/v/o, a gated MLP (times the experts of a MoE, plus its router) and two norms, and
// the final norm. Biases and extra norms are left out: approximate.
int64_t ParamsFromConfig(const json& c) {
  const int64_t h = JsonInt(c, "hidden_size");
  const int64_t layers = JsonInt(c, "num_hidden_layers");
  const int64_t vocab = JsonInt(c, "vocab_size");
  const int64_t heads = JsonInt(c, "num_attention_heads");
  if (h <= 0 || layers <= 0 || vocab <= 0 || heads <= 0) return 0;
  const int64_t kv_heads = JsonInt(c, "num_key_value_heads", heads);
  const int64_t head_dim = JsonInt(c, "head_dim", h / heads);
  const int64_t experts = std::max<int64_t>(
      1,
      JsonInt(c, "num_local_experts", JsonInt(c, "num_experts", JsonInt(c, "n_routed_experts"))));
  const int64_t ffn = experts > 1
                          ? JsonInt(c, "moe_intermediate_size", JsonInt(c, "intermediate_size"))
                          : JsonInt(c, "intermediate_size");
  const int64_t attn = h * head_dim * (heads + 2 * kv_heads) + heads * head_dim * h;
  const int64_t mlp = experts * 3 * h * ffn + (experts > 1 ? h * experts : 0);
  bool tied = false;
  if (auto it = c.find("tie_word_embeddings"); it != c.end() && it->is_boolean()) {
    tied = it->get<bool>();
  }
  return vocab * h * (tied ? 1 : 2) + layers * (attn + mlp + 2 * h) + h;
}

// "bf16" from "BF16"; the dtype holding most elements.
std::string DominantDtype(const std::map<std::string, int64_t>& elems_by_dtype) {
  std::string best;
  int64_t most = -1;
  for (const auto& [dtype, n] : elems_by_dtype) {
    if (n > most) {
      best = dtype;
      most = n;
    }
  }
  return Lower(best);
}

void DescribeConfig(const json& config, ModelCard* card) {
  // Multimodal checkpoints (Gemma 3) keep the decoder's sizes under text_config.
  const json& text = config.contains("text_config") && config["text_config"].is_object()
                         ? config["text_config"]
                         : config;
  card->architecture = JsonString(config, "model_type");
  if (card->architecture.empty()) card->architecture = JsonString(text, "model_type");
  card->context_length =
      JsonInt(text, "max_position_embeddings", JsonInt(config, "max_position_embeddings"));
  card->num_params = ParamsFromConfig(text);
  if (card->num_params > 0) card->params_source = "config.json shapes";
  if (auto q = config.find("quantization_config"); q != config.end() && q->is_object()) {
    card->quantization = JsonString(*q, "quant_method");
    if (const int64_t bits = JsonInt(*q, "bits"); bits > 0) {
      card->quantization += " " + std::to_string(bits) + "-bit";
    }
  }
  if (card->quantization.empty()) {
    card->quantization = JsonString(config, "torch_dtype");
    if (card->quantization.empty()) card->quantization = JsonString(config, "dtype");
    if (card->quantization == "bfloat16") card->quantization = "bf16";
    if (card->quantization == "float16") card->quantization = "f16";
    if (card->quantization == "float32") card->quantization = "f32";
  }
}

void DescribeDirectory(const fs::path& dir, ModelCard* card) {
  card->format = "safetensors";
  card->size_bytes = ListDirectoryFiles(dir.string()).size_bytes;
  StatusOr<json> config = LoadJsonFile((dir / "config.json").string());
  if (config.ok() && config->is_object()) {
    DescribeConfig(*config, card);
  } else if (!config.ok() && config.status().code() != StatusCode::kNotFound) {
    card->problems.push_back(std::string(config.status().message()));
  }
  // The exact count and dtype from the weights' headers, when they are all there.
  HeaderCount count;
  const std::vector<std::string> files = SafetensorsFiles(dir);
  bool all_read = !files.empty();
  for (const std::string& f : files) {
    if (!Exists(f)) {
      all_read = false;
      continue;
    }
    if (Status s = CountSafetensorsHeader(f, &count); !s.ok()) {
      all_read = false;
      card->problems.push_back(std::string(s.message()));
    }
  }
  if (all_read && count.num_params > 0) {
    card->num_params = count.num_params;
    card->params_source = "safetensors headers";
    const bool quantized =
        config.ok() && config->is_object() && config->contains("quantization_config");
    if (!quantized) card->quantization = DominantDtype(count.elems_by_dtype);
  }
  // The chat template a request with tools gets, as the server loads it.
  std::string tokenizer_config;
  if (const fs::path p = dir / "tokenizer_config.json"; Exists(p)) {
    StatusOr<std::string> text = ReadFileToString(p.string());
    if (text.ok()) tokenizer_config = *std::move(text);
  }
  const fs::path jinja = dir / "chat_template.jinja";
  StatusOr<LoadedChatTemplate> tpl = LoadChatTemplate(
      tokenizer_config.empty() ? "{}" : tokenizer_config, Exists(jinja) ? jinja.string() : "", "",
      /*has_tools=*/true);
  if (tpl.ok()) {
    card->has_chat_template = true;
    card->capabilities = DetectTemplateCapabilities(tpl->source);
  } else if (tpl.status().code() != StatusCode::kNotFound) {
    card->problems.push_back(std::string(tpl.status().message()));
  }
}

void DescribeGguf(const std::string& path, ModelCard* card) {
  card->format = "gguf";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) card->size_bytes = st.st_size;
  StatusOr<std::shared_ptr<GgufFile>> file = GgufFile::OpenHeader(path);
  if (!file.ok()) {
    card->problems.push_back(std::string(file.status().message()));
    return;
  }
  const GgufFile& f = **file;
  card->architecture = f.architecture();
  std::map<std::string, int64_t> elems_by_type;
  for (const GgufTensorInfo& t : f.tensors()) {
    card->num_params += t.shape.numel();
    elems_by_type[GgmlTypeName(t.ggml_type)] += t.shape.numel();
  }
  if (card->num_params > 0) card->params_source = "gguf tensors";
  if (StatusOr<int64_t> type = f.GetInt("general.file_type"); type.ok()) {
    card->quantization = GgufFileTypeName(*type);
  }
  if (card->quantization.empty()) {
    std::string dominant = DominantDtype(elems_by_type);
    for (char& c : dominant) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    card->quantization = dominant;
  }
  if (StatusOr<int64_t> ctx = f.GetInt(card->architecture + ".context_length"); ctx.ok()) {
    card->context_length = *ctx;
  }
  if (StatusOr<std::string> tpl = f.GetString("tokenizer.chat_template"); tpl.ok()) {
    card->has_chat_template = true;
    card->capabilities = DetectTemplateCapabilities(*tpl);
  }
}

}  // namespace

ModelCard DescribeModel(const std::string& path) {
  ModelCard card;
  card.path = path;
  card.id = fs::path(path).filename().string();
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    DescribeDirectory(path, &card);
  } else if (fs::path(path).extension() == ".json") {
    // --dummy-weights: the architecture of a config.json, no weights.
    if (StatusOr<json> config = LoadJsonFile(path); config.ok() && config->is_object()) {
      DescribeConfig(*config, &card);
    }
  } else {
    DescribeGguf(path, &card);
  }
  return card;
}

ModelCard DescribeLibraryEntry(const LibraryEntry& entry) {
  ModelCard card;
  const bool complete = entry.problems.empty();
  if (complete || !entry.format.empty()) card = DescribeModel(entry.path);
  card.id = entry.id;
  card.source = entry.source;
  card.path = entry.path;
  card.revision = entry.revision;
  card.commit = entry.commit;
  if (card.format.empty()) card.format = entry.format;
  card.size_bytes = entry.size_bytes;
  // The library's problems (missing blobs) explain the describer's (an unreadable header).
  if (!complete) card.problems = entry.problems;
  return card;
}

}  // namespace loom
