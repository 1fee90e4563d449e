// POST /v1/chat/completions and POST /v1/completions: parse → prompt → Generation → JSON or
// SSE. Streaming writes through httplib's chunked content provider; a failed write (or an idle
// keep-alive comment that cannot be written) means the client went away, and dropping the
// Generation aborts its engine requests.
#include <chrono>
#include <memory>

#include "base/logging.h"
#include "server/generation.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/route_util.h"
#include "server/routes.h"
#include "server/sse.h"

namespace loom {
namespace {

using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr auto kPollInterval = std::chrono::milliseconds(50);
constexpr auto kIdleComment = std::chrono::milliseconds(500);

ApiError ErrorForDelta(const ChoiceDelta& d) {
  ApiError e = ApiError::FromStatus(d.error);
  if (d.finish_reason == "abort") e.http_status = 503;
  return e;
}

struct OpenAiStream {
  std::unique_ptr<Generation> gen;
  ServerContext* ctx = nullptr;
  ResponseMeta meta;
  bool chat = true;
  bool include_usage = false;
  bool started = false;
  bool finished = false;
  std::vector<size_t> text_offset;  // completions logprobs text_offset per choice
  Clock::time_point last_write = Clock::now();
  std::string prefix_text;          // completions echo: the prompt
  std::string request_id;

  bool Write(httplib::DataSink& sink, const std::string& data) {
    last_write = Clock::now();
    return sink.write(data.data(), data.size());
  }

