// The stream encoders, table-driven: a sequence of calls (Start, events, Error, Finish) → the
// exact SSE transcript the OpenAI and Anthropic SDKs parse. Also the finish-reason mapping.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/anthropic_response.h"
#include "server/anthropic_stream_encoder.h"
#include "server/openai_response.h"
#include "server/openai_stream_encoder.h"

namespace loom {
namespace {

using R = ChoiceFinishReason;

// One call on the encoder.
struct Step {
  enum Op { kStart, kEvent, kError, kFinish, kKeepAlive } op;
  ChoiceEvent event;  // kEvent
};

Step Start() { return {Step::kStart, {}}; }
Step Event(ChoiceEvent e) { return {Step::kEvent, std::move(e)}; }
Step Text(int choice, std::string text) {
  return Event(ChoiceEvent::Text(choice, std::move(text)));
}
Step Reasoning(std::string text) { return Event(ChoiceEvent::Reasoning(0, std::move(text))); }
Step Fin(int choice, R reason, std::optional<std::string> stop = std::nullopt) {
  ChoiceEvent e = ChoiceEvent::Finish(choice, reason);
  e.stop_string = std::move(stop);
  return Event(std::move(e));
}
Step ToolStart(int call, std::string id, std::string name) {
  return Event(ChoiceEvent::ToolCallStart(0, call, std::move(id), std::move(name)));
}
Step ToolArgs(int call, std::string json) {
  return Event(ChoiceEvent::ToolCallArgs(0, call, std::move(json)));
}
Step Error() { return {Step::kError, {}}; }
Step Finish() { return {Step::kFinish, {}}; }
Step KeepAlive() { return {Step::kKeepAlive, {}}; }

const Usage kUsage{5, 3, 2, {}};

// Runs `steps` on `enc`; returns everything written, concatenated.
std::string Transcript(StreamEncoder& enc, const std::vector<Step>& steps) {
  std::string out;
  for (const Step& s : steps) {
    switch (s.op) {
      case Step::kStart:
        out += enc.Start(kUsage);
        break;
      case Step::kEvent:
        out += enc.Encode(s.event);
        break;
      case Step::kError: {
        ApiError e = ApiError::FromStatus(UnavailableError("shutting down"));
        out += enc.Error(e);
        break;
      }
      case Step::kFinish:
        out += enc.Finish(kUsage);
        break;
      case Step::kKeepAlive:
        out += enc.KeepAlive();
        break;
    }
  }
  return out;
}

const ResponseMeta kMeta{"c1", "m", 7};

// `data: <chunk>` of kMeta with `choice` as its one choice (no choice: the usage chunk) and
// `tail` after the choices array.
std::string Chunk(const char* object, const std::string& choice, const std::string& tail) {
  return std::string(R"(data: {"id":"c1","object":")") + object +
         R"(","created":7,"model":"m","system_fingerprint":null,"choices":[)" + choice + "]" +
         tail + "}\n\n";
}
std::string ChatChunk(const std::string& choice, const std::string& tail = "") {
  return Chunk("chat.completion.chunk", choice, tail);
}
std::string CompChunk(const std::string& choice, const std::string& tail = "") {
  return Chunk("text_completion", choice, tail);
}
const std::string kNullUsage = R"(,"usage":null)";
const std::string kUsageTail =
    R"(,"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8,)"
    R"("prompt_tokens_details":{"cached_tokens":2}})";
const std::string kDone = "data: [DONE]\n\n";

// Anthropic events of the message "msg_1".
std::string AEvent(const std::string& name, const std::string& data) {
  return "event: " + name + "\ndata: " + data + "\n\n";
}
const std::string kMessageStart =
    AEvent("message_start",
           R"({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",)"
           R"("model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":)"
           R"({"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":2,)"
           R"("output_tokens":0}}})");
const std::string kPing = AEvent("ping", R"({"type":"ping"})");
const std::string kTextBlock = R"({"type":"text","text":""})";
std::string BlockStart(int index, const std::string& block) {
  return AEvent("content_block_start", R"({"type":"content_block_start","index":)" +
                                           std::to_string(index) + R"(,"content_block":)" + block +
                                           "}");
}
std::string BlockDelta(int index, const std::string& delta) {
  return AEvent("content_block_delta", R"({"type":"content_block_delta","index":)" +
                                           std::to_string(index) + R"(,"delta":)" + delta + "}");
}
std::string BlockStop(int index) {
  return AEvent("content_block_stop",
                R"({"type":"content_block_stop","index":)" + std::to_string(index) + "}");
}
std::string MessageEnd(const std::string& stop_reason, const std::string& stop_sequence) {
  return AEvent("message_delta", R"({"type":"message_delta","delta":{"stop_reason":")" +
                                     stop_reason + R"(","stop_sequence":)" + stop_sequence +
                                     R"(},"usage":{"output_tokens":3}})") +
         AEvent("message_stop", R"({"type":"message_stop"})");
}

