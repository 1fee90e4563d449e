// `loom chat [MODEL]`: a terminal chat. Each user line is appended to the conversation, rendered
// with the model's chat template and answered as it streams. `/reset` clears the history,
// `/system TEXT` sets the system prompt and starts over, `/quit` (or end of input) leaves
// (ChatConversation). A model without a chat template is refused.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/chat_conversation.h"
#include "cli/commands.h"
#include "cli/session.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace loom {
namespace {

struct ChatFlags {
  ModelFlags model;
  std::string system;
  int max_tokens = 256;
  float temperature = -1;  // -1: the model's default
  int64_t seed = -1;
};

void RunChat(const ChatFlags& f) {
  auto session_or = OpenSession(f.model);
  if (!session_or.ok()) Fail(session_or.status().message());
  Session& s = **session_or;
  if (!s.tokenizer || !s.chat_template) {
    Fail(s.model_path + " has no tokenizer or chat template; pass --chat-template FILE");
  }
  std::fprintf(stderr, "loom chat — %s (%s). %s.\n", s.model_name.c_str(),
               s.backend->name().c_str(), ChatConversation::Help());
  ChatConversation conversation(f.system);
  std::string line;
  int turn = 0;
  while (true) {
    std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line)) break;
    const ChatConversation::Command command = conversation.Apply(line);
    if (command == ChatConversation::Command::kQuit) break;
    if (command == ChatConversation::Command::kReset) {
      std::fprintf(stderr, "(conversation cleared)\n");
      continue;
    }
    if (command == ChatConversation::Command::kSystem) {
      std::fprintf(stderr, "(system prompt %s; conversation cleared)\n",
                   conversation.system().empty() ? "removed" : "set");
      continue;
    }
    if (command == ChatConversation::Command::kHelp ||
        command == ChatConversation::Command::kUnknown) {
      std::fprintf(stderr, "%s\n", ChatConversation::Help());
      continue;
    }
    if (command != ChatConversation::Command::kSend) continue;
    nlohmann::ordered_json ctx = {{"messages", conversation.Messages()},
                                  {"add_generation_prompt", true},
                                  {"bos_token", s.bos_token},
                                  {"eos_token", s.eos_token}};
    auto prompt = s.chat_template->Render(ctx);
    if (!prompt.ok()) {  // e.g. a template that takes no system prompt: say so, keep chatting
      std::fprintf(stderr, "error: %s\n", std::string(prompt.status().message()).c_str());
      conversation.DropLastTurn();
      continue;
    }
    Request req;
    req.prompt = s.tokenizer->Encode(*prompt, /*add_special_tokens=*/false);
    req.params.max_tokens = f.max_tokens;
    req.params.temperature = f.temperature >= 0 ? f.temperature : s.defaults.temperature;
    req.params.top_p = s.defaults.top_p;
    req.params.top_k = s.defaults.top_k;
    if (f.seed >= 0) req.params.seed = static_cast<uint64_t>(f.seed + turn);
    ++turn;
    auto handle = s.engine->Submit(std::move(req));
    if (!handle.ok()) {
      std::fprintf(stderr, "error: %s\n", handle.status().message().c_str());
      conversation.DropLastTurn();
      continue;
    }
    IncrementalDecoder detok(*s.tokenizer, /*skip_special_tokens=*/true);
    std::string reply;
    while (!handle->stream->done()) {
      s.engine->Step();
      while (auto chunk = handle->stream->TryPop()) {
        for (const TokenOutput& t : chunk->tokens) {
          std::string d = detok.Add(t.token);
          reply += d;
          std::fputs(d.c_str(), stdout);
        }
        std::fflush(stdout);
        if (chunk->finish_reason == FinishReason::kError) {
          std::fprintf(stderr, "\nerror: %s", chunk->error.message().c_str());
        }
      }
    }
    std::string tail = detok.Flush();
    reply += tail;
    std::printf("%s\n", tail.c_str());
    conversation.AddReply(std::move(reply));
  }
}

}  // namespace

void AddChatCommand(CLI::App& root) {
  auto f = std::make_shared<ChatFlags>();
  CLI::App* cmd = root.add_subcommand(
      "chat", "chat with a model in the terminal (/reset, /system TEXT, /help, /quit)");
  f->model.Add(cmd);
  cmd->add_option("--system", f->system, "system prompt");
  cmd->add_option("-n,--max-tokens", f->max_tokens, "max tokens per answer")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temp,--temperature", f->temperature,
                  "sampling temperature (default: the model's)");
  cmd->add_option("--seed", f->seed, "sampling seed");
  cmd->callback([f] { RunChat(*f); });
}

}  // namespace loom
