// loom: a local LLM inference server. `loom --help` lists the subcommands.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "loom — local LLM inference server (OpenAI / Anthropic APIs, continuous batching, "
      "paged KV cache, prefix caching) for Hugging Face and GGUF models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "loom 0.1.0");
  loom::AddGenerateCommand(app);
  loom::AddBenchCommand(app);
  loom::AddQuantizeCommand(app);
#ifdef LOOM_HAVE_SERVER
  loom::AddServeCommand(app);
#endif
#ifdef LOOM_HAVE_TOKENIZER
  loom::AddTokenizeCommand(app);
  loom::AddChatCommand(app);
  loom::AddGrammarCommand(app);
  loom::AddListCommand(app);
#endif
  CLI11_PARSE(app, argc, argv);
  return 0;
}
