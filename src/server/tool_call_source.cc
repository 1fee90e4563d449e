#include "server/tool_call_source.h"

#include <utility>

#include "base/check.h"
#include "server/response_id.h"

namespace loom {

ToolCallSource::ToolCallSource(std::unique_ptr<ChoiceEventSource> inner,
                               std::function<std::unique_ptr<ToolCallParser>()> make_parser,
                               std::string id_prefix, bool parallel)
    : ChoiceEventFilter(std::move(inner)),
      make_parser_(std::move(make_parser)),
      id_prefix_(std::move(id_prefix)),
      parallel_(parallel) {}

ToolCallSource::Choice& ToolCallSource::ChoiceFor(int choice_idx) {
  CHECK_GE(choice_idx, 0);
  const auto i = static_cast<size_t>(choice_idx);
  if (choices_.size() <= i) choices_.resize(i + 1);
  if (choices_[i].parser == nullptr) choices_[i].parser = make_parser_();
  return choices_[i];
}

void ToolCallSource::Emit(int choice_idx, std::vector<ToolParseEvent> parsed,
                          std::vector<LogprobEntry> logprobs, std::vector<ChoiceEvent>* out) {
  Choice& c = choices_[static_cast<size_t>(choice_idx)];
  ChoiceEvent text = ChoiceEvent::Text(choice_idx, "");
  auto flush_text = [&] {
    if (!text.text.empty()) out->push_back(std::exchange(text, ChoiceEvent::Text(choice_idx, "")));
  };
  for (ToolParseEvent& p : parsed) {
    // Without parallel calls, everything after the first call is dropped.
    const bool after_first = !parallel_ && c.num_calls >= 1;
    switch (p.kind) {
      case ToolParseEvent::Kind::kText:
        if (!after_first) text.text += p.text;
        break;
      case ToolParseEvent::Kind::kCallStart: {
        ++c.num_calls;
        if (!parallel_ && c.num_calls > 1) break;
        flush_text();
        out->push_back(ChoiceEvent::ToolCallStart(choice_idx, c.num_calls - 1,
                                                  NewResponseId(id_prefix_), std::move(p.text)));
        break;
      }
      case ToolParseEvent::Kind::kReasoning:  // harmony's analysis channel
        if (after_first) break;
        flush_text();
        out->push_back(ChoiceEvent::Reasoning(choice_idx, std::move(p.text)));
        break;
      case ToolParseEvent::Kind::kCallArgs: {
        if ((!parallel_ && c.num_calls > 1) || p.text.empty()) break;
        CHECK_GT(c.num_calls, 0) << "tool call arguments before a call started";
        flush_text();
        out->push_back(ChoiceEvent::ToolCallArgs(choice_idx, c.num_calls - 1, std::move(p.text)));
        break;
      }
    }
  }
  if (!text.text.empty() || !logprobs.empty()) {
    text.logprobs = std::move(logprobs);
    out->push_back(std::move(text));
  }
}

void ToolCallSource::OnText(ChoiceEvent e, std::vector<ChoiceEvent>* out) {
  std::vector<ToolParseEvent> parsed;
  ChoiceFor(e.choice_idx).parser->Feed(e.text, &parsed);
  Emit(e.choice_idx, std::move(parsed), std::move(e.logprobs), out);
}

void ToolCallSource::OnFinish(ChoiceEvent e, std::vector<ChoiceEvent>* out) {
  Choice& c = ChoiceFor(e.choice_idx);
  std::vector<ToolParseEvent> parsed;
  c.parser->Flush(&parsed);
  Emit(e.choice_idx, std::move(parsed), {}, out);
  if (c.num_calls > 0 && e.finish_reason == ChoiceFinishReason::kStop) {
    e.finish_reason = ChoiceFinishReason::kToolCalls;
  }
  out->push_back(std::move(e));
}

}  // namespace loom
