// POST /v1/messages and /v1/messages/count_tokens (query strings such as ?beta=true are
// ignored by routing: httplib matches the path only).
#include <chrono>
#include <memory>

#include "base/logging.h"
#include "server/anthropic_request.h"
#include "server/anthropic_response.h"
#include "server/generation.h"
#include "server/route_util.h"
#include "server/routes.h"
#include "server/sse.h"

namespace loom {
namespace {

using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct AnthropicStream {
  std::unique_ptr<Generation> gen;
  ServerContext* ctx = nullptr;
  ResponseMeta meta;
  bool started = false;
  bool finished = false;
  std::string stop_reason = "end_turn";
  std::optional<std::string> stop_sequence;
  Clock::time_point last_write = Clock::now();
  std::string request_id;

  bool Write(httplib::DataSink& sink, const std::string& data) {
    last_write = Clock::now();
    return sink.write(data.data(), data.size());
  }

  Usage CurrentUsage() const {
    return Usage{gen->num_prompt_tokens(), gen->num_completion_tokens(), gen->num_cached_tokens()};
  }

  bool Pump(httplib::DataSink& sink) {
    if (!started) {
      started = true;
      std::string out = SseEvent("message_start", MessageStartJson(meta, CurrentUsage()));
      out += SseEvent("content_block_start",
                      ordered_json{{"type", "content_block_start"},
                                   {"index", 0},
                                   {"content_block", ordered_json{{"type", "text"}, {"text", ""}}}});
      out += SseEvent("ping", ordered_json{{"type", "ping"}});
      return Write(sink, out);
    }
    if (gen->done()) {
      std::string out = SseEvent("content_block_stop",
                                 ordered_json{{"type", "content_block_stop"}, {"index", 0}});
      out += SseEvent("message_delta", MessageDeltaJson(stop_reason, stop_sequence, CurrentUsage()));
      out += SseEvent("message_stop", ordered_json{{"type", "message_stop"}});
      finished = true;
      if (!Write(sink, out)) return false;
      sink.done();
      return true;
    }
    std::vector<ChoiceDelta> deltas = gen->Poll(std::chrono::milliseconds(50));
    if (deltas.empty()) {
      if (Clock::now() - last_write >= std::chrono::milliseconds(500)) {
        return Write(sink, SseEvent("ping", ordered_json{{"type", "ping"}}));
      }
      return true;
    }
    for (const ChoiceDelta& d : deltas) {
      if (d.finish_reason == "error" || d.finish_reason == "abort") {
        ApiError e = ApiError::FromStatus(d.error);
        if (d.finish_reason == "abort") e.http_status = 503;
        LOG(WARNING) << request_id << " stream ended with error: " << e.message;
        finished = true;
        Write(sink, SseEvent("error", e.ToJson(ApiFlavor::kAnthropic)));
        sink.done();
        return true;
      }
      if (!d.text.empty() && !Write(sink, SseEvent("content_block_delta", TextDeltaJson(d.text)))) {
        return false;
      }
      if (d.finish_reason.has_value()) {
        stop_reason = AnthropicStopReason(*d.finish_reason, d.stop_string);
        stop_sequence = d.stop_string;
      }
    }
    return true;
  }
};

void HandleMessages(ServerContext* ctx, const httplib::Request& http_req, httplib::Response& res) {
  if (!CheckServing(ctx, ApiFlavor::kAnthropic, res)) return;
  std::string param;
  RequestDefaults defaults = ctx->options.defaults;
  defaults.vocab_size = ctx->engine->vocab_size();
  StatusOr<GenerationRequest> parsed = ParseMessagesRequest(http_req.body, defaults, &param);
  if (!parsed.ok()) {
    return SendError(res, ApiFlavor::kAnthropic, ApiError::FromStatus(parsed.status(), param));
  }
  GenerationRequest& req = *parsed;
  StatusOr<std::vector<TokenId>> prompt = BuildPrompt(*ctx, req, &param);
  if (!prompt.ok()) {
    return SendError(res, ApiFlavor::kAnthropic, ApiError::FromStatus(prompt.status(), param));
  }
  StatusOr<std::unique_ptr<Generation>> gen = Generation::Start(ctx, req, *std::move(prompt));
  if (!gen.ok()) return SendError(res, ApiFlavor::kAnthropic, ApiError::FromStatus(gen.status()));
  ResponseMeta meta{NewResponseId("msg_"), ctx->model.name, UnixNow()};
  if (req.stream) {
    auto st = std::make_shared<AnthropicStream>();
    st->gen = *std::move(gen);
    st->ctx = ctx;
    st->meta = meta;
    st->request_id = RequestIdHeader(res);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [st](size_t, httplib::DataSink& sink) { return st->Pump(sink); },
        [st](bool) {
          if (!st->finished) {
            LOG(INFO) << st->request_id << " client went away; aborting";
            st->ctx->metrics.CountClientDisconnect();
          }
          st->gen.reset();
        });
    return;
  }
  std::string text;
  std::string stop_reason = "end_turn";
  std::optional<std::string> stop_sequence;
  const ClientWatch watch(http_req);
  while (!(*gen)->done()) {
    if (AbortIfClientGone(watch, gen->get(), ctx, res)) return;
    for (ChoiceDelta& d : (*gen)->Poll(std::chrono::milliseconds(100))) {
      if (d.finish_reason == "error" || d.finish_reason == "abort") {
        ApiError e = ApiError::FromStatus(d.error);
        if (d.finish_reason == "abort") e.http_status = 503;
        return SendError(res, ApiFlavor::kAnthropic, e);
      }
      text += d.text;
      if (d.finish_reason.has_value()) {
        stop_reason = AnthropicStopReason(*d.finish_reason, d.stop_string);
        stop_sequence = d.stop_string;
      }
    }
  }
  Usage usage{(*gen)->num_prompt_tokens(), (*gen)->num_completion_tokens(),
              (*gen)->num_cached_tokens()};
  SendJson(res, 200, AnthropicMessageJson(meta, text, stop_reason, stop_sequence, usage));
}

void HandleCountTokens(ServerContext* ctx, const httplib::Request& http_req,
                       httplib::Response& res) {
  std::string param;
  RequestDefaults defaults = ctx->options.defaults;
  defaults.vocab_size = ctx->engine->vocab_size();
  StatusOr<GenerationRequest> parsed =
      ParseMessagesRequest(http_req.body, defaults, &param, /*for_count_tokens=*/true);
  if (!parsed.ok()) {
    return SendError(res, ApiFlavor::kAnthropic, ApiError::FromStatus(parsed.status(), param));
  }
  StatusOr<std::vector<TokenId>> prompt = BuildPrompt(*ctx, *parsed, &param);
  if (!prompt.ok()) {
    return SendError(res, ApiFlavor::kAnthropic, ApiError::FromStatus(prompt.status(), param));
  }
  SendJson(res, 200, ordered_json{{"input_tokens", prompt->size()}});
}

}  // namespace

void RegisterAnthropicRoutes(httplib::Server& server, ServerContext* ctx) {
  server.Post("/v1/messages", [ctx](const httplib::Request& req, httplib::Response& res) {
    HandleMessages(ctx, req, res);
  });
  server.Post("/v1/messages/count_tokens",
              [ctx](const httplib::Request& req, httplib::Response& res) {
                HandleCountTokens(ctx, req, res);
              });
}

}  // namespace loom