struct Case {
  const char* name;
  std::function<std::unique_ptr<StreamEncoder>()> make;
  std::vector<Step> steps;
  std::string transcript;
  bool ended = true;  // ended() after the steps
};

std::vector<Case> Cases() {
  auto chat = [](int n, bool usage) {
    return [=] { return std::make_unique<OpenAiChatEncoder>(kMeta, n, usage); };
  };
  auto comp = [](int n, bool usage, std::string echo) {
    return [=] { return std::make_unique<OpenAiCompletionEncoder>(kMeta, n, usage, echo); };
  };
  auto anthropic = [] {
    return std::make_unique<AnthropicMessagesEncoder>(ResponseMeta{"msg_1", "m", 7});
  };
  const std::string role0 =
      R"({"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,)"
      R"("finish_reason":null})";
  const std::string role1 =
      R"({"index":1,"delta":{"role":"assistant","content":""},"logprobs":null,)"
      R"("finish_reason":null})";
  return {
      {"chat_text_then_stop",
       chat(1, false),
       {Start(), Text(0, "Hi"), Text(0, ""), Fin(0, R::kStop), Finish()},
       ChatChunk(role0) +
           ChatChunk(
               R"({"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null})") +
           ChatChunk(R"({"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"})") + kDone},
      {"chat_two_choices_with_usage",
       chat(2, true),
       {Start(), Text(1, "b"), Fin(1, R::kLength), Fin(0, R::kStopString, "x"), Finish()},
       ChatChunk(role0, kNullUsage) + ChatChunk(role1, kNullUsage) +
           ChatChunk(R"({"index":1,"delta":{"content":"b"},"logprobs":null,"finish_reason":null})",
                     kNullUsage) +
           ChatChunk(R"({"index":1,"delta":{},"logprobs":null,"finish_reason":"length"})",
                     kNullUsage) +
           ChatChunk(R"({"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"})",
                     kNullUsage) +
           ChatChunk("", kUsageTail) + kDone},
      {"chat_reasoning_and_tool_calls",
       chat(1, false),
       {Reasoning("hmm"), ToolStart(0, "call_1", "f"), ToolArgs(0, "{\"a\":"),
        Fin(0, R::kToolCalls)},
       ChatChunk(R"({"index":0,"delta":{"reasoning_content":"hmm"},"logprobs":null,)"
                 R"("finish_reason":null})") +
           ChatChunk(R"({"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1",)"
                     R"("type":"function","function":{"name":"f","arguments":""}}]},)"
                     R"("logprobs":null,"finish_reason":null})") +
           ChatChunk(R"({"index":0,"delta":{"tool_calls":[{"index":0,"function":)"
                     R"({"arguments":"{\"a\":"}}]},"logprobs":null,"finish_reason":null})") +
           ChatChunk(R"({"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"})"),
       /*ended=*/false},
      {"chat_error_then_done",
       chat(1, false),
       {Error(), Finish()},
       R"(data: {"error":{"message":"shutting down","type":"server_unavailable",)"
       R"("param":null,"code":null}})"
       "\n\n" +
           kDone},
      {"chat_keep_alive", chat(1, false), {KeepAlive()}, ": keep-alive\n\n", false},
      {"completion_echo_and_offsets",
       comp(1, false, "Once"),
       {Start(), Text(0, " upon"), Fin(0, R::kLength), Finish()},
       CompChunk(R"({"index":0,"text":"Once","logprobs":null,"finish_reason":null})") +
           CompChunk(R"({"index":0,"text":" upon","logprobs":null,"finish_reason":null})") +
           CompChunk(R"({"index":0,"text":"","logprobs":null,"finish_reason":"length"})") + kDone},
      {"completion_no_echo_drops_reasoning",
       comp(1, true, ""),
       {Start(), Reasoning("r"), Text(0, "a"), Fin(0, R::kStop), Finish()},
       CompChunk(R"({"index":0,"text":"a","logprobs":null,"finish_reason":null})", kNullUsage) +
           CompChunk(R"({"index":0,"text":"","logprobs":null,"finish_reason":"stop"})",
                     kNullUsage) +
           CompChunk("", kUsageTail) + kDone},
      // Today's one-block stream: message_start, the text block (ping after it), message_stop.
      {"anthropic_text",
       anthropic,
       {Start(), Text(0, "Hi"), Text(0, " there"), Fin(0, R::kLength), Finish()},
       kMessageStart + BlockStart(0, kTextBlock) + kPing +
           BlockDelta(0, R"({"type":"text_delta","text":"Hi"})") +
           BlockDelta(0, R"({"type":"text_delta","text":" there"})") + BlockStop(0) +
           MessageEnd("max_tokens", "null")},
      // A thinking block then a text block: indexes 0 and 1, block 0 stops before 1 starts.
      {"anthropic_thinking_then_text",
       anthropic,
       {Start(), Reasoning("hmm"), Reasoning("."), Text(0, "Hi"), Fin(0, R::kStop), Finish()},
       kMessageStart + BlockStart(0, R"({"type":"thinking","thinking":"","signature":""})") +
           kPing + BlockDelta(0, R"({"type":"thinking_delta","thinking":"hmm"})") +
           BlockDelta(0, R"({"type":"thinking_delta","thinking":"."})") + BlockStop(0) +
           BlockStart(1, kTextBlock) + BlockDelta(1, R"({"type":"text_delta","text":"Hi"})") +
           BlockStop(1) + MessageEnd("end_turn", "null")},
      {"anthropic_text_then_tool_use",
       anthropic,
       {Start(), Text(0, "ok"), ToolStart(0, "toolu_1", "f"), ToolArgs(0, "{}"),
        Fin(0, R::kToolCalls), Finish()},
       kMessageStart + BlockStart(0, kTextBlock) + kPing +
           BlockDelta(0, R"({"type":"text_delta","text":"ok"})") + BlockStop(0) +
           BlockStart(1, R"({"type":"tool_use","id":"toolu_1","name":"f","input":{}})") +
           BlockDelta(1, R"({"type":"input_json_delta","partial_json":"{}"})") + BlockStop(1) +
           MessageEnd("tool_use", "null")},
      {"anthropic_stop_sequence",
       anthropic,
       {Start(), Text(0, "a"), Fin(0, R::kStopString, "END"), Finish()},
       kMessageStart + BlockStart(0, kTextBlock) + kPing +
           BlockDelta(0, R"({"type":"text_delta","text":"a"})") + BlockStop(0) +
           MessageEnd("stop_sequence", R"("END")")},
      // No text at all: still one (empty) text block.
      {"anthropic_empty",
       anthropic,
       {Start(), Text(0, ""), Fin(0, R::kStop), Finish()},
       kMessageStart + BlockStart(0, kTextBlock) + kPing + BlockStop(0) +
           MessageEnd("end_turn", "null")},
      {"anthropic_error_ends_stream",
       anthropic,
       {Start(), Text(0, "a"), Error()},
       kMessageStart + BlockStart(0, kTextBlock) + kPing +
           BlockDelta(0, R"({"type":"text_delta","text":"a"})") +
           AEvent("error", R"({"type":"error","error":{"type":"overloaded_error",)"
                           R"("message":"shutting down"}})")},
      {"anthropic_keep_alive", anthropic, {KeepAlive()}, kPing, false},
  };
}

