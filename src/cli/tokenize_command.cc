// `loom tokenize MODEL_OR_TOKENIZER [--text T | --file F] [--verbose] [--decode 1,2,3]`: the
// model's tokenizer from the command line (an HF directory, a tokenizer.json, a .gguf file or a
// local model id, io/model_library.h).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/mapped_file.h"
#include "cli/commands.h"
#include "cli/model_tokenizer.h"
#include "cli/session.h"

namespace loom {
namespace {

struct TokenizeFlags {
  std::string path;
  std::string text;
  std::string file;
  std::string decode;
  bool verbose = false;
  bool no_special = false;
  std::string chat;  // messages.json: render with the chat template instead of encoding text
  bool no_generation_prompt = false;
  std::string revision, quant, models_dir;  // a model id's, as ModelFlags
};

// Renders `f.chat` (a JSON list of messages, or an object with "messages", optional "tools" and
// any chat_template_kwargs) with the model's chat template and prints the text, then its ids.
void RunChatRender(const TokenizeFlags& f, const Tokenizer& tok) {
  auto text = ReadFileToString(f.chat);
  if (!text.ok()) Fail(text.status().message());
  nlohmann::ordered_json in = nlohmann::ordered_json::parse(*text, nullptr, false);
  if (in.is_discarded()) Fail(f.chat + ": not valid JSON");
  nlohmann::ordered_json ctx = in.is_array() ? nlohmann::ordered_json{{"messages", in}} : in;
  if (!ctx.is_object() || !ctx.contains("messages")) {
    Fail(f.chat + ": expected a list of messages or an object with \"messages\"");
  }
  auto templates = LoadChatTemplatesFor(f.path, "", &tok);
  if (!templates.ok()) Fail(templates.status().message());
  bool has_tools = ctx.contains("tools") && !ctx["tools"].empty();
  const auto& tpl = has_tools ? templates->tools : templates->plain;
  if (!tpl) Fail(f.path + " has no chat template");
  if (!ctx.contains("add_generation_prompt"))
    ctx["add_generation_prompt"] = !f.no_generation_prompt;
  if (!ctx.contains("bos_token")) ctx["bos_token"] = templates->bos_token;
  if (!ctx.contains("eos_token")) ctx["eos_token"] = templates->eos_token;
  auto rendered = tpl->Render(ctx);
  if (!rendered.ok()) Fail(rendered.status().message());
  std::printf("%s", rendered->c_str());
  std::vector<int32_t> ids = tok.Encode(*rendered, /*add_special_tokens=*/false);
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  std::fprintf(stderr, "\n%s]\n%zu tokens\n", out.c_str(), ids.size());
}

void RunTokenize(TokenizeFlags f) {
  const ModelLibrary library(ResolveLibraryOptions(ProcessEnvironment(), f.models_dir));
  StatusOr<ResolvedModel> resolved = library.Resolve(f.path, f.revision, f.quant);
  if (!resolved.ok()) Fail(std::string(resolved.status().message()));
  f.path = resolved->path;
  auto tok = LoadTokenizerFor(f.path);
  if (!tok.ok()) Fail(tok.status().message());
  if (!f.chat.empty()) return RunChatRender(f, **tok);
  if (!f.decode.empty()) {
    std::vector<int32_t> ids;
    std::stringstream ss(f.decode);
    std::string item;
    while (std::getline(ss, item, ',')) {
      try {
        ids.push_back(static_cast<int32_t>(std::stol(item)));
      } catch (const std::exception&) {
        Fail("--decode: '" + item + "' is not a token id");
      }
    }
    std::printf("%s\n", (*tok)->Decode(ids, /*skip_special_tokens=*/false).c_str());
    return;
  }
  std::string text = f.text;
  if (!f.file.empty()) {
    auto content = ReadFileToString(f.file);
    if (!content.ok()) Fail(content.status().message());
    text = *content;
  }
  auto ids = (*tok)->EncodeChecked(text, !f.no_special);
  if (!ids.ok()) Fail(ids.status().message());
  if (f.verbose) {
    for (int32_t id : *ids) {
      auto piece = (*tok)->IdToToken(id);
      std::printf("%d\t%s\n", id, piece ? piece->c_str() : "?");
    }
  } else {
    std::string out = "[";
    for (size_t i = 0; i < ids->size(); ++i) out += (i ? ", " : "") + std::to_string((*ids)[i]);
    std::printf("%s]\n", out.c_str());
  }
  std::fprintf(stderr, "%zu tokens\n", ids->size());
}

}  // namespace

void AddTokenizeCommand(CLI::App& root) {
  auto f = std::make_shared<TokenizeFlags>();
  CLI::App* cmd =
      root.add_subcommand("tokenize", "encode text or decode ids with a model's tokenizer");
  cmd->add_option("model", f->path,
                  "HF model directory, tokenizer.json, .gguf file or local model id (as serve's "
                  "MODEL)")
      ->required();
  cmd->add_option("--revision", f->revision,
                  "Hugging Face cache: a model id's branch, tag or commit");
  cmd->add_option("--quant", f->quant, "which .gguf of a GGUF repo (as serve's --quant)");
  AddModelsDirFlag(cmd, &f->models_dir);
  auto* text = cmd->add_option("--text", f->text, "text to encode");
  auto* file =
      cmd->add_option("--file", f->file, "file whose contents to encode")->check(CLI::ExistingFile);
  auto* dec = cmd->add_option("--decode", f->decode, "comma-separated ids to decode");
  text->excludes(file);
  dec->excludes(text);
  dec->excludes(file);
  cmd->add_flag("--verbose,-v", f->verbose, "print one id and its token string per line");
  cmd->add_flag("--no-special", f->no_special, "do not add BOS/EOS");
  auto* chat =
      cmd->add_option("--chat", f->chat,
                      "render messages.json (a list of messages, or {messages, tools, ...}) "
                      "with the chat template; print the text, ids to stderr")
          ->check(CLI::ExistingFile);
  chat->excludes(text);
  chat->excludes(dec);
  cmd->add_flag("--no-generation-prompt", f->no_generation_prompt,
                "--chat: render without add_generation_prompt");
  cmd->callback([f] { RunTokenize(*f); });
}

}  // namespace loom
