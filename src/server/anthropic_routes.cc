// POST /v1/messages and /v1/messages/count_tokens (query strings such as ?beta=true are
// ignored by routing: the router matches the path only).
#include <memory>

#include "server/anthropic_request.h"
#include "server/anthropic_response.h"
#include "server/anthropic_stream_encoder.h"
#include "server/choice_collector.h"
#include "server/route_util.h"
#include "server/routes.h"
#include "server/stream_driver.h"

namespace loom {
namespace {

using nlohmann::ordered_json;

void HandleMessages(ServerContext* ctx, const HttpRequest& http_req, HttpResponse& res) {
  if (!CheckServing(ctx, ApiFlavor::kAnthropic, res)) return;
  std::string param;
  RequestDefaults defaults = ctx->options.defaults;
  defaults.vocab_size = ctx->engine->vocab_size();
  StatusOr<GenerationRequest> parsed = ParseMessagesRequest(http_req.body, defaults, &param);
  if (!parsed.ok()) {
    return SendError(res, ApiFlavor::kAnthropic, ApiError::FromStatus(parsed.status(), param));
  }
  GenerationRequest& req = *parsed;
  req.log_id = RequestIdHeader(res);
  ApiError error;
  std::unique_ptr<ChoiceEventSource> source =
      StartChoiceSource(ctx, &req, ApiFlavor::kAnthropic, PromptFields{}, &error);
  if (source == nullptr) return SendError(res, ApiFlavor::kAnthropic, error);
  ResponseMeta meta{NewResponseId("msg_"), ctx->model.name, UnixNow()};
  if (req.stream) {
    return ServeStream(ctx, std::move(source), std::make_unique<AnthropicMessagesEncoder>(meta),
                       res);
  }
  DeferCollected(
      ctx, std::move(source), ChoiceCollector(1), ApiFlavor::kAnthropic,
      [meta](const ChoiceEventSource& src, const ChoiceCollector& collector, HttpResponse& out) {
        SendJson(out, 200, AnthropicMessageJson(meta, collector.choices()[0], src.usage()));
      },
      res);
}

void HandleCountTokens(ServerContext* ctx, const HttpRequest& http_req, HttpResponse& res) {
  std::string param;
  RequestDefaults defaults = ctx->options.defaults;
  defaults.vocab_size = ctx->engine->vocab_size();
  StatusOr<GenerationRequest> parsed =
      ParseMessagesRequest(http_req.body, defaults, &param, /*for_count_tokens=*/true);
  if (!parsed.ok()) {
    return SendError(res, ApiFlavor::kAnthropic, ApiError::FromStatus(parsed.status(), param));
  }
  StatusOr<std::vector<TokenId>> prompt =
      BuildPrompt(*ctx, *parsed, &param, /*rendered=*/nullptr, /*check_context=*/false);
  if (!prompt.ok()) {
    return SendError(res, ApiFlavor::kAnthropic, ApiError::FromStatus(prompt.status(), param));
  }
  SendJson(res, 200, ordered_json{{"input_tokens", prompt->size()}});
}

}  // namespace

void RegisterAnthropicRoutes(HttpRouter& server, ServerContext* ctx) {
  server.Post("/v1/messages",
              [ctx](const HttpRequest& req, HttpResponse& res) { HandleMessages(ctx, req, res); });
  server.Post("/v1/messages/count_tokens", [ctx](const HttpRequest& req, HttpResponse& res) {
    HandleCountTokens(ctx, req, res);
  });
}

}  // namespace loom
