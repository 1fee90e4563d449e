// OpenAI stream encoders: chat.completion.chunk (OpenAiChatEncoder) and text_completion
// (OpenAiCompletionEncoder) server-sent events, `data: {...}` lines ending with `data: [DONE]`.
//
//   chat:        role chunk per choice → content / reasoning_content / tool_calls deltas →
//                a finish_reason chunk per choice → [usage chunk] → [DONE]
//   completions: [echo chunk per choice] → text chunks (+ logprobs with text_offset) →
//                a finish_reason chunk per choice → [usage chunk] → [DONE]
//
// With stream_options.include_usage every chunk carries "usage": null and a last chunk with
// empty choices carries the usage. A failed choice writes `data: {"error": ...}` in place of its
// finish chunk; the other choices go on.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "server/openai_response.h"
#include "server/stream_encoder.h"

namespace loom {

// What the two OpenAI encoders share: the usage chunk, [DONE], error events, keep-alives.
class OpenAiStreamEncoderBase : public StreamEncoder {
 public:
  std::string Error(const ApiError& error) override;
  std::string Finish(const Usage& usage) override;
  std::string KeepAlive() const override { return ": keep-alive\n\n"; }
  bool ended() const override { return ended_; }

 protected:
  // `object`: "chat.completion.chunk" or "text_completion" (the usage chunk's object).
  OpenAiStreamEncoderBase(ResponseMeta meta, const char* object, bool include_usage)
      : meta_(std::move(meta)), object_(object), include_usage_(include_usage) {}

  ResponseMeta meta_;
  const char* object_;
  bool include_usage_;
  bool ended_ = false;
};

class OpenAiChatEncoder : public OpenAiStreamEncoderBase {
 public:
  // `num_choices`: the request's n (each gets a role chunk at the start).
  OpenAiChatEncoder(ResponseMeta meta, int num_choices, bool include_usage)
      : OpenAiStreamEncoderBase(std::move(meta), "chat.completion.chunk", include_usage),
        num_choices_(num_choices) {}

  std::string Start(const Usage& usage) override;
  // kText → "content" (+ logprobs), kReasoning → "reasoning_content", kToolCallStart /
  // kToolCallArgs → "tool_calls" entries, kFinish → the finish_reason chunk.
  std::string Encode(const ChoiceEvent& event) override;

 private:
  int num_choices_;
};

class OpenAiCompletionEncoder : public OpenAiStreamEncoderBase {
 public:
  // `echo_text`: the prompt, sent first for every choice when the request had echo ("" = none).
  OpenAiCompletionEncoder(ResponseMeta meta, int num_choices, bool include_usage,
                          std::string echo_text)
      : OpenAiStreamEncoderBase(std::move(meta), "text_completion", include_usage),
        echo_text_(std::move(echo_text)),
        text_offset_(num_choices, 0) {}

  std::string Start(const Usage& usage) override;
  // kText → a text chunk, kFinish → the finish_reason chunk. Text completions have no reasoning
  // or tool-call fields: those events are dropped (no parser runs on this route).
  std::string Encode(const ChoiceEvent& event) override;

 private:
  std::string echo_text_;
  std::vector<size_t> text_offset_;  // per choice: bytes of text sent so far (logprobs offsets)
};

}  // namespace loom
