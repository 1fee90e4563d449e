#include "server/openai_stream_encoder.h"

#include "server/sse.h"

namespace loom {

using nlohmann::ordered_json;

namespace {

// A kText event's logprobs for its chunk; nullptr ("logprobs": null) when it has none.
const std::vector<LogprobEntry>* ChunkLogprobs(const ChoiceEvent& e) {
  return e.logprobs.empty() ? nullptr : &e.logprobs;
}

}  // namespace

std::string OpenAiStreamEncoderBase::Error(const ApiError& error) {
  return SseData(error.ToJson(ApiFlavor::kOpenAi));
}

std::string OpenAiStreamEncoderBase::Finish(const Usage& usage) {
  std::string out;
  if (include_usage_) out = SseData(UsageChunkJson(meta_, object_, usage));
  out += kSseDone;
  ended_ = true;
  return out;
}

std::string OpenAiChatEncoder::Start(const Usage&) {
  std::string out;
  const std::string empty;
  for (int i = 0; i < num_choices_; ++i) {
    out += SseData(
        ChatChunkJson(meta_, i, &empty, /*role_chunk=*/true, nullptr, nullptr, include_usage_));
  }
  return out;
}

std::string OpenAiChatEncoder::Encode(const ChoiceEvent& e) {
  switch (e.kind) {
    case ChoiceEventKind::kText: {
      if (e.text.empty() && e.logprobs.empty()) return "";  // text held back, nothing new
      return SseData(ChatChunkJson(meta_, e.choice_idx, &e.text, false, ChunkLogprobs(e), nullptr,
                                   include_usage_));
    }
    case ChoiceEventKind::kReasoning:
      if (e.text.empty()) return "";
      return SseData(ChatDeltaChunkJson(meta_, e.choice_idx,
                                        ordered_json{{"reasoning_content", e.text}}, nullptr,
                                        nullptr, include_usage_));
    case ChoiceEventKind::kToolCallStart: {
      ordered_json call{{"index", e.tool_call_idx},
                        {"id", e.tool_call_id},
                        {"type", "function"},
                        {"function", ordered_json{{"name", e.tool_name}, {"arguments", ""}}}};
      return SseData(ChatDeltaChunkJson(meta_, e.choice_idx,
                                        ordered_json{{"tool_calls", ordered_json::array({call})}},
                                        nullptr, nullptr, include_usage_));
    }
    case ChoiceEventKind::kToolCallArgs: {
      ordered_json call{{"index", e.tool_call_idx},
                        {"function", ordered_json{{"arguments", e.text}}}};
      return SseData(ChatDeltaChunkJson(meta_, e.choice_idx,
                                        ordered_json{{"tool_calls", ordered_json::array({call})}},
                                        nullptr, nullptr, include_usage_));
    }
    case ChoiceEventKind::kFinish: {
      const std::string reason = OpenAiFinishReason(e.finish_reason);
      return SseData(
          ChatChunkJson(meta_, e.choice_idx, nullptr, false, nullptr, &reason, include_usage_));
    }
  }
  return "";
}

std::string OpenAiCompletionEncoder::Start(const Usage&) {
  if (echo_text_.empty()) return "";
  std::string out;
  for (size_t i = 0; i < text_offset_.size(); ++i) {
    out += SseData(CompletionChunkJson(meta_, static_cast<int>(i), echo_text_, nullptr, 0, nullptr,
                                       include_usage_));
    text_offset_[i] = echo_text_.size();
  }
  return out;
}

std::string OpenAiCompletionEncoder::Encode(const ChoiceEvent& e) {
  switch (e.kind) {
    case ChoiceEventKind::kText: {
      if (e.text.empty() && e.logprobs.empty()) return "";
      size_t& offset = text_offset_[e.choice_idx];
      std::string out = SseData(CompletionChunkJson(meta_, e.choice_idx, e.text, ChunkLogprobs(e),
                                                    offset, nullptr, include_usage_));
      offset += e.text.size();
      return out;
    }
    case ChoiceEventKind::kFinish: {
      const std::string reason = OpenAiFinishReason(e.finish_reason);
      return SseData(
          CompletionChunkJson(meta_, e.choice_idx, "", nullptr, 0, &reason, include_usage_));
    }
    case ChoiceEventKind::kReasoning:
    case ChoiceEventKind::kToolCallStart:
    case ChoiceEventKind::kToolCallArgs:
      return "";
  }
  return "";
}

}  // namespace loom