TEST(StreamEncoderTest, Transcripts) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::unique_ptr<StreamEncoder> enc = c.make();
    EXPECT_EQ(Transcript(*enc, c.steps), c.transcript);
    EXPECT_EQ(enc->ended(), c.ended);
  }
}

TEST(StreamEncoderTest, AnthropicCountsBlocks) {
  AnthropicMessagesEncoder enc(kMeta);
  Transcript(enc, {Start(), Reasoning("a"), Text(0, "b"), Reasoning("c")});
  EXPECT_EQ(enc.num_blocks(), 3);
}

TEST(StreamEncoderTest, ChatLogprobsWithoutText) {
  OpenAiChatEncoder enc(kMeta, 1, false);
  ChoiceEvent e = ChoiceEvent::Text(0, "");
  e.logprobs.push_back(LogprobEntry{3, "a", -0.5f, {}});
  EXPECT_EQ(enc.Encode(e),
            ChatChunk(R"({"index":0,"delta":{"content":""},"logprobs":{"content":[{"token":"a",)"
                      R"("logprob":-0.5,"bytes":[97],"top_logprobs":[]}],"refusal":null},)"
                      R"("finish_reason":null})"));
}

TEST(FinishReasonTest, ProtocolStrings) {
  struct Row {
    ChoiceFinishReason reason;
    const char* openai;
    const char* anthropic;
  };
  const Row rows[] = {{R::kStop, "stop", "end_turn"},
                      {R::kStopString, "stop", "stop_sequence"},
                      {R::kLength, "length", "max_tokens"},
                      {R::kToolCalls, "tool_calls", "tool_use"}};
  for (const Row& r : rows) {
    EXPECT_STREQ(OpenAiFinishReason(r.reason), r.openai);
    EXPECT_STREQ(AnthropicStopReason(r.reason), r.anthropic);
  }
  EXPECT_TRUE(IsErrorFinish(R::kAbort));
  EXPECT_TRUE(IsErrorFinish(R::kError));
  EXPECT_FALSE(IsErrorFinish(R::kStopString));
}

}  // namespace
}  // namespace loom
