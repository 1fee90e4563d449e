// POST /v1/chat/completions and POST /v1/completions: parse → prompt → Generation → the
// StreamDriver with an OpenAI encoder (stream) or a ChoiceCollector → JSON.
#include <memory>

#include "server/choice_collector.h"
#include "server/generation.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/openai_stream_encoder.h"
#include "server/output_parsing.h"
#include "server/route_util.h"
#include "server/routes.h"
#include "server/stream_driver.h"

namespace loom {
namespace {

void HandleGeneration(ServerContext* ctx, bool chat, const HttpRequest& http_req,
                      HttpResponse& res) {
  if (!CheckServing(ctx, ApiFlavor::kOpenAi, res)) return;
  std::string param;
  const RequestDefaults defaults = RequestDefaultsOf(*ctx);
  StatusOr<GenerationRequest> parsed =
      chat ? ParseChatCompletionsRequest(http_req.body, defaults, &param)
           : ParseCompletionsRequest(http_req.body, defaults, &param);
  if (!parsed.ok())
    return SendError(res, ApiFlavor::kOpenAi, ApiError::FromStatus(parsed.status(), param));
  GenerationRequest& req = *parsed;
  req.log_id = RequestIdHeader(res);
  if (req.echo && req.logprobs) {
    return SendError(
        res, ApiFlavor::kOpenAi,
        ApiError::FromStatus(InvalidArgumentError("echo together with logprobs (prompt "
                                                  "logprobs) is not supported yet"),
                             "echo"));
  }
  if (Status s = PrepareOutputParsing(ctx->parsers, &req, &param); !s.ok()) {
    return SendError(res, ApiFlavor::kOpenAi, ApiError::FromStatus(s, param));
  }
  std::string rendered;
  StatusOr<std::vector<TokenId>> prompt = BuildPrompt(*ctx, req, &param, &rendered);
  if (!prompt.ok())
    return SendError(res, ApiFlavor::kOpenAi, ApiError::FromStatus(prompt.status(), param));
  if (Status s = CompileRequestGrammar(ctx->parsers, ctx->grammar_cache.get(),
                                       ctx->grammar_vocab.get(), rendered, &req, &param);
      !s.ok()) {
    return SendError(res, ApiFlavor::kOpenAi, ApiError::FromStatus(s, param));
  }
  ResolveReasoningBudget(ctx->parsers, ctx->codec, rendered, ctx->options.defaults.reasoning_budget,
                         &req);
  const bool prompt_too_long = static_cast<int>(prompt->size()) >= ctx->engine->max_model_len();
  StatusOr<std::unique_ptr<Generation>> gen = Generation::Start(ctx, req, *std::move(prompt));
  if (!gen.ok()) {
    std::string field;
    if (gen.status().code() == StatusCode::kOutOfRange) {
      field =
          prompt_too_long || !req.max_tokens_set ? (chat ? "messages" : "prompt") : "max_tokens";
    }
    return SendError(res, ApiFlavor::kOpenAi, ApiError::FromStatus(gen.status(), field));
  }
  ResponseMeta meta{NewResponseId(chat ? "chatcmpl-" : "cmpl-"), ctx->model.name, UnixNow()};
  std::string echo_text;
  if (req.echo) {
    echo_text = req.prompt_is_ids && ctx->codec != nullptr
                    ? ctx->codec->Decode((*gen)->prompt(), true)
                    : req.prompt_text;
  }
  std::unique_ptr<ChoiceEventSource> source =
      WrapOutputParsers(ctx->parsers, req, rendered, *std::move(gen), ApiFlavor::kOpenAi);

  if (req.stream) {
    std::unique_ptr<StreamEncoder> encoder;
    if (chat) {
      encoder = std::make_unique<OpenAiChatEncoder>(meta, req.n, req.include_usage);
    } else {
      encoder =
          std::make_unique<OpenAiCompletionEncoder>(meta, req.n, req.include_usage, echo_text);
    }
    return ServeStream(ctx, std::move(source), std::move(encoder), res);
  }

  DeferCollected(
      ctx, std::move(source), ChoiceCollector(req.n, echo_text), ApiFlavor::kOpenAi,
      [chat, meta, logprobs = req.logprobs](const ChoiceEventSource& src,
                                            const ChoiceCollector& collector, HttpResponse& out) {
        const Usage usage = src.usage();
        SendJson(out, 200,
                 chat ? ChatCompletionJson(meta, collector.choices(), logprobs, usage)
                      : CompletionJson(meta, collector.choices(), logprobs, usage));
      },
      res);
}

}  // namespace

void RegisterOpenAiRoutes(HttpRouter& server, ServerContext* ctx) {
  server.Post("/v1/chat/completions", [ctx](const HttpRequest& req, HttpResponse& res) {
    HandleGeneration(ctx, /*chat=*/true, req, res);
  });
  server.Post("/v1/completions", [ctx](const HttpRequest& req, HttpResponse& res) {
    HandleGeneration(ctx, /*chat=*/false, req, res);
  });
}

}  // namespace loom
