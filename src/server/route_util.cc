#include "server/route_util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "base/logging.h"
#include "server/generation.h"
#include "server/output_parsing.h"

namespace loom {

using nlohmann::ordered_json;

std::string RequestIdHeader(const httplib::Response& res) {
  return res.get_header_value("x-request-id");
}

void SendJson(httplib::Response& res, int status, const ordered_json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void SendError(httplib::Response& res, ApiFlavor flavor, const ApiError& error) {
  SendJson(res, error.http_status, error.ToJson(flavor));
}

RequestDefaults RequestDefaultsOf(const ServerContext& ctx) {
  RequestDefaults defaults = ctx.options.defaults;
  if (ctx.codec != nullptr) defaults.vocab_size = ctx.codec->vocab_size();
  if (defaults.vocab_size == 0) defaults.vocab_size = ctx.engine->vocab_size();
  return defaults;
}

bool CheckServing(ServerContext* ctx, ApiFlavor flavor, httplib::Response& res) {
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

// The address and port of a TCP socket address, as httplib writes them into a Request.
bool AddressOf(const sockaddr_storage& a, std::string* ip, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    if (inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf) == nullptr) return false;
    *port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    if (inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf) == nullptr) return false;
    *port = ntohs(v6->sin6_port);
  } else {
    return false;
  }
  *ip = buf;
  return true;
}

// Calls fn(fd) for each socket this process has open until fn returns true.
template <class Fn>
void ForEachSocket(Fn fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int dir_fd = dirfd(dir);
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dir_fd) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (fn(static_cast<int>(fd))) break;
  }
  closedir(dir);
}

}  // namespace

ClientWatch::ClientWatch(const httplib::Request& req) {
  if (req.remote_port < 0 || req.local_port < 0) return;
  ForEachSocket([&](int fd) {
    sockaddr_storage peer{}, local{};
    socklen_t peer_len = sizeof peer, local_len = sizeof local;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) {
      return false;
    }
    std::string peer_ip, local_ip;
    int peer_port = -1, local_port = -1;
    if (AddressOf(peer, &peer_ip, &peer_port) && AddressOf(local, &local_ip, &local_port) &&
        peer_port == req.remote_port && local_port == req.local_port &&
        peer_ip == req.remote_addr && local_ip == req.local_addr) {
      fd_ = fd;
      return true;
    }
    return false;
  });
}

int WidenListenBacklog(int port, int backlog) {
  int widened = 0;
  ForEachSocket([&](int fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    sockaddr_storage local{};
    socklen_t local_len = sizeof local;
    std::string ip;
    int local_port = -1;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening != 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
        AddressOf(local, &ip, &local_port) && local_port == port && listen(fd, backlog) == 0) {
      ++widened;
    }
    return false;
  });
  return widened;
}

bool AbortIfClientGone(const ClientWatch& watch, ChoiceEventSource* source, ServerContext* ctx,
                       const httplib::Response& res) {
  if (!watch.Gone()) return false;
  LOG(INFO) << RequestIdHeader(res) << " client went away; aborting";
  ctx->metrics.CountClientDisconnect();
  source->Abort();
  return true;
}

bool CollectResponse(ChoiceEventSource* source, const httplib::Request& req, ServerContext* ctx,
                     ApiFlavor flavor, httplib::Response& res, ChoiceCollector* collector) {
  constexpr auto kPollInterval = std::chrono::milliseconds(100);
  const ClientWatch watch(req);
  while (!source->done()) {
    if (AbortIfClientGone(watch, source, ctx, res)) return false;
    for (ChoiceEvent& e : source->Poll(kPollInterval)) {
      collector->Add(std::move(e));
      if (collector->failed()) {
        SendError(res, flavor, ApiError::FromStatus(collector->error()));
        return false;
      }
    }
  }
  return true;
}

bool ClientWatch::Gone() const {
  if (fd_ < 0) return false;
  char c;
  const ssize_t r = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r == 0) return true;  // orderly close
  if (r > 0) return false;  // the client already sent more (a pipelined request)
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace loom
