#include "engine/output_stream.h"

#include <utility>

namespace loom {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

OutputStream::OutputStream(int num_prompt_tokens) : num_prompt_tokens_(num_prompt_tokens) {}

void OutputStream::Push(TokenOutput token) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_reason_.has_value()) return;
    pending_.push_back(std::move(token));
    if (listener_) listener_();
  }
  cv_.notify_all();
}

void OutputStream::SetCachedTokens(int num_cached_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  num_cached_tokens_ = num_cached_tokens;
}

void OutputStream::SetSpeculation(SpeculationUsage speculation) {
  std::lock_guard<std::mutex> lock(mu_);
  speculation_ = speculation;
}

bool OutputStream::Finish(FinishReason reason, Status error, std::optional<TokenId> stop_token) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_reason_.has_value()) return false;
    finish_reason_ = reason;
    error_ = std::move(error);
    stop_token_ = stop_token;
    if (listener_) listener_();
  }
  cv_.notify_all();
  return true;
}

bool OutputStream::FinishWithEmbedding(std::vector<float> embedding) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_reason_.has_value()) return false;
    finish_reason_ = FinishReason::kStop;
    embedding_ = std::move(embedding);
  }
  cv_.notify_all();
  return true;
}

bool OutputStream::ReadyLocked() const {
  return !done_ && (!pending_.empty() || finish_reason_.has_value());
}

StreamChunk OutputStream::TakeLocked() {
  StreamChunk chunk;
  chunk.tokens = std::move(pending_);
  pending_.clear();
  chunk.num_prompt_tokens = num_prompt_tokens_;
  chunk.num_cached_tokens = num_cached_tokens_;
  chunk.speculation = speculation_;
  if (finish_reason_.has_value()) {
    chunk.finish_reason = finish_reason_;
    chunk.stop_token = stop_token_;
    chunk.error = error_;
    chunk.embedding = std::move(embedding_);
    done_ = true;
  }
  return chunk;
}

std::optional<StreamChunk> OutputStream::Pop(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (done_) return std::nullopt;
  if (!cv_.wait_for(lock, timeout, [this] { return ReadyLocked(); })) return std::nullopt;
  return TakeLocked();
}

std::optional<StreamChunk> OutputStream::TryPop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ReadyLocked()) return std::nullopt;
  return TakeLocked();
}

bool OutputStream::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void OutputStream::SetListener(std::function<void()> listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listener_ = std::move(listener);
  if (listener_ && ReadyLocked()) listener_();
}

}  // namespace loom
