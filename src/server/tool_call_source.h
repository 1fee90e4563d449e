// ToolCallSource: a ChoiceEventSource wrapping another (a Generation, or a ReasoningSource over
// one) that runs each choice's kText events through its own ToolCallParser (tool_parser.h), so
// they come out as kText, kToolCallStart and kToolCallArgs events (choice_event.h). A choice
// that called a tool and ended on EOS / a stop token finishes with kToolCalls. kReasoning
// events pass unchanged: tool calls are looked for only in the answer. A parser's own reasoning
// (harmony's analysis channel) comes out as kReasoning events.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/choice_event.h"
#include "server/choice_event_filter.h"
#include "server/tool_parser.h"

namespace loom {

class ToolCallSource final : public ChoiceEventFilter {
 public:
  // `make_parser` makes one choice's parser. Call ids are NewResponseId(`id_prefix`): "call_…"
  // for OpenAI, "toolu_…" for Anthropic. `parallel` false keeps only each choice's
  // first call (OpenAI parallel_tool_calls: false, Anthropic disable_parallel_tool_use).
  ToolCallSource(std::unique_ptr<ChoiceEventSource> inner,
                 std::function<std::unique_ptr<ToolCallParser>()> make_parser,
                 std::string id_prefix, bool parallel);

 private:
  void OnText(ChoiceEvent text, std::vector<ChoiceEvent>* out) override;
  void OnFinish(ChoiceEvent finish, std::vector<ChoiceEvent>* out) override;

  struct Choice {
    std::unique_ptr<ToolCallParser> parser;
    int num_calls = 0;  // kCallStart events seen
  };
  Choice& ChoiceFor(int choice_idx);
  // Appends the choice events of `parsed` (and `logprobs`, on a kText event) to `out`.
  void Emit(int choice_idx, std::vector<ToolParseEvent> parsed, std::vector<LogprobEntry> logprobs,
            std::vector<ChoiceEvent>* out);

  std::function<std::unique_ptr<ToolCallParser>()> make_parser_;
  std::string id_prefix_;
  bool parallel_;
  std::vector<Choice> choices_;  // by choice index
};

}  // namespace loom
