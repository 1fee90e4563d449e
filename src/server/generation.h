// Generation: one API request in flight — its n engine requests, each with a detokenizer and a
// stop-string matcher — as a ChoiceEventSource: Poll() turns what the engine produced into
// typed choice events (kText with logprobs, one kFinish per choice). The HTTP thread that owns
// it drives it (StreamDriver for streams, ChoiceCollector otherwise); the engine is never waited
// on (OutputStream coalesces). Destroying an unfinished Generation aborts its engine requests (a
// disconnect frees the blocks at the next engine step). Not thread-safe: one owner thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "server/choice_event.h"
#include "server/generation_request.h"
#include "server/server_context.h"
#include "server/stop_matcher.h"
#include "server/stream_detokenizer.h"

namespace loom {

class Generation : public ChoiceEventSource {
 public:
  // Submits request.n engine requests for `prompt`. Errors (nothing left running): the
  // engine's admission errors, OutOfRange when the prompt leaves no room in the context.
  static StatusOr<std::unique_ptr<Generation>> Start(ServerContext* ctx,
                                                     const GenerationRequest& request,
                                                     std::vector<TokenId> prompt);
  ~Generation() override;  // aborts unfinished choices

  // Waits up to `timeout` for progress; returns the events of the choices that progressed: per
  // choice a kText (new text and/or logprobs; none while text is held back for a stop string)
  // then its kFinish once it ended. Choices finish independently.
  std::vector<ChoiceEvent> Poll(std::chrono::milliseconds timeout) override;
  bool done() const override;
  // Aborts every unfinished choice (client went away); done() afterwards, no kFinish events.
  void Abort() override;
  // Listens on every choice's engine stream (OutputStream::SetListener).
  void SetWakeup(std::function<void()> wake) override;
  Usage usage() const override;

  int num_prompt_tokens() const { return static_cast<int>(prompt_.size()); }
  // The prompt's token ids (what echo decodes).
  const std::vector<TokenId>& prompt() const { return prompt_; }

 private:
  struct Choice {
    RequestHandle handle;
    std::unique_ptr<StreamDetokenizer> detok;
    StopMatcher stop;
    bool finished = false;
    std::string transcript;  // the choice's text so far, kept only for --log-prompts
    std::optional<SpeculationUsage> speculation;  // the engine's totals for this choice
    explicit Choice(std::vector<std::string> stops) : stop(std::move(stops)) {}
  };
  Generation(ServerContext* ctx, const GenerationRequest& request, std::vector<TokenId> prompt);
  // Appends the events of choice `choice_idx` for `chunk` to *out.
  void Consume(int choice_idx, StreamChunk chunk, std::vector<ChoiceEvent>* out);

  ServerContext* ctx_;
  std::string log_id_;  // the request's id in the logs
  bool want_logprobs_;
  std::vector<TokenId> prompt_;
  std::vector<std::unique_ptr<Choice>> choices_;
  int cached_tokens_ = 0;
  int completion_tokens_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_token_;
  bool first_token_seen_ = false;
  bool metrics_done_ = false;
};

}  // namespace loom
