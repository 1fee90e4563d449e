// ChatConversation: the state of `loom chat` — the system prompt and the turns so far — and what
// each typed line means:
//   /reset         forget the turns (the system prompt stays)
//   /system TEXT   set the system prompt (empty TEXT: none) and forget the turns
//   /help          list the commands
//   /quit          leave (so does the end of input)
//   anything else  a user turn to answer; empty lines and unknown /commands are not sent
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace loom {

class ChatConversation {
 public:
  enum class Command { kSend, kReset, kSystem, kHelp, kQuit, kNothing, kUnknown };

  explicit ChatConversation(std::string system = "") : system_(std::move(system)) {}

  // Interprets one typed line (without its newline) and applies it: kSend appends it as a user
  // turn; kReset and kSystem clear the turns (kSystem sets the system prompt first). kHelp,
  // kQuit, kNothing (blank) and kUnknown (an unknown /command) change nothing.
  Command Apply(const std::string& line);
  // After an answer streamed: appends it as the assistant's turn.
  void AddReply(std::string reply);
  // After an answer failed: drops the last (user) turn, so that it is not sent again.
  void DropLastTurn();

  // The system message (when set) then the turns, as chat templates read them.
  nlohmann::ordered_json Messages() const;
  const std::string& system() const { return system_; }
  size_t num_turns() const { return turns_.size(); }
  // The /help text.
  static const char* Help();

 private:
  std::string system_;
  nlohmann::ordered_json turns_ = nlohmann::ordered_json::array();
};

}  // namespace loom
