#include "server/responses_stream_encoder.h"

#include "base/check.h"
#include "server/response_id.h"
#include "server/sse.h"

namespace loom {

using nlohmann::ordered_json;
using Kind = ResponsesOutputItem::Kind;

ResponsesStreamEncoder::ResponsesStreamEncoder(ResponseMeta meta, ordered_json echo,
                                               std::map<std::string, std::string> tool_namespaces,
                                               TokenCounter count_tokens, OnDone on_done)
    : meta_(std::move(meta)),
      echo_(std::move(echo)),
      tool_namespaces_(std::move(tool_namespaces)),
      count_tokens_(std::move(count_tokens)),
      on_done_(std::move(on_done)) {}

std::string ResponsesStreamEncoder::Emit(const char* type, ordered_json payload) {
  ordered_json j{{"type", type}, {"sequence_number", sequence_number_++}};
  for (auto it = payload.begin(); it != payload.end(); ++it) j[it.key()] = std::move(it.value());
  return SseEvent(type, j);
}

ordered_json ResponsesStreamEncoder::ItemRef(ordered_json rest) const {
  ordered_json j{{"item_id", output_.back().id},
                 {"output_index", static_cast<int>(output_.size()) - 1}};
  for (auto it = rest.begin(); it != rest.end(); ++it) j[it.key()] = std::move(it.value());
  return j;
}

std::string ResponsesStreamEncoder::Start(const Usage&) {
  const ordered_json r = ResponseObjectJson(meta_, echo_, "in_progress", {}, nullptr);
  std::string out = Emit("response.created", {{"response", r}});
  return out + Emit("response.in_progress", {{"response", r}});
}

std::string ResponsesStreamEncoder::OpenItem(ResponsesOutputItem item) {
  std::string out = CloseItem();
  output_.push_back(std::move(item));
  open_ = true;
  const ResponsesOutputItem& it = output_.back();
  out += Emit("response.output_item.added", {{"output_index", static_cast<int>(output_.size()) - 1},
                                             {"item", OutputItemJson(it, "in_progress")}});
  if (it.kind == Kind::kMessage) {
    out += Emit("response.content_part.added", ItemRef({{"content_index", 0},
                                                        {"part",
                                                         {{"type", "output_text"},
                                                          {"text", ""},
                                                          {"annotations", ordered_json::array()},
                                                          {"logprobs", ordered_json::array()}}}}));
  } else if (it.kind == Kind::kReasoning) {
    out +=
        Emit("response.content_part.added",
             ItemRef({{"content_index", 0}, {"part", {{"type", "reasoning_text"}, {"text", ""}}}}));
  }
  return out;
}

std::string ResponsesStreamEncoder::CloseItem() {
  if (!open_) return "";
  open_ = false;
  open_tool_call_idx_ = -1;
  const ResponsesOutputItem& it = output_.back();
  std::string out;
  switch (it.kind) {
    case Kind::kMessage:
      out += Emit(
          "response.output_text.done",
          ItemRef({{"content_index", 0}, {"text", it.text}, {"logprobs", ordered_json::array()}}));
      out += Emit(
          "response.content_part.done",
          ItemRef({{"content_index", 0}, {"part", OutputItemJson(it, "completed")["content"][0]}}));
      break;
    case Kind::kReasoning:
      out +=
          Emit("response.reasoning_text.done", ItemRef({{"content_index", 0}, {"text", it.text}}));
      out += Emit(
          "response.content_part.done",
          ItemRef({{"content_index", 0}, {"part", OutputItemJson(it, "completed")["content"][0]}}));
      break;
    case Kind::kFunctionCall:
      out += Emit("response.function_call_arguments.done",
                  ItemRef({{"name", it.name}, {"arguments", it.arguments}}));
      break;
  }
  return out +
         Emit("response.output_item.done", {{"output_index", static_cast<int>(output_.size()) - 1},
                                            {"item", OutputItemJson(it, "completed")}});
}

std::string ResponsesStreamEncoder::Encode(const ChoiceEvent& e) {
  CHECK(e.choice_idx == 0) << "responses have one choice, got choice " << e.choice_idx;
  std::string out;
  switch (e.kind) {
    case ChoiceEventKind::kText:
      if (e.text.empty()) return "";
      if (!open_ || output_.back().kind != Kind::kMessage) {
        out = OpenItem({Kind::kMessage, NewResponseId("msg_"), "", "", "", "", ""});
      }
      output_.back().text += e.text;
      return out +
             Emit("response.output_text.delta", ItemRef({{"content_index", 0},
                                                         {"delta", e.text},
                                                         {"logprobs", ordered_json::array()}}));
    case ChoiceEventKind::kReasoning:
      if (e.text.empty()) return "";
      if (!open_ || output_.back().kind != Kind::kReasoning) {
        out = OpenItem({Kind::kReasoning, NewResponseId("rs_"), "", "", "", "", ""});
      }
      output_.back().text += e.text;
      return out + Emit("response.reasoning_text.delta",
                        ItemRef({{"content_index", 0}, {"delta", e.text}}));
    case ChoiceEventKind::kToolCallStart: {
      auto ns = tool_namespaces_.find(e.tool_name);
      out = OpenItem({Kind::kFunctionCall, NewResponseId("fc_"), "", e.tool_call_id, e.tool_name,
                      "", ns == tool_namespaces_.end() ? "" : ns->second});
      open_tool_call_idx_ = e.tool_call_idx;
      return out;
    }
    case ChoiceEventKind::kToolCallArgs:
      CHECK(open_ && output_.back().kind == Kind::kFunctionCall &&
            open_tool_call_idx_ == e.tool_call_idx)
          << "tool call " << e.tool_call_idx << " arguments without its kToolCallStart";
      if (e.text.empty()) return "";
      output_.back().arguments += e.text;
      return Emit("response.function_call_arguments.delta", ItemRef({{"delta", e.text}}));
    case ChoiceEventKind::kFinish:
      finish_reason_ = e.finish_reason;
      return "";
  }
  return "";
}

std::string ResponsesStreamEncoder::Error(const ApiError& error) {
  ended_ = true;
  const ordered_json r = ResponseObjectJson(meta_, echo_, "failed", output_, nullptr, &error);
  return Emit("response.failed", {{"response", r}});
}

std::string ResponsesStreamEncoder::Finish(const Usage& usage) {
  std::string out = CloseItem();
  bool answered = false;
  for (const ResponsesOutputItem& it : output_) answered = answered || it.kind != Kind::kReasoning;
  if (!answered) {
    out += OpenItem({Kind::kMessage, NewResponseId("msg_"), "", "", "", "", ""});
    out += CloseItem();
  }
  std::string reasoning;
  for (const ResponsesOutputItem& it : output_) {
    if (it.kind == Kind::kReasoning) reasoning += it.text;
  }
  const int reasoning_tokens = reasoning.empty() || !count_tokens_ ? 0 : count_tokens_(reasoning);
  const std::string status = ResponsesStatus(finish_reason_);
  const ordered_json r = ResponseObjectJson(meta_, echo_, status, output_,
                                            ResponsesUsageJson(usage, reasoning_tokens));
  out +=
      Emit(status == "completed" ? "response.completed" : "response.incomplete", {{"response", r}});
  if (on_done_) on_done_(r, output_);
  ended_ = true;
  return out;
}

std::string ResponsesStreamEncoder::KeepAlive() const { return ": keep-alive\n\n"; }

}  // namespace loom
