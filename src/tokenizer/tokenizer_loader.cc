// Tokenizer loaders for Hugging Face files: tokenizer.json (+ tokenizer_config.json) and the
// GPT-2 vocab.json + merges.txt pair. nlohmann::json exceptions stop here and become Status.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unigram_model.h"
#include "tokenizer/wordpiece_model.h"

namespace loom {
namespace {

using nlohmann::json;

// Appends the ids a post-processor adds around a single sequence.
Status ParsePostProcessor(const json& pp, std::vector<int32_t>* prefix,
                          std::vector<int32_t>* suffix) {
  if (pp.is_null()) return OkStatus();
  const std::string type = pp.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& p : pp.at("processors"))
      RETURN_IF_ERROR(ParsePostProcessor(p, prefix, suffix));
    return OkStatus();
  }
  if (type == "ByteLevel") return OkStatus();  // only adjusts offsets
  if (type == "TemplateProcessing") {
    const auto& specials = pp.at("special_tokens");
    bool seen_sequence = false;
    for (const auto& item : pp.at("single")) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      if (!specials.contains(name)) {
        return InvalidArgumentError("post_processor template uses special token '" + name +
                                    "' that is missing from its special_tokens");
      }
      for (const auto& id : specials.at(name).at("ids")) {
        (seen_sequence ? suffix : prefix)->push_back(id.get<int32_t>());
      }
    }
    return OkStatus();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    prefix->push_back(pp.at("cls").at(1).get<int32_t>());
    suffix->push_back(pp.at("sep").at(1).get<int32_t>());
    return OkStatus();
  }
  return UnimplementedError("tokenizer.json post_processor type '" + type + "' is not supported");
}

// tokenizer_config.json token fields are a string, an AddedToken object or null.
std::optional<std::string> ConfigToken(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return std::nullopt;
}

