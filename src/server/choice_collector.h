// ChoiceCollector: assembles the choice events of a non-streaming request into whole choices,
// which the response builders (openai_response.h, anthropic_response.h) turn into JSON. The
// same events the stream encoders see, aggregated. Not thread-safe: one owner thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/choice_event.h"

namespace loom {

struct CollectedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, the concatenated kToolCallArgs fragments
};

// One choice of a non-streaming response.
struct CollectedChoice {
  std::string text;       // the echoed prompt (if any) + the kText deltas
  std::string reasoning;  // the kReasoning deltas ("" = none)
  std::vector<CollectedToolCall> tool_calls;
  std::vector<LogprobEntry> logprobs;
  ChoiceFinishReason finish_reason = ChoiceFinishReason::kStop;
  std::optional<std::string> stop_string;  // kStopString: the stop string that matched
  bool finished = false;                   // its kFinish arrived
};

class ChoiceCollector {
 public:
  // `num_choices` choices, each starting with `prefix` as its text (completions echo).
  explicit ChoiceCollector(int num_choices, const std::string& prefix = "");

  // Adds one event to its choice. An error finish (kAbort / kError) makes failed() true and
  // keeps the first such error; the response is then that error.
  void Add(ChoiceEvent event);

  bool failed() const { return !error_.ok(); }
  const Status& error() const { return error_; }  // the first failed choice's error
  const std::vector<CollectedChoice>& choices() const { return choices_; }

 private:
  std::vector<CollectedChoice> choices_;
  Status error_;
};

}  // namespace loom
