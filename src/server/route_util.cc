#include "server/route_util.h"

#include <chrono>

#include "base/logging.h"
#include "server/generation.h"
#include "server/output_parsing.h"

namespace loom {

using nlohmann::ordered_json;

std::string RequestIdHeader(const HttpResponse& res) {
  return res.get_header_value("x-request-id");
}

void SendJson(HttpResponse& res, int status, const ordered_json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void SendError(HttpResponse& res, ApiFlavor flavor, const ApiError& error) {
  SendJson(res, error.http_status, error.ToJson(flavor));
}

RequestDefaults RequestDefaultsOf(const ServerContext& ctx) {
  RequestDefaults defaults = ctx.options.defaults;
  if (ctx.codec != nullptr) defaults.vocab_size = ctx.codec->vocab_size();
  if (defaults.vocab_size == 0) defaults.vocab_size = ctx.engine->vocab_size();
  return defaults;
}

bool CheckServing(ServerContext* ctx, ApiFlavor flavor, HttpResponse& res) {
  if (ctx->draining.load()) {
    ApiError e;
    e.http_status = 503;
    e.message = "the server is shutting down";
    SendError(res, flavor, e);
    return false;
  }
  return true;
}

Status CheckPromptLength(const TextCodec& codec, std::string_view text, bool add_special_tokens,
                         int max_model_len) {
  if (text.size() < static_cast<size_t>(max_model_len)) return OkStatus();
  const size_t at_least = codec.MinTokenCount(text, add_special_tokens);
  if (at_least < static_cast<size_t>(max_model_len)) return OkStatus();
  return OutOfRangeError(
      "the prompt has at least " + std::to_string(at_least) + " tokens (" +
      std::to_string(text.size()) + " bytes, and no token of this model is longer than " +
      std::to_string(codec.max_bytes_per_token()) + " bytes) but the context length is " +
      std::to_string(max_model_len) + "; shorten the prompt");
}

StatusOr<std::vector<TokenId>> BuildPrompt(const ServerContext& ctx, const GenerationRequest& req,
                                           std::string* param, std::string* rendered,
                                           bool check_context) {
  const int max_model_len = check_context ? ctx.engine->max_model_len() : 0;
  if (req.kind == ApiKind::kCompletions && req.prompt_is_ids) return req.prompt_ids;
  if (ctx.codec == nullptr) {
    *param = req.kind == ApiKind::kCompletions ? "prompt" : "messages";
    return InvalidArgumentError("the model '" + ctx.model.name +
                                "' has no tokenizer; send the prompt to /v1/completions as "
                                "token ids");
  }
  if (req.kind == ApiKind::kCompletions) {
    *param = "prompt";
    if (check_context) {
      RETURN_IF_ERROR(CheckPromptLength(*ctx.codec, req.prompt_text, /*add_special_tokens=*/true,
                                        max_model_len));
    }
    return ctx.codec->Encode(req.prompt_text, /*add_special_tokens=*/true);
  }
  *param = "messages";
  if (!ctx.codec->has_chat_template()) {
    // Like vLLM (transformers >= 4.44 has no default template): refuse rather than guess.
    return InvalidArgumentError(
        "the model '" + ctx.model.name +
        "' has no chat template, so chat requests cannot be formatted; start loom serve with "
        "--chat-template FILE, or use /v1/completions with a raw prompt");
  }
  ordered_json context = ordered_json::object();
  context["messages"] = req.messages;
  // tool_choice none: the model is not told about the tools (as vLLM does by default).
  if (!req.tools.empty() && req.tool_choice != ToolChoiceMode::kNone) context["tools"] = req.tools;
  context["add_generation_prompt"] = req.add_generation_prompt;
  for (auto it = req.template_kwargs.begin(); it != req.template_kwargs.end(); ++it) {
    context[it.key()] = it.value();
  }
  StatusOr<std::string> text = ctx.codec->RenderChat(context);
  if (!text.ok()) {
    return InvalidArgumentError("the chat template failed: " +
                                std::string(text.status().message()));
  }
  if (check_context) {
    RETURN_IF_ERROR(
        CheckPromptLength(*ctx.codec, *text, /*add_special_tokens=*/false, max_model_len));
  }
  StatusOr<std::vector<TokenId>> ids = ctx.codec->Encode(*text, /*add_special_tokens=*/false);
  if (rendered != nullptr) *rendered = *std::move(text);
  return ids;
}

std::unique_ptr<ChoiceEventSource> StartChoiceSource(ServerContext* ctx, GenerationRequest* req,
                                                     ApiFlavor flavor, const PromptFields& fields,
                                                     ApiError* error) {
  std::string param;
  if (Status s = PrepareOutputParsing(ctx->parsers, req, &param); !s.ok()) {
    *error = ApiError::FromStatus(s, param);
    return nullptr;
  }
  std::string rendered;
  StatusOr<std::vector<TokenId>> prompt = BuildPrompt(*ctx, *req, &param, &rendered);
  if (!prompt.ok()) {
    *error = ApiError::FromStatus(prompt.status(), param == "messages" ? fields.prompt : param);
    return nullptr;
  }
  if (Status s = CompileRequestGrammar(ctx->parsers, ctx->grammar_cache.get(),
                                       ctx->grammar_vocab.get(), rendered, req, &param);
      !s.ok()) {
    *error = ApiError::FromStatus(s, param);
    return nullptr;
  }
  ResolveReasoningBudget(ctx->parsers, ctx->codec, rendered, ctx->options.defaults.reasoning_budget,
                         req);
  const bool prompt_too_long = static_cast<int>(prompt->size()) >= ctx->engine->max_model_len();
  StatusOr<std::unique_ptr<Generation>> gen = Generation::Start(ctx, *req, *std::move(prompt));
  if (!gen.ok()) {
    std::string field;
    if (gen.status().code() == StatusCode::kOutOfRange) {
      field = prompt_too_long || !req->max_tokens_set ? fields.prompt : fields.max_tokens;
    }
    *error = ApiError::FromStatus(gen.status(), field);
    return nullptr;
  }
  return WrapOutputParsers(ctx->parsers, *req, rendered, *std::move(gen), flavor);
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

class CollectedResponse : public HttpDeferredResponse {
 public:
  CollectedResponse(ServerContext* ctx, std::unique_ptr<ChoiceEventSource> source,
                    ChoiceCollector collector, ApiFlavor flavor, CollectedRespond respond,
                    std::string request_id)
      : ctx_(ctx),
        source_(std::move(source)),
        collector_(std::move(collector)),
        flavor_(flavor),
        respond_(std::move(respond)),
        request_id_(std::move(request_id)) {}
  ~CollectedResponse() override { Release(); }

  void SetWakeup(std::function<void()> wake) override {
    if (source_ != nullptr) source_->SetWakeup(std::move(wake));
  }

  bool Poll(HttpResponse& res) override {
    if (source_ == nullptr) return false;
    for (ChoiceEvent& e : source_->Poll(std::chrono::milliseconds(0))) {
      collector_.Add(std::move(e));
      if (collector_.failed()) {
        completed_ = true;
        SendError(res, flavor_, ApiError::FromStatus(collector_.error()));
        return true;
      }
    }
    if (!source_->done()) return false;
    completed_ = true;
    respond_(*source_, collector_, res);
    return true;
  }

  void Release() override {
    if (source_ == nullptr) return;
    if (!completed_) {
      LOG(INFO) << request_id_ << " client went away; aborting";
      ctx_->metrics.CountClientDisconnect();
    }
    source_->SetWakeup(nullptr);
    source_->Abort();
    source_.reset();
  }

 private:
  ServerContext* ctx_;
  std::unique_ptr<ChoiceEventSource> source_;
  ChoiceCollector collector_;
  ApiFlavor flavor_;
  CollectedRespond respond_;
  std::string request_id_;
  bool completed_ = false;
};

}  // namespace

void DeferCollected(ServerContext* ctx, std::unique_ptr<ChoiceEventSource> source,
                    ChoiceCollector collector, ApiFlavor flavor, CollectedRespond respond,
                    HttpResponse& res) {
  res.deferred =
      std::make_unique<CollectedResponse>(ctx, std::move(source), std::move(collector), flavor,
                                          std::move(respond), RequestIdHeader(res));
}

}  // namespace loom
