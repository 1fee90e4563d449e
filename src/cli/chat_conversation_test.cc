#include "cli/chat_conversation.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

using Command = ChatConversation::Command;
using nlohmann::ordered_json;

TEST(ChatConversationTest, TurnsResetAndSystemPrompt) {
  ChatConversation c("be kind");
  EXPECT_EQ(c.Apply("hello"), Command::kSend);
  c.AddReply("hi there");
  EXPECT_EQ(c.Apply("and you?"), Command::kSend);
  EXPECT_EQ(c.Messages(), ordered_json::parse(R"([
    {"role": "system", "content": "be kind"},
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi there"},
    {"role": "user", "content": "and you?"}])"));
  c.DropLastTurn();  // the answer failed
  EXPECT_EQ(c.num_turns(), 2u);

  EXPECT_EQ(c.Apply("/reset"), Command::kReset);  // the system prompt stays
  EXPECT_EQ(c.Messages(), ordered_json::parse(R"([{"role": "system", "content": "be kind"}])"));

  EXPECT_EQ(c.Apply("q"), Command::kSend);
  EXPECT_EQ(c.Apply("/system  You answer in French."), Command::kSystem);  // resets the turns
  EXPECT_EQ(c.system(), "You answer in French.");
  EXPECT_EQ(c.Messages(),
            ordered_json::parse(R"([{"role": "system", "content": "You answer in French."}])"));
  EXPECT_EQ(c.Apply("/system"), Command::kSystem);  // none
  EXPECT_EQ(c.Messages(), ordered_json::array());
  EXPECT_EQ(c.Apply("/system   "), Command::kSystem);
  EXPECT_EQ(c.system(), "");
}

TEST(ChatConversationTest, CommandsThatSendNothing) {
  ChatConversation c;
  const std::pair<const char*, Command> kCases[] = {
      {"", Command::kNothing},     {"   ", Command::kNothing}, {"/quit", Command::kQuit},
      {"/exit", Command::kQuit},   {"/help", Command::kHelp},  {"/sytem x", Command::kUnknown},
      {"/clear", Command::kReset},
  };
  for (const auto& [line, want] : kCases) EXPECT_EQ(c.Apply(line), want) << line;
  EXPECT_EQ(c.num_turns(), 0u);
  EXPECT_EQ(c.Apply(" /not a command"), Command::kSend);  // only a leading '/' is a command
}

}  // namespace
}  // namespace loom
