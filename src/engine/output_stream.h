// OutputStream: one request's results, written by the engine thread, read by another thread
// (an HTTP handler). The engine never waits on it: Push/Finish take a short mutex, append and
// notify. Pending outputs coalesce into one chunk, so a slow reader sees everything produced
// since its last pop in a single chunk; what is buffered is bounded by the request's max_tokens.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "sample/sampler.h"

namespace loom {

enum class FinishReason {
  kStop,    // an EOS or stop token id (not emitted; see StreamChunk::stop_token)
  kLength,  // max_tokens or the context length
  kAbort,   // Engine::Abort or shutdown
  kError,   // this request failed (StreamChunk::error says why); the others continue
};
const char* FinishReasonName(FinishReason reason);  // "stop", "length", "abort", "error"

struct TokenOutput {
  TokenId token = 0;
  float logprob = 0.0f;                    // when logprobs were requested
  std::vector<TokenLogprob> top_logprobs;  // params.num_logprobs entries
};

// A request's speculative decoding so far (usage.speculation): draft tokens the target scored,
// and how many of them it accepted.
struct SpeculationUsage {
  int drafted = 0;
  int accepted = 0;
};

// Everything produced since the previous pop.
struct StreamChunk {
  std::vector<TokenOutput> tokens;
  std::optional<FinishReason> finish_reason;  // set on the last chunk only
  std::optional<TokenId> stop_token;          // the EOS / stop id that ended it, if any
  Status error;                               // non-OK iff finish_reason == kError
  int num_prompt_tokens = 0;
  int num_cached_tokens = 0;  // prompt tokens served from the prefix cache (usage)
  // Set when the engine speculates (--draft-kind): this request's totals so far.
  std::optional<SpeculationUsage> speculation;
  // An embedding request's result, on its last chunk (kStop): the pooled final hidden state,
  // f32 [hidden_size], not normalized (Request::pooling). Empty otherwise.
  std::vector<float> embedding;
};

class OutputStream {
 public:
  explicit OutputStream(int num_prompt_tokens);

  // --- Engine side (never blocks on the reader). ---
  void Push(TokenOutput token);
  void SetCachedTokens(int num_cached_tokens);
  void SetSpeculation(SpeculationUsage speculation);  // the totals so far
  // Ends the stream; later Push/Finish calls are ignored. Returns false if already finished.
  bool Finish(FinishReason reason, Status error = OkStatus(),
              std::optional<TokenId> stop_token = std::nullopt);
  // Ends an embedding request's stream (kStop) with its pooled vector (StreamChunk::embedding).
  // Returns false (and drops it) if already finished.
  bool FinishWithEmbedding(std::vector<float> embedding);

  // --- Reader side (any one thread). ---
  // Waits up to `timeout` for new tokens or the finish; nullopt on timeout, or at once when the
  // final chunk was already returned.
  std::optional<StreamChunk> Pop(std::chrono::milliseconds timeout);
  // Non-blocking Pop.
  std::optional<StreamChunk> TryPop();
  // True once the final chunk (with finish_reason) has been returned.
  bool done() const;
  // Calls `listener` (null: none) after each later Push / Finish, on the engine thread, under
  // this stream's lock: it must be cheap and must not call back into the stream (an event loop
  // sets a flag and wakes itself). Once this returns, the previous listener is never called again.
  // Called at once when output is already waiting, so nothing pushed before it is missed.
  void SetListener(std::function<void()> listener);

 private:
  bool ReadyLocked() const;
  StreamChunk TakeLocked();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> listener_;  // guarded by mu_
  std::vector<TokenOutput> pending_;
  std::optional<FinishReason> finish_reason_;
  std::optional<TokenId> stop_token_;
  Status error_;
  std::vector<float> embedding_;
  int num_prompt_tokens_;
  int num_cached_tokens_ = 0;
  std::optional<SpeculationUsage> speculation_;
  bool done_ = false;  // final chunk handed out
};

}  // namespace loom
