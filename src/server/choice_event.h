// ChoiceEvent: what a generation produced, as typed per-choice events. This is the seam between
// the model's output and the wire:
//
//   Generation (token ids → text, stop strings)          generation.h
//     → reasoning and tool-call parsers, each a ChoiceEventFilter wrapping another source,
//       turning kText into kReasoning / kToolCallStart / kToolCallArgs  output_parsing.h
//     → StreamDriver + a StreamEncoder per protocol      stream_driver.h, *_stream_encoder.h
//       or ChoiceCollector → a response body             choice_collector.h
//
// Events of one choice come in order; events of different choices interleave. Every choice ends
// with exactly one kFinish event. Protocol strings ("stop", "end_turn", "tool_calls" ...) are
// chosen by the encoders only; nothing before them compares strings.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/ids.h"
#include "base/status.h"

namespace loom {

// One generated token's log-probability (when the request asked for logprobs).
struct LogprobEntry {
  TokenId token = 0;
  std::string text;  // the token's text (Decode of the single id)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // alternatives, best first
};

// Token counts of a response (OpenAI usage / Anthropic usage).
struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens read from the prefix cache
  // Speculative decoding's draft tokens scored and accepted, summed over the choices; set when
  // the server speculates (--draft-kind).
  struct Speculation {
    int drafted = 0;
    int accepted = 0;
  };
  std::optional<Speculation> speculation;
};

// Why a choice ended. (The engine's FinishReason says why its request ended; this one adds what
// the server decided on top of it: a stop string, a tool call.)
enum class ChoiceFinishReason {
  kStop,        // EOS or a stop token id          → OpenAI "stop", Anthropic "end_turn"
  kStopString,  // a stop string matched           → "stop", "stop_sequence" (+ stop_sequence)
  kLength,      // max_tokens or the context length → "length", "max_tokens"
  kToolCalls,   // the model called tools (ToolCallSource) → "tool_calls", "tool_use"
  kAbort,       // the server is shutting down: an error (503), not a normal end
  kError,       // the engine failed this request: an error, see ChoiceEvent::error
};

// True for the reasons that end a choice with an error instead of a normal finish.
inline bool IsErrorFinish(ChoiceFinishReason reason) {
  return reason == ChoiceFinishReason::kAbort || reason == ChoiceFinishReason::kError;
}

enum class ChoiceEventKind {
  kText,           // visible text: `text` (may be empty when only `logprobs` are new)
  kReasoning,      // reasoning ("thinking") text: `text` (ReasoningSource, reasoning_parser.h)
  kToolCallStart,  // a tool call begins: `tool_call_idx`, `tool_call_id`, `tool_name`
  kToolCallArgs,   // a fragment of that call's JSON arguments: `tool_call_idx`, `text`
  kFinish,         // the choice ended: `finish_reason`, `stop_string`, `stop_token`, `error`
};

struct ChoiceEvent {
  ChoiceEventKind kind = ChoiceEventKind::kText;
  int choice_idx = 0;  // which of the request's n choices

  // kText / kReasoning: the new text; kToolCallArgs: the new argument JSON fragment.
  std::string text;
  // kText: one entry per token consumed since the previous event (when logprobs were requested).
  std::vector<LogprobEntry> logprobs;

  // kToolCallStart / kToolCallArgs: the call's index among this choice's tool calls (0, 1, ...).
  int tool_call_idx = 0;
  std::string tool_call_id;  // kToolCallStart: "call_…" / "toolu_…"
  std::string tool_name;     // kToolCallStart: the function name

  // kFinish only.
  ChoiceFinishReason finish_reason = ChoiceFinishReason::kStop;
  std::optional<std::string> stop_string;  // kStopString: the stop string that matched
  std::optional<TokenId> stop_token;       // kStop: the EOS / stop id, when known
  Status error;                            // non-OK iff IsErrorFinish(finish_reason)

  static ChoiceEvent Text(int choice_idx, std::string text) {
    ChoiceEvent e;
    e.choice_idx = choice_idx;
    e.text = std::move(text);
    return e;
  }
  static ChoiceEvent Reasoning(int choice_idx, std::string text) {
    ChoiceEvent e = Text(choice_idx, std::move(text));
    e.kind = ChoiceEventKind::kReasoning;
    return e;
  }
  static ChoiceEvent ToolCallStart(int choice_idx, int call_idx, std::string id, std::string name) {
    ChoiceEvent e;
    e.kind = ChoiceEventKind::kToolCallStart;
    e.choice_idx = choice_idx;
    e.tool_call_idx = call_idx;
    e.tool_call_id = std::move(id);
    e.tool_name = std::move(name);
    return e;
  }
  static ChoiceEvent ToolCallArgs(int choice_idx, int call_idx, std::string json) {
    ChoiceEvent e = Text(choice_idx, std::move(json));
    e.kind = ChoiceEventKind::kToolCallArgs;
    e.tool_call_idx = call_idx;
    return e;
  }
  static ChoiceEvent Finish(int choice_idx, ChoiceFinishReason reason) {
    ChoiceEvent e;
    e.kind = ChoiceEventKind::kFinish;
    e.choice_idx = choice_idx;
    e.finish_reason = reason;
    return e;
  }
};

// Something that produces a request's choice events: a Generation, or a parser wrapping one.
// Not thread-safe: one owner thread. Destroying an unfinished source aborts it.
class ChoiceEventSource {
 public:
  virtual ~ChoiceEventSource() = default;

  // Waits up to `timeout` for progress; returns the events produced since the previous call, in
  // order (empty on timeout, and once done()).
  virtual std::vector<ChoiceEvent> Poll(std::chrono::milliseconds timeout) = 0;
  // True once every choice's kFinish event has been returned by Poll.
  virtual bool done() const = 0;
  // Ends every unfinished choice without more events (the client went away); done() afterwards.
  virtual void Abort() = 0;
  // The token counts so far (final once done()).
  virtual Usage usage() const = 0;
  // Calls `wake` (null: nothing) whenever Poll may have new events, from any thread (the
  // engine's too), and once at once when some are already waiting; `wake` must be cheap and must
  // not call into the source. Lets an event loop poll only sources that progressed. Default:
  // never called (the owner polls on its own).
  virtual void SetWakeup(std::function<void()> wake) { (void)wake; }
};

}  // namespace loom
