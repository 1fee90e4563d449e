// AnthropicMessagesEncoder: a request's choice events → Anthropic Messages stream events. The
// message is a list of content blocks; the encoder is a state machine over them:
//
//   message_start
//   for each block (index 0, 1, 2, ... in the order they open):
//     content_block_start {index, content_block}   (a ping follows the first one)
//     content_block_delta {index, delta}*
//     content_block_stop  {index}
//   message_delta {stop_reason, stop_sequence, usage.output_tokens}
//   message_stop
//
// A block opens on the first event of its kind and closes when another kind arrives (or at the
// end): kReasoning → a "thinking" block (thinking_delta), kText → a "text" block (text_delta),
// kToolCallStart → a "tool_use" block whose kToolCallArgs are input_json_delta. A stream that
// produced no text still gets one (empty) text block, as Anthropic's API does. A failed choice
// ends the stream with `event: error`. Messages have one choice (n is 1).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "server/openai_response.h"
#include "server/stream_encoder.h"

namespace loom {

class AnthropicMessagesEncoder : public StreamEncoder {
 public:
  explicit AnthropicMessagesEncoder(ResponseMeta meta) : meta_(std::move(meta)) {}

  std::string Start(const Usage& usage) override;  // message_start
  std::string Encode(const ChoiceEvent& event) override;
  std::string Error(const ApiError& error) override;  // event: error; ended() afterwards
  std::string Finish(const Usage& usage) override;
  std::string KeepAlive() const override;  // event: ping
  bool ended() const override { return ended_; }

  // The number of content blocks opened so far (the next block's index).
  int num_blocks() const { return num_blocks_; }

 private:
  enum class Block { kNone, kText, kThinking, kToolUse };
  // Closes the open block, if any (content_block_stop).
  std::string CloseBlock();
  // Opens a block of `type` with `content_block` as its start payload, closing the open one.
  std::string OpenBlock(Block type, nlohmann::ordered_json content_block);
  std::string Delta(nlohmann::ordered_json delta) const;  // content_block_delta, open block

  ResponseMeta meta_;
  Block open_ = Block::kNone;
  int open_tool_call_idx_ = -1;  // kToolUse: the ChoiceEvent::tool_call_idx of the open block
  int num_blocks_ = 0;
  ChoiceFinishReason finish_reason_ = ChoiceFinishReason::kStop;
  std::optional<std::string> stop_sequence_;
  bool ended_ = false;
};

}  // namespace loom
