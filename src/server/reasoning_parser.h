// Reasoning ("thinking") sections of generated text (FEATURES.md F17; issue 22 item 5): the text a
// model writes between its family's markers (<think> ... </think> for Qwen3, DeepSeek-R1, QwQ,
// GLM) is reasoning, the rest is the answer. Split as the text streams in, so a marker cut across
// two chunks never leaks into either side.
//
//   ReasoningSplitter    one choice's text → (reasoning, text) pieces
//   ReasoningSource      a ChoiceEventSource wrapping another (a Generation): its kText events
//                        become kReasoning and kText events (choice_event.h)
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/choice_event.h"
#include "server/choice_event_filter.h"

namespace loom {

struct ReasoningMarkers {
  std::string open = "<think>";
  std::string close = "</think>";
};

// The rules (those of vLLM's and llama.cpp's <think> parsers):
//   - the section opens only at the very start of the output (after whitespace), or before it
//     when the prompt already opened it (`starts_in_reasoning`: templates whose generation prompt
//     ends with "<think>\n", e.g. DeepSeek-R1 and Qwen3 with thinking on);
//   - it ends at the first close marker; everything after it is text, markers included;
//   - without an open marker (and without `starts_in_reasoning`) the output is all text, a
//     stray close marker included: which template opened a section is the caller's knowledge;
//   - output that ends inside the section is all reasoning.
// The markers themselves are in neither piece.
class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(ReasoningMarkers markers = {}, bool starts_in_reasoning = false);

  struct Pieces {
    std::string reasoning;
    std::string text;
  };
  // The next chunk of the choice's text; returns what is decided so far. A tail that may be the
  // start of a marker is held back until the next chunk (or Flush) decides it.
  Pieces Feed(std::string_view chunk);
  // The output ended: whatever was held back, in the section it was in.
  Pieces Flush();

  bool in_reasoning() const { return state_ == State::kReasoning; }

 private:
  enum class State { kStart, kReasoning, kText };
  ReasoningMarkers markers_;
  State state_;
  std::string held_;  // undecided text (kStart: leading whitespace + a partial open marker)
};

// Wraps `inner`: every choice's kText events pass through its own ReasoningSplitter and come out
// as kReasoning and/or kText events (in that order; logprobs stay on the kText event, which is
// sent even with empty text when it carries them). Before a choice's kFinish the splitter is
// flushed. Other events pass unchanged.
class ReasoningSource final : public ChoiceEventFilter {
 public:
  ReasoningSource(std::unique_ptr<ChoiceEventSource> inner, ReasoningMarkers markers,
                  bool starts_in_reasoning);

 private:
  void OnText(ChoiceEvent text, std::vector<ChoiceEvent>* out) override;
  void OnFinish(ChoiceEvent finish, std::vector<ChoiceEvent>* out) override;
  ReasoningSplitter& SplitterFor(int choice_idx);
  // Appends the events of `pieces` (and `logprobs`) for `choice_idx` to `out`.
  static void Emit(int choice_idx, ReasoningSplitter::Pieces pieces,
                   std::vector<LogprobEntry> logprobs, std::vector<ChoiceEvent>* out);

  ReasoningMarkers markers_;
  bool starts_in_reasoning_;
  std::vector<std::unique_ptr<ReasoningSplitter>> splitters_;  // by choice index
};

}  // namespace loom
