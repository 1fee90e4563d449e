// ResponsesStreamEncoder: a request's choice events → the Responses API's stream. Every event is
// `event: <type>` + a JSON `data` with that type and a `sequence_number` (0, 1, 2, ...); there is
// no [DONE]. The output is a list of items, each opened by the first event of its kind and
// closed when another kind arrives or the choice ends:
//
//   response.created, response.in_progress                 (the response, status in_progress)
//   per item (output_index 0, 1, ...):
//     response.output_item.added
//     kReasoning → response.content_part.added (reasoning_text)
//                  response.reasoning_text.delta* response.reasoning_text.done
//                  response.content_part.done
//     kText      → response.content_part.added (output_text)
//                  response.output_text.delta* response.output_text.done
//                  response.content_part.done
//     kToolCall* → response.function_call_arguments.delta* response.function_call_arguments.done
//     response.output_item.done
//   response.completed | response.incomplete (max_output_tokens)  (the whole response)
//
// A response with neither text nor calls still gets one (empty) message item. A failed choice
// ends the stream with response.failed. Responses have one choice.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "server/responses_response.h"
#include "server/stream_encoder.h"

namespace loom {

class ResponsesStreamEncoder : public StreamEncoder {
 public:
  // Counts the tokens of a text (for usage.output_tokens_details.reasoning_tokens).
  using TokenCounter = std::function<int(const std::string&)>;
  // Called once by Finish with the final response object and its output items.
  using OnDone = std::function<void(const nlohmann::ordered_json& response,
                                    const std::vector<ResponsesOutputItem>& output)>;

  // `echo`: ResponsesRequest::echo; `tool_namespaces`: ResponsesRequest::tool_namespaces.
  ResponsesStreamEncoder(ResponseMeta meta, nlohmann::ordered_json echo,
                         std::map<std::string, std::string> tool_namespaces,
                         TokenCounter count_tokens, OnDone on_done);

  std::string Start(const Usage& usage) override;  // response.created + response.in_progress
  std::string Encode(const ChoiceEvent& event) override;
  std::string Error(const ApiError& error) override;  // response.failed; ended() afterwards
  std::string Finish(const Usage& usage) override;    // closes the open item, then the response
  std::string KeepAlive() const override;             // an SSE comment
  bool ended() const override { return ended_; }

  // The output items so far (the last one still open until another kind arrives or Finish).
  const std::vector<ResponsesOutputItem>& output() const { return output_; }

 private:
  // `payload` with its type and the next sequence_number, framed as an SSE event.
  std::string Emit(const char* type, nlohmann::ordered_json payload);
  // Opens a new item (closing the open one first).
  std::string OpenItem(ResponsesOutputItem item);
  std::string CloseItem();
  // item_id + output_index of the open item, then `rest`.
  nlohmann::ordered_json ItemRef(nlohmann::ordered_json rest) const;

  ResponseMeta meta_;
  nlohmann::ordered_json echo_;
  std::map<std::string, std::string> tool_namespaces_;
  TokenCounter count_tokens_;
  OnDone on_done_;
  std::vector<ResponsesOutputItem> output_;
  bool open_ = false;  // output_.back() is open
  int open_tool_call_idx_ = -1;
  int sequence_number_ = 0;
  ChoiceFinishReason finish_reason_ = ChoiceFinishReason::kStop;
  bool ended_ = false;
};

}  // namespace loom
