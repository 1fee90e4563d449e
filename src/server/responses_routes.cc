// POST /v1/responses (OpenAI's Responses API), GET and DELETE /v1/responses/{id}: parse →
// the same prompt / Generation / parsers as chat completions → the StreamDriver with a
// ResponsesStreamEncoder (stream) or a ChoiceCollector → a response object, kept in the
// context's ResponseStore unless the request said store: false.
#include <memory>

#include "server/choice_collector.h"
#include "server/responses_request.h"
#include "server/responses_response.h"
#include "server/responses_stream_encoder.h"
#include "server/route_util.h"
#include "server/routes.h"
#include "server/stream_driver.h"

namespace loom {
namespace {

using nlohmann::ordered_json;

// Keeps a finished response and the conversation it continues (when the request allows it).
void StoreResponse(ServerContext* ctx, const ResponsesRequest& req, const std::string& id,
                   const ordered_json& response, const std::vector<ResponsesOutputItem>& output) {
  if (!req.store || ctx->responses == nullptr) return;
  StoredResponse stored;
  stored.response = response;
  stored.conversation = req.conversation;
  stored.conversation.push_back(OutputAsMessage(output));
  ctx->responses->Put(id, std::move(stored));
}

void HandleCreate(ServerContext* ctx, const HttpRequest& http_req, HttpResponse& res) {
  if (!CheckServing(ctx, ApiFlavor::kOpenAi, res)) return;
  std::string param;
  const RequestDefaults defaults = RequestDefaultsOf(*ctx);
  StatusOr<ResponsesRequest> parsed =
      ParseResponsesRequest(http_req.body, defaults, ctx->responses.get(), &param);
  if (!parsed.ok()) {
    return SendError(res, ApiFlavor::kOpenAi, ApiError::FromStatus(parsed.status(), param));
  }
  auto req = std::make_shared<ResponsesRequest>(*std::move(parsed));
  req->gen.log_id = RequestIdHeader(res);
  ApiError error;
  std::unique_ptr<ChoiceEventSource> source = StartChoiceSource(
      ctx, &req->gen, ApiFlavor::kOpenAi, PromptFields{"input", "max_output_tokens"}, &error);
  if (source == nullptr) return SendError(res, ApiFlavor::kOpenAi, error);
  const ResponseMeta meta{NewResponseId("resp_"), ctx->model.name, UnixNow()};
  const TextCodec* codec = ctx->codec;
  auto count_tokens = [codec](const std::string& text) {
    if (codec == nullptr) return 0;
    StatusOr<std::vector<TokenId>> ids = codec->Encode(text, /*add_special_tokens=*/false);
    return ids.ok() ? static_cast<int>(ids->size()) : 0;
  };

  if (req->gen.stream) {
    auto on_done = [ctx, req, id = meta.id](const ordered_json& response,
                                            const std::vector<ResponsesOutputItem>& output) {
      StoreResponse(ctx, *req, id, response, output);
    };
    return ServeStream(ctx, std::move(source),
                       std::make_unique<ResponsesStreamEncoder>(
                           meta, req->echo, req->tool_namespaces, count_tokens, on_done),
                       res);
  }
  DeferCollected(
      ctx, std::move(source), ChoiceCollector(1), ApiFlavor::kOpenAi,
      [ctx, req, meta, count_tokens](const ChoiceEventSource& src, const ChoiceCollector& collector,
                                     HttpResponse& out) {
        const CollectedChoice& choice = collector.choices()[0];
        const std::vector<ResponsesOutputItem> output = OutputItemsOf(choice, req->tool_namespaces);
        const ordered_json response =
            ResponseObjectJson(meta, req->echo, ResponsesStatus(choice.finish_reason), output,
                               ResponsesUsageJson(src.usage(), count_tokens(choice.reasoning)));
        StoreResponse(ctx, *req, meta.id, response, output);
        SendJson(out, 200, response);
      },
      res);
}

// The stored response named by the path, or a 404 naming it.
std::shared_ptr<const StoredResponse> Lookup(ServerContext* ctx, const std::string& id,
                                             HttpResponse& res) {
  std::shared_ptr<const StoredResponse> r =
      ctx->responses != nullptr ? ctx->responses->Get(id) : nullptr;
  if (r == nullptr) {
    SendError(res, ApiFlavor::kOpenAi,
              ApiError::FromStatus(NotFoundError("no stored response has the id \"" + id +
                                                 "\" (store: false, evicted, or unknown)"),
                                   "response_id"));
  }
  return r;
}

}  // namespace

void RegisterResponsesRoutes(HttpRouter& server, ServerContext* ctx) {
  server.Post("/v1/responses",
              [ctx](const HttpRequest& req, HttpResponse& res) { HandleCreate(ctx, req, res); });
  server.Get(R"(/v1/responses/([^/]+))", [ctx](const HttpRequest& req, HttpResponse& res) {
    if (auto r = Lookup(ctx, req.matches[1], res)) SendJson(res, 200, r->response);
  });
  server.Delete(R"(/v1/responses/([^/]+))", [ctx](const HttpRequest& req, HttpResponse& res) {
    const std::string id = req.matches[1];
    if (Lookup(ctx, id, res) == nullptr) return;
    ctx->responses->Erase(id);
    SendJson(res, 200, ordered_json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
  });
}

}  // namespace loom
