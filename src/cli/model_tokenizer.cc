#include "cli/model_tokenizer.h"

#include <filesystem>

#include "base/mapped_file.h"

namespace loom {

namespace fs = std::filesystem;

StatusOr<GgufVocab> ReadGgufVocab(const GgufFile& file) {
  GgufVocab v;
  auto model = file.GetString("tokenizer.ggml.model");
  if (!model.ok())
    return NotFoundError(file.path() + ": no tokenizer (tokenizer.ggml.model missing)");
  v.model = *model;
  if (auto pre = file.GetString("tokenizer.ggml.pre"); pre.ok()) v.pre = *pre;
  ASSIGN_OR_RETURN(v.tokens, file.GetStringArray("tokenizer.ggml.tokens"));
  if (auto scores = file.GetFloatArray("tokenizer.ggml.scores"); scores.ok()) v.scores = *scores;
  if (auto types = file.GetIntArray("tokenizer.ggml.token_type"); types.ok()) {
    v.token_types.assign(types->begin(), types->end());
  }
  if (auto merges = file.GetStringArray("tokenizer.ggml.merges"); merges.ok()) v.merges = *merges;
  auto opt_id = [&](const char* key) -> std::optional<int32_t> {
    auto r = file.GetInt(key);
    if (!r.ok()) return std::nullopt;
    return static_cast<int32_t>(*r);
  };
  auto opt_bool = [&](const char* key) -> std::optional<bool> {
    auto r = file.GetBool(key);
    if (!r.ok()) return std::nullopt;
    return *r;
  };
  v.bos_id = opt_id("tokenizer.ggml.bos_token_id");
  v.eos_id = opt_id("tokenizer.ggml.eos_token_id");
  v.unk_id = opt_id("tokenizer.ggml.unknown_token_id");
  v.pad_id = opt_id("tokenizer.ggml.padding_token_id");
  v.add_bos = opt_bool("tokenizer.ggml.add_bos_token");
  v.add_eos = opt_bool("tokenizer.ggml.add_eos_token");
  v.add_space_prefix = opt_bool("tokenizer.ggml.add_space_prefix");
  return v;
}

StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFor(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return Tokenizer::FromHfDirectory(path);
  if (!fs::exists(path, ec)) return NotFoundError(path + ": no such file or directory");
  if (path.size() >= 5 && path.substr(path.size() - 5) == ".json") {
    fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
    return Tokenizer::FromTokenizerJson(path, fs::exists(config, ec) ? config.string() : "");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<GgufFile> file, GgufFile::Open(path));
  ASSIGN_OR_RETURN(GgufVocab vocab, ReadGgufVocab(*file));
  auto tok = Tokenizer::FromGgufVocab(vocab);
  if (!tok.ok()) return tok.status().WithContext(path);
  return tok;
}

StatusOr<ModelChatTemplates> LoadChatTemplatesFor(const std::string& path,
                                                  const std::string& override_file,
                                                  const Tokenizer* tokenizer) {
  ModelChatTemplates out;
  auto parse = [](const std::string& source,
                  const std::string& where) -> StatusOr<std::shared_ptr<const ChatTemplate>> {
    auto t = ChatTemplate::Parse(source);
    if (!t.ok()) return t.status().WithContext(where);
    return std::make_shared<const ChatTemplate>(std::move(t).value());
  };
  if (tokenizer != nullptr) {
    out.bos_token = tokenizer->bos_token();
    out.eos_token = tokenizer->eos_token();
  }
  if (!override_file.empty()) {
    ASSIGN_OR_RETURN(std::string src, ReadFileToString(override_file));
    ASSIGN_OR_RETURN(out.plain, parse(src, override_file));
    out.tools = out.plain;
    return out;
  }
  std::error_code ec;
  fs::path dir(path);
  if (fs::is_regular_file(dir, ec) && dir.extension() == ".json") dir = dir.parent_path();
  if (fs::is_directory(dir, ec)) {
    fs::path config = dir / "tokenizer_config.json";
    fs::path jinja = dir / "chat_template.jinja";
    std::string config_text = "{}";
    if (fs::exists(config, ec)) {
      ASSIGN_OR_RETURN(config_text, ReadFileToString(config.string()));
    }
    std::string jinja_path = fs::exists(jinja, ec) ? jinja.string() : "";
    auto plain = LoadChatTemplate(config_text, jinja_path, "", /*has_tools=*/false);
    if (!plain.ok()) {
      if (plain.status().code() == StatusCode::kNotFound) return out;  // no template
      return plain.status().WithContext(config.string());
    }
    ASSIGN_OR_RETURN(out.plain, parse(plain->source, config.string()));
    if (!plain->bos_token.empty()) out.bos_token = plain->bos_token;
    if (!plain->eos_token.empty()) out.eos_token = plain->eos_token;
    auto tools = LoadChatTemplate(config_text, jinja_path, "", /*has_tools=*/true);
    if (tools.ok() && tools->source != plain->source) {
      ASSIGN_OR_RETURN(out.tools, parse(tools->source, config.string()));
    } else {
      out.tools = out.plain;
    }
    return out;
  }
  auto file = GgufFile::Open(path);
  if (!file.ok()) return out;
  auto src = (*file)->GetString("tokenizer.chat_template");
  if (!src.ok()) return out;
  ASSIGN_OR_RETURN(out.plain, parse(*src, path + " (tokenizer.chat_template)"));
  out.tools = out.plain;
  return out;
}

}  // namespace loom