StatusOr<json> ParseJson(std::string_view text, const char* what) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError(std::string(what) + " is not valid JSON");
  return j;
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromTokenizerJsonText(
    std::string_view tokenizer_json, std::string_view config_json) {
  ASSIGN_OR_RETURN(json j, ParseJson(tokenizer_json, "tokenizer.json"));
  json config = json::object();
  if (!config_json.empty()) {
    ASSIGN_OR_RETURN(config, ParseJson(config_json, "tokenizer_config.json"));
  }
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  try {
    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      ASSIGN_OR_RETURN(t->normalizer_, Normalizer::FromJson(j["normalizer"]));
    }
    if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null()) {
      ASSIGN_OR_RETURN(t->pre_tokenizer_, PreTokenizer::FromJson(j["pre_tokenizer"]));
    }
    const bool byte_level = t->pre_tokenizer_ && t->pre_tokenizer_->IsByteLevel();
    const json& m = j.at("model");
    std::string model_type = m.value("type", std::string());
    if (model_type.empty()) {  // old files omit the type: infer it from the fields
      model_type = m.contains("merges") ? "BPE" : m.contains("unk_id") ? "Unigram" : "WordPiece";
    }
    if (model_type == "BPE") {
      ASSIGN_OR_RETURN(t->model_, BpeModel::FromJson(m, byte_level));
    } else if (byte_level) {
      return UnimplementedError("tokenizer.json: ByteLevel pre-tokenizer with a " + model_type +
                                " model is not supported");
    } else if (model_type == "Unigram") {
      ASSIGN_OR_RETURN(t->model_, UnigramModel::FromJson(m));
    } else if (model_type == "WordPiece") {
      ASSIGN_OR_RETURN(t->model_, WordPieceModel::FromJson(m));
    } else {
      return UnimplementedError("tokenizer.json model type '" + model_type + "' is not supported");
    }
    if (j.contains("decoder") && !j["decoder"].is_null()) {
      ASSIGN_OR_RETURN(t->decoder_, Decoder::FromJson(j["decoder"]));
    }
    if (j.contains("added_tokens")) {
      for (const auto& a : j["added_tokens"]) {
        AddedToken tok;
        tok.id = a.at("id").get<int32_t>();
        tok.content = a.at("content").get<std::string>();
        tok.single_word = a.value("single_word", false);
        tok.lstrip = a.value("lstrip", false);
        tok.rstrip = a.value("rstrip", false);
        tok.special = a.value("special", false);
        tok.normalized = a.value("normalized", !tok.special);
        t->added_.Add(std::move(tok));
      }
    }
    if (j.contains("post_processor")) {
      RETURN_IF_ERROR(ParsePostProcessor(j["post_processor"], &t->prefix_ids_, &t->suffix_ids_));
    }
    t->Finalize();

    // tokenizer_config.json: special token names and the add_bos/add_eos overrides.
    if (auto bos = ConfigToken(config, "bos_token")) {
      t->bos_token_ = *bos;
      t->bos_id_ = t->TokenToId(*bos);
    } else if (t->prefix_ids_.size() == 1) {
      t->bos_id_ = t->prefix_ids_[0];
      t->bos_token_ = t->IdToToken(t->prefix_ids_[0]).value_or("");
    }
    if (auto eos = ConfigToken(config, "eos_token")) {
      t->eos_token_ = *eos;
      t->eos_id_ = t->TokenToId(*eos);
    }
    const bool has_add_bos =
        config.contains("add_bos_token") && config["add_bos_token"].is_boolean();
    const bool has_add_eos =
        config.contains("add_eos_token") && config["add_eos_token"].is_boolean();
    if (has_add_bos || has_add_eos) {
      // transformers' update_post_processor(): [bos] $A [eos] from the flags (a missing flag
      // keeps what the template did for that side).
      if (has_add_bos) {
        t->prefix_ids_.clear();
        if (config["add_bos_token"].get<bool>() && t->bos_id_)
          t->prefix_ids_.push_back(*t->bos_id_);
      }
      if (has_add_eos) {
        t->suffix_ids_.clear();
        if (config["add_eos_token"].get<bool>() && t->eos_id_)
          t->suffix_ids_.push_back(*t->eos_id_);
      }
    }
    if (config.contains("clean_up_tokenization_spaces") &&
        config["clean_up_tokenization_spaces"].is_boolean()) {
      t->clean_up_tokenization_spaces_ = config["clean_up_tokenization_spaces"].get<bool>();
    }
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("malformed tokenizer.json/tokenizer_config.json: ") +
                                e.what());
  }
  return t;
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromTokenizerJson(const std::string& json_path,
                                                                  const std::string& config_path) {
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(json_path));
  std::string config;
  if (!config_path.empty()) {
    ASSIGN_OR_RETURN(config, ReadFileToString(config_path));
  }
  auto t = FromTokenizerJsonText(
      std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), config);
  if (!t.ok()) return t.status().WithContext(json_path);
  return t;
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHfDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path d(dir);
  std::error_code ec;
  const fs::path config = d / "tokenizer_config.json";
  const std::string config_path = fs::exists(config, ec) ? config.string() : "";
  if (fs::exists(d / "tokenizer.json", ec)) {
    return FromTokenizerJson((d / "tokenizer.json").string(), config_path);
  }
  if (fs::exists(d / "vocab.json", ec) && fs::exists(d / "merges.txt", ec)) {
    return FromVocabAndMerges((d / "vocab.json").string(), (d / "merges.txt").string());
  }
  return NotFoundError("no tokenizer in '" + dir +
                       "': expected tokenizer.json or vocab.json + merges.txt");
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromVocabAndMerges(const std::string& vocab_path,
                                                                   const std::string& merges_path) {
  ASSIGN_OR_RETURN(std::string vocab_text, ReadFileToString(vocab_path));
  ASSIGN_OR_RETURN(std::string merges_text, ReadFileToString(merges_path));
  ASSIGN_OR_RETURN(json vj, ParseJson(vocab_text, "vocab.json"));
  if (!vj.is_object()) return InvalidArgumentError(vocab_path + ": expected a JSON object");
  StringMap<int32_t> vocab;
  try {
    for (auto it = vj.begin(); it != vj.end(); ++it)
      vocab.emplace(it.key(), it.value().get<int32_t>());
  } catch (const json::exception& e) {
    return InvalidArgumentError(vocab_path + ": " + e.what());
  }
  std::vector<std::pair<std::string, std::string>> merges;
  size_t pos = 0;
  while (pos < merges_text.size()) {
    size_t eol = merges_text.find('\n', pos);
    if (eol == std::string::npos) eol = merges_text.size();
    std::string line = merges_text.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) {
      return InvalidArgumentError(merges_path + ": malformed merge line '" + line + "'");
    }
    merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
  }
  BpeOptions opt;
  opt.byte_level = true;
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  auto model = BpeModel::Create(std::move(vocab), merges, opt);
  if (!model.ok()) return model.status().WithContext(merges_path);
  t->model_ = std::move(model).value();
  ASSIGN_OR_RETURN(t->pre_tokenizer_, PreTokenizer::MakeGpt2ByteLevel());
  t->decoder_ = Decoder::MakeByteLevel();
  if (auto id = t->model_->TokenToId("<|endoftext|>")) {
    AddedToken eot;
    eot.id = *id;
    eot.content = "<|endoftext|>";
    eot.special = true;
    t->added_.Add(eot);
    t->bos_id_ = t->eos_id_ = *id;
    t->bos_token_ = t->eos_token_ = eot.content;
  }
  t->Finalize();
  return t;
}

}  // namespace loom
