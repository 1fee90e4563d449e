// Test helpers for choice-event sources (not part of loom_server): a ChoiceEventSource that
// replays scripted batches, and a compact text form of events for expectations.
#pragma once

#include <chrono>
#include <deque>
#include <string>
#include <vector>

#include "server/choice_event.h"

namespace loom::testing {

// Returns one scripted batch per Poll; done() once all were returned.
class ScriptedSource : public ChoiceEventSource {
 public:
  explicit ScriptedSource(std::deque<std::vector<ChoiceEvent>> script)
      : script_(std::move(script)) {}
  std::vector<ChoiceEvent> Poll(std::chrono::milliseconds) override {
    if (script_.empty()) return {};
    std::vector<ChoiceEvent> batch = std::move(script_.front());
    script_.pop_front();
    return batch;
  }
  bool done() const override { return script_.empty(); }
  void Abort() override { script_.clear(); }
  Usage usage() const override { return Usage{3, 5, 0, {}}; }

 private:
  std::deque<std::vector<ChoiceEvent>> script_;
};

// "<choice><kind>[text]" per event: T text, R reasoning, S tool call start (text = the call
// index and name), A tool call arguments (index:text), F finish; "+lp" when it carries logprobs.
inline std::string Describe(const std::vector<ChoiceEvent>& events) {
  std::string s;
  for (const ChoiceEvent& e : events) {
    s += std::to_string(e.choice_idx);
    switch (e.kind) {
      case ChoiceEventKind::kText:
        s += "T[" + e.text + "]";
        break;
      case ChoiceEventKind::kReasoning:
        s += "R[" + e.text + "]";
        break;
      case ChoiceEventKind::kToolCallStart:
        s += "S[" + std::to_string(e.tool_call_idx) + ":" + e.tool_name + "]";
        break;
      case ChoiceEventKind::kToolCallArgs:
        s += "A[" + std::to_string(e.tool_call_idx) + ":" + e.text + "]";
        break;
      case ChoiceEventKind::kFinish:
        s += "F[" + e.text + "]";
        break;
    }
    s += std::string(e.logprobs.empty() ? "" : "+lp") + " ";
  }
  return s;
}

}  // namespace loom::testing
