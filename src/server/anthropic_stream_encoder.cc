#include "server/anthropic_stream_encoder.h"

#include "base/check.h"
#include "server/anthropic_response.h"
#include "server/sse.h"

namespace loom {

using nlohmann::ordered_json;

std::string AnthropicMessagesEncoder::Start(const Usage& usage) {
  return SseEvent("message_start", MessageStartJson(meta_, usage));
}

std::string AnthropicMessagesEncoder::CloseBlock() {
  if (open_ == Block::kNone) return "";
  open_ = Block::kNone;
  open_tool_call_idx_ = -1;
  return SseEvent("content_block_stop", ContentBlockStopJson(num_blocks_ - 1));
}

std::string AnthropicMessagesEncoder::OpenBlock(Block type, ordered_json content_block) {
  std::string out = CloseBlock();
  out +=
      SseEvent("content_block_start", ContentBlockStartJson(num_blocks_, std::move(content_block)));
  // Anthropic pings right after the first block opens; clients expect nothing of it.
  if (num_blocks_ == 0) out += KeepAlive();
  ++num_blocks_;
  open_ = type;
  return out;
}

std::string AnthropicMessagesEncoder::Delta(ordered_json delta) const {
  return SseEvent("content_block_delta", ContentBlockDeltaJson(num_blocks_ - 1, std::move(delta)));
}

std::string AnthropicMessagesEncoder::Encode(const ChoiceEvent& e) {
  CHECK(e.choice_idx == 0) << "Anthropic messages have one choice, got choice " << e.choice_idx;
  std::string out;
  switch (e.kind) {
    case ChoiceEventKind::kText:
      if (e.text.empty()) return "";
      if (open_ != Block::kText) out = OpenBlock(Block::kText, {{"type", "text"}, {"text", ""}});
      return out + Delta({{"type", "text_delta"}, {"text", e.text}});
    case ChoiceEventKind::kReasoning:
      if (e.text.empty()) return "";
      if (open_ != Block::kThinking) {
        out = OpenBlock(Block::kThinking,
                        {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      }
      return out + Delta({{"type", "thinking_delta"}, {"thinking", e.text}});
    case ChoiceEventKind::kToolCallStart:
      out = OpenBlock(Block::kToolUse, {{"type", "tool_use"},
                                        {"id", e.tool_call_id},
                                        {"name", e.tool_name},
                                        {"input", ordered_json::object()}});
      open_tool_call_idx_ = e.tool_call_idx;
      return out;
    case ChoiceEventKind::kToolCallArgs:
      CHECK(open_ == Block::kToolUse && open_tool_call_idx_ == e.tool_call_idx)
          << "tool call " << e.tool_call_idx << " arguments without its kToolCallStart";
      if (e.text.empty()) return "";
      return Delta({{"type", "input_json_delta"}, {"partial_json", e.text}});
    case ChoiceEventKind::kFinish:
      finish_reason_ = e.finish_reason;
      stop_sequence_ = e.stop_string;
      return "";
  }
  return "";
}

std::string AnthropicMessagesEncoder::Error(const ApiError& error) {
  ended_ = true;
  return SseEvent("error", error.ToJson(ApiFlavor::kAnthropic));
}

std::string AnthropicMessagesEncoder::Finish(const Usage& usage) {
  std::string out;
  if (num_blocks_ == 0) out = OpenBlock(Block::kText, {{"type", "text"}, {"text", ""}});
  out += CloseBlock();
  out += SseEvent("message_delta",
                  MessageDeltaJson(AnthropicStopReason(finish_reason_), stop_sequence_, usage));
  out += SseEvent("message_stop", ordered_json{{"type", "message_stop"}});
  ended_ = true;
  return out;
}

std::string AnthropicMessagesEncoder::KeepAlive() const {
  return SseEvent("ping", ordered_json{{"type", "ping"}});
}

}  // namespace loom
