// StreamEncoder: turns a request's choice events into one protocol's server-sent events. The
// StreamDriver (stream_driver.h) owns the loop and calls, in this order:
//
//   Start → (Encode | KeepAlive)* → Finish         a stream that completes
//   Start → (Encode | KeepAlive)* → Error → ...     a choice failed (kAbort / kError)
//
// After Error the stream goes on (OpenAI: the other choices continue, then Finish) or has ended
// (Anthropic: ended() is true and the driver closes it). Implementations:
// OpenAiChatEncoder, OpenAiCompletionEncoder (openai_stream_encoder.h) and
// AnthropicMessagesEncoder (anthropic_stream_encoder.h). Each returns SSE text (sse.h framing);
// "" means nothing to write. Not thread-safe: one owner thread.
#pragma once

#include <string>

#include "server/api_error.h"
#include "server/choice_event.h"

namespace loom {

class StreamEncoder {
 public:
  virtual ~StreamEncoder() = default;

  // What opens the stream, before any event; `usage` holds the prompt counts.
  virtual std::string Start(const Usage& usage) = 0;
  // One event. Never a kFinish whose reason IsErrorFinish (those go to Error).
  virtual std::string Encode(const ChoiceEvent& event) = 0;
  // A choice failed after the stream started; the error event, in the protocol's shape.
  virtual std::string Error(const ApiError& error) = 0;
  // Every choice finished: what closes the stream (final usage, terminator). ended() afterwards.
  virtual std::string Finish(const Usage& usage) = 0;
  // A comment or ping written when the stream has been idle; keeps proxies from timing out.
  virtual std::string KeepAlive() const = 0;
  // True once nothing more may be written (after Finish, or an Error that ends the stream).
  virtual bool ended() const = 0;
};

}  // namespace loom
