// The `loom` subcommands. Each Add*Command registers a subcommand with its flags on the root app
// and sets the callback that runs it; the callback throws CLI::RuntimeError(exit code) on failure
// after printing a message (CLI11's way of returning an exit code from a callback).
#pragma once

#include <CLI/CLI.hpp>

namespace loom {

void AddGenerateCommand(CLI::App& root);
void AddBenchCommand(CLI::App& root);
void AddServeCommand(CLI::App& root);     // server/ (when built)
void AddTokenizeCommand(CLI::App& root);  // when the tokenizer is built
void AddChatCommand(CLI::App& root);
void AddGrammarCommand(CLI::App& root);  // when the tokenizer is built
void AddListCommand(CLI::App& root);     // when the tokenizer (chat templates) is built
void AddQuantizeCommand(CLI::App& root);

// Prints "error: <message>" to stderr and throws CLI::RuntimeError(1).
[[noreturn]] void Fail(const std::string& message);

}  // namespace loom
