#include "cli/chat_conversation.h"

namespace loom {

ChatConversation::Command ChatConversation::Apply(const std::string& line) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return Command::kNothing;
  if (line[0] != '/') {
    turns_.push_back({{"role", "user"}, {"content", line}});
    return Command::kSend;
  }
  const size_t space = line.find(' ');
  const std::string name = line.substr(0, space);
  if (name == "/quit" || name == "/exit") return Command::kQuit;
  if (name == "/help") return Command::kHelp;
  if (name == "/reset" || name == "/clear") {
    turns_ = nlohmann::ordered_json::array();
    return Command::kReset;
  }
  if (name == "/system") {
    const size_t start = line.find_first_not_of(" \t\r", name.size());
    system_ = start == std::string::npos ? "" : line.substr(start);
    turns_ = nlohmann::ordered_json::array();
    return Command::kSystem;
  }
  return Command::kUnknown;
}

void ChatConversation::AddReply(std::string reply) {
  turns_.push_back({{"role", "assistant"}, {"content", std::move(reply)}});
}

void ChatConversation::DropLastTurn() {
  if (!turns_.empty()) turns_.erase(turns_.size() - 1);
}

nlohmann::ordered_json ChatConversation::Messages() const {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!system_.empty()) messages.push_back({{"role", "system"}, {"content", system_}});
  for (const auto& t : turns_) messages.push_back(t);
  return messages;
}

const char* ChatConversation::Help() {
  return "/reset clears the conversation; /system TEXT sets the system prompt and starts over "
         "(/system alone removes it); /quit leaves (so does Ctrl-D)";
}

}  // namespace loom
