#include "server/choice_collector.h"

#include <utility>

#include "base/check.h"

namespace loom {

ChoiceCollector::ChoiceCollector(int num_choices, const std::string& prefix)
    : choices_(num_choices) {
  for (CollectedChoice& c : choices_) c.text = prefix;
}

void ChoiceCollector::Add(ChoiceEvent e) {
  CHECK(e.choice_idx >= 0 && e.choice_idx < static_cast<int>(choices_.size()))
      << "event for choice " << e.choice_idx << " of " << choices_.size();
  CollectedChoice& c = choices_[e.choice_idx];
  switch (e.kind) {
    case ChoiceEventKind::kText:
      c.text += e.text;
      for (LogprobEntry& entry : e.logprobs) c.logprobs.push_back(std::move(entry));
      break;
    case ChoiceEventKind::kReasoning:
      c.reasoning += e.text;
      break;
    case ChoiceEventKind::kToolCallStart:
      CHECK(e.tool_call_idx == static_cast<int>(c.tool_calls.size()))
          << "tool call " << e.tool_call_idx << " started out of order";
      c.tool_calls.push_back(
          CollectedToolCall{std::move(e.tool_call_id), std::move(e.tool_name), ""});
      break;
    case ChoiceEventKind::kToolCallArgs:
      CHECK(e.tool_call_idx >= 0 && e.tool_call_idx < static_cast<int>(c.tool_calls.size()))
          << "arguments for tool call " << e.tool_call_idx << " before its start";
      c.tool_calls[e.tool_call_idx].arguments += e.text;
      break;
    case ChoiceEventKind::kFinish:
      c.finished = true;
      c.finish_reason = e.finish_reason;
      c.stop_string = std::move(e.stop_string);
      if (IsErrorFinish(e.finish_reason) && error_.ok()) {
        error_ = e.error.ok() ? InternalError("generation failed") : std::move(e.error);
      }
      break;
  }
}

}  // namespace loom
