// LoadModel: resolves a path to a Hugging Face directory or a GGUF file, builds the ModelConfig
// through the architecture registry, and loads the weights.
#include <sys/stat.h>
#include <xxhash.h>

#include <filesystem>

#include "base/logging.h"
#include "io/gguf.h"
#include "io/json_file.h"
#include "io/safetensors_model.h"
#include "model/arch/arch.h"
#include "model/gguf_config.h"
#include "model/hf_quantization.h"
#include "model/model.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

class SafetensorsSource final : public TensorSource {
 public:
  explicit SafetensorsSource(SafetensorsModel m) : m_(std::move(m)) {}
  bool Has(const std::string& name) const override { return m_.Has(name); }
  StatusOr<Tensor> Get(const std::string& name) const override { return m_.GetTensor(name); }
  std::string Describe() const override { return m_.dir(); }
  int64_t data_bytes() const override {
    int64_t n = 0;
    for (const auto& f : m_.files()) n += static_cast<int64_t>(f->file_size());
    return n;
  }

 private:
  SafetensorsModel m_;
};

class GgufSource final : public TensorSource {
 public:
  explicit GgufSource(std::shared_ptr<GgufFile> f) : f_(std::move(f)) {}
  bool Has(const std::string& name) const override { return f_->FindTensor(name) != nullptr; }
  StatusOr<Tensor> Get(const std::string& name) const override { return f_->GetTensor(name); }
  std::string Describe() const override { return f_->path(); }
  int64_t data_bytes() const override {
    std::error_code ec;
    const auto size = fs::file_size(f_->path(), ec);
    return ec ? 0 : static_cast<int64_t>(size) - static_cast<int64_t>(f_->data_offset());
  }

 private:
  std::shared_ptr<GgufFile> f_;
};

// A cheap, stable identity of a weight file: size + hash of its first and last MiB.
uint64_t FileFingerprint(const std::string& path, uint64_t seed) {
  auto mapped = MappedFile::Open(path);
  if (!mapped.ok()) return seed;
  const size_t chunk = 1 << 20;
  const size_t n = mapped->size();
  uint64_t h = XXH3_64bits_withSeed(mapped->data(), std::min(n, chunk), seed ^ n);
  if (n > chunk) h = XXH3_64bits_withSeed(mapped->data() + n - chunk, chunk, h);
  return h;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Weights re-encoded at load are another model to the prefix cache's fingerprint.
std::string QuantizeSuffix(const WeightOptions& options) {
  return options.quantize ? "+" + std::string(DTypeName(*options.quantize)) : "";
}

StatusOr<std::unique_ptr<Model>> LoadHfDirectory(const std::string& dir, Backend* backend,
                                                 const ProgressFn& progress,
                                                 const WeightOptions& options) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  ASSIGN_OR_RETURN(nlohmann::json config_json, LoadJsonFile(config_path));
  if (!config_json.is_object())
    return InvalidArgumentError(config_path + ": expected a JSON object");
  ASSIGN_OR_RETURN(const ArchSpec* arch, FindArchForHfConfig(config_json));
  ModelConfig cfg;
  try {
    RETURN_IF_ERROR(arch->from_hf(config_json, &cfg).WithContext(config_path));
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(config_path + ": " + e.what());
  }
  // generation_config.json may list more EOS ids (e.g. Llama 3's <|eot_id|>).
  const std::string gen_path = (fs::path(dir) / "generation_config.json").string();
  if (fs::exists(gen_path)) {
    ASSIGN_OR_RETURN(nlohmann::json gen, LoadJsonFile(gen_path));
    if (auto it = gen.find("eos_token_id"); it != gen.end()) {
      std::vector<int> ids;
      if (it->is_number_integer()) ids.push_back(it->get<int>());
      if (it->is_array()) {
        for (const auto& v : *it) {
          if (v.is_number_integer()) ids.push_back(v.get<int>());
        }
      }
      for (int id : ids) {
        if (std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), id) ==
            cfg.eos_token_ids.end()) {
          cfg.eos_token_ids.push_back(id);
        }
      }
    }
  }
  RETURN_IF_ERROR(cfg.Validate().WithContext(config_path));
  ASSIGN_OR_RETURN(std::optional<Fp8Checkpoint> fp8, ParseHfQuantization(config_json, config_path));
  if (const auto q = config_json.find("quantization_config");
      q != config_json.end() && q->is_object() && q->value("quant_method", "") == "mxfp4" &&
      cfg.moe_swiglu_limit == 0.f) {
    return UnimplementedError(config_path +
                              ": quant_method mxfp4 is read for gpt-oss's experts "
                              "only, not for " +
                              cfg.arch);
  }
  ASSIGN_OR_RETURN(SafetensorsModel st, SafetensorsModel::Open(dir));
  uint64_t fp = XXH3_64bits(config_json.dump().data(), config_json.dump().size());
  for (const auto& file : st.files()) fp = FileFingerprint(file->path(), fp);
  std::unique_ptr<TensorSource> source = std::make_unique<SafetensorsSource>(std::move(st));
  if (fp8) source = Fp8CheckpointSource(std::move(source), *fp8);
  ASSIGN_OR_RETURN(
      Weights w, LoadWeights(cfg, *source, TensorNaming::kHuggingFace, backend, progress, options));
  // Gemma scales embeddings by sqrt(hidden) rounded to the checkpoint's dtype.
  if (cfg.embed_scale != 1.f && w.embed.dtype() == DType::kBF16) {
    cfg.embed_scale = Bf16ToF32(F32ToBf16(cfg.embed_scale));
  } else if (cfg.embed_scale != 1.f && w.embed.dtype() == DType::kF16) {
    cfg.embed_scale = F16ToF32(F32ToF16(cfg.embed_scale));
  }
  ModelInfo info{dir, "safetensors", Hex(fp) + QuantizeSuffix(options)};
  return std::make_unique<Model>(std::move(cfg), std::move(w), std::move(info), backend);
}

StatusOr<std::unique_ptr<Model>> LoadGguf(const std::string& path, Backend* backend,
                                          const ProgressFn& progress,
                                          const WeightOptions& options) {
  ASSIGN_OR_RETURN(std::shared_ptr<GgufFile> file, GgufFile::Open(path));
  ASSIGN_OR_RETURN(ModelConfig cfg, ModelConfigFromGguf(*file));
  RETURN_IF_ERROR(cfg.Validate().WithContext(path));
  GgufSource source(file);
  ASSIGN_OR_RETURN(Weights w,
                   LoadWeights(cfg, source, TensorNaming::kGguf, backend, progress, options));
  ModelInfo info{path, "gguf", Hex(FileFingerprint(path, 0x6c6f6f6d)) + QuantizeSuffix(options)};
  return std::make_unique<Model>(std::move(cfg), std::move(w), std::move(info), backend);
}

}  // namespace

StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& path, Backend* backend,
                                           const ProgressFn& progress,
                                           const WeightOptions& options) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (!fs::exists(fs::path(path) / "config.json")) {
      return InvalidArgumentError(path + ": not a Hugging Face model directory (no config.json)");
    }
    return LoadHfDirectory(path, backend, progress, options);
  }
  if (!fs::exists(path, ec)) {
    return NotFoundError(path +
                         ": no such file or directory (expected a Hugging Face model "
                         "directory or a .gguf file)");
  }
  return LoadGguf(path, backend, progress, options);
}

}  // namespace loom
