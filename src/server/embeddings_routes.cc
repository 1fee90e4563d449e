// POST /v1/embeddings: parse → token ids per input (the tokenizer with its special tokens, as HF's
// tokenizer(text) adds them: Qwen3-Embedding's post-processor appends <|endoftext|>; token-id
// inputs as sent) → one engine embedding request per input, all submitted at once so the engine
// batches them → the pooled vectors, truncated and normalized (embeddings.h) → JSON.
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "server/embeddings.h"
#include "server/route_util.h"
#include "server/routes.h"

namespace loom {
namespace {

void AbortAll(ServerContext* ctx, const std::vector<RequestHandle>& handles) {
  for (const RequestHandle& h : handles) ctx->engine->Abort(h.id);
}

// The answer once every input's stream ended with its vector (one final chunk each, or an error),
// completed by the server's event loop as the streams wake it: no thread waits for the engine.
class EmbeddingsResponse : public HttpDeferredResponse {
 public:
  EmbeddingsResponse(ServerContext* ctx, std::vector<RequestHandle> handles, int dimensions,
                     bool base64, int64_t prompt_tokens, std::string request_id)
      : ctx_(ctx),
        handles_(std::move(handles)),
        vectors_(handles_.size()),
        dimensions_(dimensions),
        base64_(base64),
        prompt_tokens_(prompt_tokens),
        request_id_(std::move(request_id)) {}
  ~EmbeddingsResponse() override { Release(); }

  void SetWakeup(std::function<void()> wake) override {
    for (RequestHandle& h : handles_) h.stream->SetListener(wake);
  }

  bool Poll(HttpResponse& res) override {
    while (next_ < handles_.size()) {  // in order: each stream ends with one chunk
      std::optional<StreamChunk> chunk = handles_[next_].stream->TryPop();
      if (!chunk.has_value()) return false;
      if (!chunk->finish_reason.has_value()) continue;
      if (*chunk->finish_reason != FinishReason::kStop || chunk->embedding.empty()) {
        const Status error = chunk->error.ok()
                                 ? InternalError(std::string("the embedding ended with ") +
                                                 FinishReasonName(*chunk->finish_reason))
                                 : chunk->error;
        Stop(/*abort=*/true);
        SendError(res, ApiFlavor::kOpenAi, ApiError::FromStatus(error, ""));
        return true;
      }
      vectors_[next_] = FinishEmbedding(chunk->embedding, dimensions_);
      ++next_;
    }
    Stop(/*abort=*/false);
    SendJson(res, 200, EmbeddingsJson(ctx_->model.name, vectors_, base64_, prompt_tokens_));
    return true;
  }

  void Release() override {
    if (handles_.empty()) return;
    LOG(INFO) << request_id_ << " client went away; aborting";
    ctx_->metrics.CountClientDisconnect();
    Stop(/*abort=*/true);
  }

 private:
  // Done with the streams: no more wakes; `abort` ends the unfinished requests.
  void Stop(bool abort) {
    for (RequestHandle& h : handles_) h.stream->SetListener(nullptr);
    if (abort) AbortAll(ctx_, handles_);
    handles_.clear();
  }

  ServerContext* ctx_;
  std::vector<RequestHandle> handles_;  // empty once answered or released
  std::vector<std::vector<float>> vectors_;
  int dimensions_;
  bool base64_;
  int64_t prompt_tokens_;
  std::string request_id_;
  size_t next_ = 0;  // the first input whose vector has not arrived
};

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

  res.deferred =
      std::make_unique<EmbeddingsResponse>(ctx, std::move(handles), parsed->dimensions,
                                           parsed->base64, prompt_tokens, RequestIdHeader(res));
}

}  // namespace

void RegisterEmbeddingsRoutes(HttpRouter& server, ServerContext* ctx) {
  server.Post("/v1/embeddings", [ctx](const HttpRequest& req, HttpResponse& res) {
    HandleEmbeddings(ctx, req, res);
  });
}

}  // namespace loom
