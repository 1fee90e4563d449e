#include "server/generation.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/logging.h"

namespace loom {

namespace {

// `text` as one JSON string (newlines escaped, ill-formed UTF-8 replaced): one log line.
std::string Quoted(std::string_view text) {
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const char* LogName(ChoiceFinishReason reason) {
  switch (reason) {
    case ChoiceFinishReason::kStop:
      return "stop";
    case ChoiceFinishReason::kStopString:
      return "stop_string";
    case ChoiceFinishReason::kLength:
      return "length";
    case ChoiceFinishReason::kToolCalls:
      return "tool_calls";
    case ChoiceFinishReason::kAbort:
      return "abort";
    case ChoiceFinishReason::kError:
      return "error";
  }
  return "?";
}

}  // namespace

Generation::Generation(ServerContext* ctx, const GenerationRequest& request,
                       std::vector<TokenId> prompt)
    : ctx_(ctx),
      log_id_(request.log_id),
      want_logprobs_(request.logprobs),
      prompt_(std::move(prompt)),
      start_(std::chrono::steady_clock::now()) {}

StatusOr<std::unique_ptr<Generation>> Generation::Start(ServerContext* ctx,
                                                        const GenerationRequest& request,
                                                        std::vector<TokenId> prompt) {
  CHECK(ctx->engine != nullptr);
  if (prompt.empty()) return InvalidArgumentError("the prompt is empty after tokenization");
  const int context = ctx->engine->max_model_len();
  const int num_prompt = static_cast<int>(prompt.size());
  if (num_prompt >= context) {
    return OutOfRangeError("the prompt has " + std::to_string(num_prompt) +
                           " tokens but the context length is " + std::to_string(context) +
                           "; shorten the prompt");
  }
  SamplingParams params = request.params;
  const int cap = ctx->options.defaults.max_output_tokens;
  if (!request.max_tokens_set || params.max_tokens <= 0) {
    params.max_tokens = context - num_prompt;
    if (cap > 0) params.max_tokens = std::min(params.max_tokens, cap);
  } else if (cap > 0 && params.max_tokens > cap) {
    params.max_tokens = cap;
  }
  if (num_prompt + params.max_tokens > context && request.max_tokens_is_cap) {
    params.max_tokens = context - num_prompt;
  } else if (num_prompt + params.max_tokens > context) {
    return OutOfRangeError("max_tokens (" + std::to_string(params.max_tokens) + ") + the prompt (" +
                           std::to_string(num_prompt) + " tokens) exceed the context length " +
                           std::to_string(context) + "; lower max_tokens or shorten the prompt");
  }
  if (params.min_tokens > params.max_tokens) params.min_tokens = params.max_tokens;
  auto gen = std::unique_ptr<Generation>(new Generation(ctx, request, std::move(prompt)));
  for (int i = 0; i < request.n; ++i) {
    Request r;
    r.prompt = gen->prompt_;
    r.params = params;
    // n > 1 with a seed: each choice gets its own stream of randomness, reproducibly.
    if (params.seed.has_value() && i > 0) r.params.seed = *params.seed + static_cast<uint64_t>(i);
    if (request.compiled_grammar != nullptr) {
      CHECK(ctx->grammar_vocab != nullptr);
      r.grammar =
          std::make_shared<GrammarState>(request.compiled_grammar, ctx->grammar_vocab.get(),
                                         GrammarState::kDefaultMaskCacheEntries,
                                         GrammarState::kDefaultMaxDfaStates, ctx->mask_cache.get());
    }
    r.reasoning_budget = request.engine_reasoning_budget;
    StatusOr<RequestHandle> handle = ctx->engine->Submit(std::move(r));
    if (!handle.ok()) return handle.status();  // ~Generation aborts the ones already queued
    auto choice = std::make_unique<Choice>(request.stop);
    choice->handle = *std::move(handle);
    if (ctx->codec != nullptr) {
      choice->detok = std::make_unique<StreamDetokenizer>(ctx->codec, gen->prompt_,
                                                          request.skip_special_tokens);
    }
    gen->choices_.push_back(std::move(choice));
  }
  if (ctx->options.log_prompts) {
    LOG(INFO) << request.log_id << " prompt (" << gen->prompt_.size() << " tokens): "
              << (ctx->codec != nullptr ? Quoted(ctx->codec->Decode(gen->prompt_, false))
                                        : std::string("(token ids)"));
  }
  ctx->metrics.StreamStarted();
  return gen;
}

Generation::~Generation() {
  for (auto& c : choices_) c->handle.stream->SetListener(nullptr);
  Abort();
  if (choices_.empty()) return;
  if (!metrics_done_) {
    ctx_->metrics.AddTokens(num_prompt_tokens() * static_cast<int64_t>(choices_.size()),
                            completion_tokens_);
  }
  ctx_->metrics.StreamFinished();
}

void Generation::Abort() {
  for (auto& c : choices_) {
    if (!c->finished) {
      ctx_->engine->Abort(c->handle.id);
      c->finished = true;
    }
  }
}

void Generation::SetWakeup(std::function<void()> wake) {
  for (auto& c : choices_) c->handle.stream->SetListener(wake);
}

Usage Generation::usage() const {
  Usage u{num_prompt_tokens(), completion_tokens_, cached_tokens_, std::nullopt};
  for (const auto& c : choices_) {
    if (!c->speculation.has_value()) continue;
    if (!u.speculation.has_value()) u.speculation.emplace();
    u.speculation->drafted += c->speculation->drafted;
    u.speculation->accepted += c->speculation->accepted;
  }
  return u;
}

bool Generation::done() const {
  for (const auto& c : choices_) {
    if (!c->finished) return false;
  }
  return true;
}

void Generation::Consume(int choice_idx, StreamChunk chunk, std::vector<ChoiceEvent>* out) {
  Choice& c = *choices_[choice_idx];
  ChoiceEvent text = ChoiceEvent::Text(choice_idx, "");
  std::optional<ChoiceEvent> finish;
  cached_tokens_ = std::max(cached_tokens_, chunk.num_cached_tokens);
  if (chunk.speculation.has_value()) c.speculation = chunk.speculation;
  auto now = std::chrono::steady_clock::now();
  if (!chunk.tokens.empty()) {
    if (!first_token_seen_) {
      first_token_seen_ = true;
      ctx_->metrics.ObserveTtft(std::chrono::duration<double>(now - start_).count());
    } else {
      double gap = std::chrono::duration<double>(now - last_token_).count();
      ctx_->metrics.ObserveInterToken(gap / static_cast<double>(chunk.tokens.size()));
    }
    last_token_ = now;
  }
  for (const TokenOutput& t : chunk.tokens) {
    if (c.stop.stopped()) break;
    ++completion_tokens_;
    std::string piece;
    if (c.detok) piece = c.detok->Add(t.token);
    StopMatcher::Result r = c.stop.Add(piece);
    text.text += r.text;
    if (want_logprobs_) {
      LogprobEntry e;
      e.token = t.token;
      if (ctx_->codec != nullptr) e.text = ctx_->codec->TokenText(t.token);
      e.logprob = t.logprob;
      for (const TokenLogprob& alt : t.top_logprobs) {
        e.top.emplace_back(ctx_->codec != nullptr ? ctx_->codec->TokenText(alt.token) : "",
                           alt.logprob);
      }
      text.logprobs.push_back(std::move(e));
    }
    if (r.stop.has_value()) {
      finish = ChoiceEvent::Finish(choice_idx, ChoiceFinishReason::kStopString);
      finish->stop_string = std::move(r.stop);
      ctx_->engine->Abort(c.handle.id);
      c.finished = true;
      break;
    }
  }
  if (!c.finished && chunk.finish_reason.has_value()) {
    // The detokenizer's held-back bytes can still complete a stop string.
    std::optional<std::string> stop_string;
    if (c.detok) {
      StopMatcher::Result r = c.stop.Add(c.detok->Flush());
      text.text += r.text;
      stop_string = std::move(r.stop);
    }
    if (!c.stop.stopped()) text.text += c.stop.Flush();
    c.finished = true;
    switch (*chunk.finish_reason) {
      case FinishReason::kStop:
        finish = ChoiceEvent::Finish(choice_idx, ChoiceFinishReason::kStop);
        finish->stop_token = chunk.stop_token;
        break;
      case FinishReason::kLength:
        finish = ChoiceEvent::Finish(choice_idx, ChoiceFinishReason::kLength);
        break;
      case FinishReason::kAbort:
        finish = ChoiceEvent::Finish(choice_idx, ChoiceFinishReason::kAbort);
        finish->error = UnavailableError("the request was aborted (server shutting down)");
        break;
      case FinishReason::kError:
        finish = ChoiceEvent::Finish(choice_idx, ChoiceFinishReason::kError);
        finish->error = chunk.error.ok() ? InternalError("generation failed") : chunk.error;
        break;
    }
    if (stop_string.has_value()) {  // the text is complete up to the stop string
      finish = ChoiceEvent::Finish(choice_idx, ChoiceFinishReason::kStopString);
      finish->stop_string = std::move(stop_string);
    }
  }
  if (ctx_->options.log_prompts) c.transcript += text.text;
  if (!text.text.empty() || !text.logprobs.empty()) out->push_back(std::move(text));
  if (!finish.has_value()) return;
  if (ctx_->options.log_prompts) {
    LOG(INFO) << log_id_ << " choice " << choice_idx << " " << LogName(finish->finish_reason)
              << ": " << Quoted(c.transcript);
  }
  out->push_back(*std::move(finish));
  if (done() && !metrics_done_) {
    metrics_done_ = true;
    ctx_->metrics.AddTokens(num_prompt_tokens() * static_cast<int64_t>(choices_.size()),
                            completion_tokens_);
    ctx_->metrics.ObserveEndToEnd(std::chrono::duration<double>(now - start_).count());
  }
}

std::vector<ChoiceEvent> Generation::Poll(std::chrono::milliseconds timeout) {
  std::vector<ChoiceEvent> out;
  bool progressed = false;
  for (int i = 0; i < static_cast<int>(choices_.size()); ++i) {
    if (choices_[i]->finished) continue;
    if (auto chunk = choices_[i]->handle.stream->TryPop()) {
      Consume(i, *std::move(chunk), &out);
      progressed = true;
    }
  }
  if (progressed || done()) return out;
  // Nothing ready: block on the first unfinished choice (the others are picked up next call).
  for (int i = 0; i < static_cast<int>(choices_.size()); ++i) {
    if (choices_[i]->finished) continue;
    if (auto chunk = choices_[i]->handle.stream->Pop(timeout)) Consume(i, *std::move(chunk), &out);
    break;
  }
  return out;
}

}  // namespace loom
