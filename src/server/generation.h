// Generation: one API request in flight — its n engine requests, each with a detokenizer and a
// stop-string matcher. The HTTP thread that owns it calls Poll() in a loop and turns the deltas
// into JSON / SSE; the engine is never waited on (OutputStream coalesces). Destroying an
// unfinished Generation aborts its engine requests (a disconnect frees the blocks at the next
// engine step). Not thread-safe: one owner thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "server/generation_request.h"
#include "server/server_context.h"
#include "server/stop_matcher.h"
#include "server/stream_detokenizer.h"

namespace loom {

struct LogprobEntry {
  TokenId token = 0;
  std::string text;  // the token's text (Decode of the single id)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // alternatives, best first
};

// What one choice produced since the previous Poll.
struct ChoiceDelta {
  int index = 0;
  std::string text;
  std::vector<LogprobEntry> logprobs;   // one per token consumed (when requested)
  int num_tokens = 0;                   // tokens consumed by this delta
  // Set on the choice's last delta: "stop" (EOS / stop token / stop string), "length",
  // "abort" (shutdown), "error".
  std::optional<std::string> finish_reason;
  std::optional<std::string> stop_string;  // the stop string that matched, if any
  std::optional<TokenId> stop_token;
  Status error;                            // non-OK iff finish_reason == "error"
};

class Generation {
 public:
  // Submits request.n engine requests for `prompt`. Errors (nothing left running): the
  // engine's admission errors, OutOfRange when the prompt leaves no room in the context.
  static StatusOr<std::unique_ptr<Generation>> Start(ServerContext* ctx,
                                                     const GenerationRequest& request,
                                                     std::vector<TokenId> prompt);
  ~Generation();  // aborts unfinished choices

  // Waits up to `timeout` for progress; returns the deltas of choices that progressed (empty on
  // timeout). Choices finish independently.
  std::vector<ChoiceDelta> Poll(std::chrono::milliseconds timeout);
  bool done() const;
  // Aborts every unfinished choice (client went away); done() afterwards.
  void Abort();

  int num_prompt_tokens() const { return static_cast<int>(prompt_.size()); }
  int num_cached_tokens() const { return cached_tokens_; }
  int num_completion_tokens() const { return completion_tokens_; }
  const std::vector<TokenId>& prompt() const { return prompt_; }

 private:
  struct Choice {
    RequestHandle handle;
    std::unique_ptr<StreamDetokenizer> detok;
    StopMatcher stop;
    bool finished = false;
    explicit Choice(std::vector<std::string> stops) : stop(std::move(stops)) {}
  };
  Generation(ServerContext* ctx, const GenerationRequest& request, std::vector<TokenId> prompt);
  ChoiceDelta Consume(int index, StreamChunk chunk);

  ServerContext* ctx_;
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