  // One provider call: returns false to drop the connection (client gone).
  bool Pump(httplib::DataSink& sink) {
    const int n = static_cast<int>(text_offset.size());
    if (!started) {
      started = true;
      for (int i = 0; i < n; ++i) {
        ordered_json chunk;
        if (chat) {
          std::string empty;
          chunk = ChatChunkJson(meta, i, &empty, true, nullptr, nullptr, include_usage);
        } else if (!prefix_text.empty()) {
          chunk = CompletionChunkJson(meta, i, prefix_text, nullptr, 0, nullptr, include_usage);
          text_offset[i] = prefix_text.size();
        } else {
          continue;
        }
        if (!Write(sink, SseData(chunk))) return false;
      }
      return true;
    }
    if (gen->done()) {
      if (include_usage) {
        Usage u{gen->num_prompt_tokens(), gen->num_completion_tokens(), gen->num_cached_tokens()};
        if (!Write(sink, SseData(UsageChunkJson(meta, chat ? "chat.completion.chunk"
                                                           : "text_completion", u)))) {
          return false;
        }
      }
      if (!Write(sink, std::string(kSseDone))) return false;
      finished = true;
      sink.done();
      return true;
    }
    std::vector<ChoiceDelta> deltas = gen->Poll(kPollInterval);
    if (deltas.empty()) {
      if (Clock::now() - last_write >= kIdleComment) return Write(sink, ": keep-alive\n\n");
      return true;
    }
    for (const ChoiceDelta& d : deltas) {
      if (d.finish_reason == "error" || d.finish_reason == "abort") {
        ApiError e = ErrorForDelta(d);
        LOG(WARNING) << request_id << " stream ended with error: " << e.message;
        if (!Write(sink, SseData(e.ToJson(ApiFlavor::kOpenAi)))) return false;
        continue;
      }
      const std::vector<LogprobEntry>* lp = d.logprobs.empty() ? nullptr : &d.logprobs;
      bool has_content = !d.text.empty() || lp != nullptr;
      if (has_content) {
        ordered_json chunk =
            chat ? ChatChunkJson(meta, d.index, &d.text, false, lp, nullptr, include_usage)
                 : CompletionChunkJson(meta, d.index, d.text, lp, text_offset[d.index], nullptr,
                                       include_usage);
        text_offset[d.index] += d.text.size();
        if (!Write(sink, SseData(chunk))) return false;
      }
      if (d.finish_reason.has_value()) {
        ordered_json chunk =
            chat ? ChatChunkJson(meta, d.index, nullptr, false, nullptr, &*d.finish_reason,
                                 include_usage)
                 : CompletionChunkJson(meta, d.index, "", nullptr, 0, &*d.finish_reason,
                                       include_usage);
        if (!Write(sink, SseData(chunk))) return false;
      }
    }
    return true;
  }
};

void HandleGeneration(ServerContext* ctx, bool chat, const httplib::Request& http_req,
                      httplib::Response& res) {
  if (!CheckServing(ctx, ApiFlavor::kOpenAi, res)) return;
  std::string param;
  RequestDefaults defaults = ctx->options.defaults;
  if (ctx->codec != nullptr) defaults.vocab_size = ctx->codec->vocab_size();
  if (defaults.vocab_size == 0) defaults.vocab_size = ctx->engine->vocab_size();
  StatusOr<GenerationRequest> parsed = chat
                                           ? ParseChatCompletionsRequest(http_req.body, defaults, &param)
                                           : ParseCompletionsRequest(http_req.body, defaults, &param);
  if (!parsed.ok()) return SendError(res, ApiFlavor::kOpenAi, ApiError::FromStatus(parsed.status(), param));
  GenerationRequest& req = *parsed;
  if (req.echo && req.logprobs) {
    return SendError(res, ApiFlavor::kOpenAi,
                     ApiError::FromStatus(InvalidArgumentError("echo together with logprobs (prompt "
                                                               "logprobs) is not supported yet"),
                                          "echo"));
  }
  StatusOr<std::vector<TokenId>> prompt = BuildPrompt(*ctx, req, &param);
  if (!prompt.ok()) return SendError(res, ApiFlavor::kOpenAi, ApiError::FromStatus(prompt.status(), param));
  const bool prompt_too_long = static_cast<int>(prompt->size()) >= ctx->engine->max_model_len();
  StatusOr<std::unique_ptr<Generation>> gen = Generation::Start(ctx, req, *std::move(prompt));
  if (!gen.ok()) {
    std::string field;
    if (gen.status().code() == StatusCode::kOutOfRange) {
      field = prompt_too_long || !req.max_tokens_set ? (chat ? "messages" : "prompt") : "max_tokens";
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

  if (req.stream) {
    auto st = std::make_shared<OpenAiStream>();
    st->gen = *std::move(gen);
    st->ctx = ctx;
    st->meta = meta;
    st->chat = chat;
    st->include_usage = req.include_usage;
    st->text_offset.assign(req.n, 0);
    st->prefix_text = echo_text;
    st->request_id = RequestIdHeader(res);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [st](size_t, httplib::DataSink& sink) { return st->Pump(sink); },
        [st](bool success) {
          if (!st->finished) {
            LOG(INFO) << st->request_id << " client went away; aborting";
            st->ctx->metrics.CountClientDisconnect();
          }
          st->gen.reset();  // aborts unfinished engine requests
        });
    return;
  }

  std::vector<FinishedChoice> choices(req.n);
  for (auto& c : choices) {
    c.has_logprobs = req.logprobs;
    c.text = echo_text;
  }
  const ClientWatch watch(http_req);
  while (!(*gen)->done()) {
    if (AbortIfClientGone(watch, gen->get(), ctx, res)) return;
    for (ChoiceDelta& d : (*gen)->Poll(std::chrono::milliseconds(100))) {
      if (d.finish_reason == "error" || d.finish_reason == "abort") {
        return SendError(res, ApiFlavor::kOpenAi, ErrorForDelta(d));
      }
      FinishedChoice& c = choices[d.index];
      c.text += d.text;
      for (auto& e : d.logprobs) c.logprobs.push_back(std::move(e));
      if (d.finish_reason.has_value()) c.finish_reason = *d.finish_reason;
    }
  }
  Usage usage{(*gen)->num_prompt_tokens(), (*gen)->num_completion_tokens(),
              (*gen)->num_cached_tokens()};
  SendJson(res, 200, chat ? ChatCompletionJson(meta, choices, usage)
                          : CompletionJson(meta, choices, usage));
}

}  // namespace

void RegisterOpenAiRoutes(httplib::Server& server, ServerContext* ctx) {
  server.Post("/v1/chat/completions", [ctx](const httplib::Request& req, httplib::Response& res) {
    HandleGeneration(ctx, /*chat=*/true, req, res);
  });
  server.Post("/v1/completions", [ctx](const httplib::Request& req, httplib::Response& res) {
    HandleGeneration(ctx, /*chat=*/false, req, res);
  });
}

}  // namespace loom
