// POST /v1/embeddings: parse → token ids per input (the tokenizer with its special tokens, as HF's
// tokenizer(text) adds them: Qwen3-Embedding's post-processor appends <|endoftext|>; token-id
// inputs as sent) → one engine embedding request per input, all submitted at once so the engine
// batches them → the pooled vectors, truncated and normalized (embeddings.h) → JSON.
#include <chrono>

#include "base/logging.h"
#include "server/embeddings.h"
#include "server/route_util.h"
#include "server/routes.h"

namespace loom {
namespace {

void AbortAll(ServerContext* ctx, const std::vector<RequestHandle>& handles) {
  for (const RequestHandle& h : handles) ctx->engine->Abort(h.id);
}

void HandleEmbeddings(ServerContext* ctx, const HttpRequest& http_req, HttpResponse& res) {
  if (!CheckServing(ctx, ApiFlavor::kOpenAi, res)) return;
  auto fail = [&](const Status& s, const std::string& param) {
    SendError(res, ApiFlavor::kOpenAi, ApiError::FromStatus(s, param));
  };
  const int hidden_size = ctx->engine->hidden_size();
  std::string param;
  StatusOr<EmbeddingsRequest> parsed = ParseEmbeddingsRequest(
      http_req.body, RequestDefaultsOf(*ctx).vocab_size, hidden_size, &param);
  if (!parsed.ok()) return fail(parsed.status(), param);
  if (hidden_size <= 0) {
    return fail(FailedPreconditionError("this server's model runner returns no hidden states"), "");
  }

  // Token ids of every input, checked before anything is submitted.
  std::vector<std::vector<TokenId>> prompts;
  int64_t prompt_tokens = 0;
  const int max_len = ctx->engine->max_model_len();
  for (EmbeddingInput& in : parsed->inputs) {
    std::vector<TokenId> ids;
    if (in.is_ids) {
      ids = std::move(in.ids);
    } else {
      if (ctx->codec == nullptr) {
        return fail(InvalidArgumentError("the model '" + ctx->model.name +
                                         "' has no tokenizer; send the input as token ids"),
                    in.field);
      }
      StatusOr<std::vector<TokenId>> encoded =
          ctx->codec->Encode(in.text, /*add_special_tokens=*/true);
      if (!encoded.ok()) return fail(encoded.status(), in.field);
      ids = *std::move(encoded);
      if (ids.empty())
        return fail(InvalidArgumentError(in.field + " encodes to no tokens"), in.field);
    }
    if (static_cast<int>(ids.size()) > max_len) {
      return fail(InvalidArgumentError(in.field + " has " + std::to_string(ids.size()) +
                                       " tokens, more than the model's context length " +
                                       std::to_string(max_len)),
                  in.field);
    }
    prompt_tokens += static_cast<int64_t>(ids.size());
    prompts.push_back(std::move(ids));
  }

  std::vector<RequestHandle> handles;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r;
    r.prompt = std::move(prompts[i]);
    r.pooling = ctx->model.pooling;
    StatusOr<RequestHandle> h = ctx->engine->Submit(std::move(r));
    if (!h.ok()) {
      AbortAll(ctx, handles);
      return fail(h.status(), parsed->inputs[i].field);
    }
    handles.push_back(*std::move(h));
  }

  // Each stream ends with one chunk holding the vector (or the error).
  constexpr auto kPollInterval = std::chrono::milliseconds(100);
  std::vector<std::vector<float>> vectors(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) {
    while (true) {
      if (http_req.ClientGone()) {
        LOG(INFO) << RequestIdHeader(res) << " client went away; aborting";
        ctx->metrics.CountClientDisconnect();
        return AbortAll(ctx, handles);
      }
      std::optional<StreamChunk> chunk = handles[i].stream->Pop(kPollInterval);
      if (!chunk.has_value() || !chunk->finish_reason.has_value()) continue;
      if (*chunk->finish_reason != FinishReason::kStop || chunk->embedding.empty()) {
        AbortAll(ctx, handles);
        const Status error = chunk->error.ok()
                                 ? InternalError(std::string("the embedding ended with ") +
                                                 FinishReasonName(*chunk->finish_reason))
                                 : chunk->error;
        return fail(error, "");
      }
      vectors[i] = FinishEmbedding(chunk->embedding, parsed->dimensions);
      break;
    }
  }
  SendJson(res, 200, EmbeddingsJson(ctx->model.name, vectors, parsed->base64, prompt_tokens));
}

}  // namespace

void RegisterEmbeddingsRoutes(HttpRouter& server, ServerContext* ctx) {
  server.Post("/v1/embeddings", [ctx](const HttpRequest& req, HttpResponse& res) {
    HandleEmbeddings(ctx, req, res);
  });
}

}  // namespace loom
