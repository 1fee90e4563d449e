#include "server/http_server.h"

#include <unistd.h>

#include <cstdio>
#include <thread>

#include "base/logging.h"
#include "server/route_util.h"
#include "server/routes.h"

namespace loom {
namespace {

using nlohmann::ordered_json;

ApiFlavor FlavorOf(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiFlavor::kAnthropic : ApiFlavor::kOpenAi;
}

// No API key: the health probe, and the chat page's HTML (it asks for the key before calling the
// API).
bool IsPublic(const std::string& path) { return path == "/" || path == "/health"; }

// The routes that queue work for the engine (what --max-queued-requests caps).
bool IsGenerationRoute(const HttpRequest& req) {
  return req.method == "POST" &&
         (req.path == "/v1/chat/completions" || req.path == "/v1/completions" ||
          req.path == "/v1/messages" || req.path == "/v1/responses");
}

// Header caps: beyond these the request gets 431; they are far above what browsers, SDKs and agent
// CLIs send (a few dozen headers, a few KiB). The parser's own cap on the whole head
// (kMaxHeadBytes) stops a client that sends more before these are counted.
constexpr size_t kMaxHeaderCount = 100;
constexpr size_t kMaxHeaderBytes = 64 << 10;
constexpr size_t kMaxHeadBytes = kMaxHeaderBytes + (16 << 10);  // + the request line

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Writes the error of a request refused before its body is used; the loop then reads the body by
// its framing and drops it (a web page's text/plain body could carry a whole second request).
bool Refuse(const HttpRequest& req, HttpResponse& res, int status, const std::string& code,
            const std::string& message) {
  ApiError e;
  e.http_status = status;
  e.code = code;
  e.message = message;
  SendError(res, FlavorOf(req.path), e);
  return false;
}

// A header value quoted in an error, cut to a readable length.
std::string Clip(const std::string& s) { return s.size() <= 100 ? s : s.substr(0, 100) + "..."; }

// This machine's name (a Host the server answers to when bound to a non-loopback address).
std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// Routes that exist, by method, for 405 answers.
const char* const kPostRoutes[] = {
    "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
    "/v1/responses",        "/tokenize",       "/detokenize"};
const char* const kGetRoutes[] = {"/v1/models", "/health", "/stats", "/metrics", "/"};

}  // namespace

Status ServerOptions::Validate() const {
  if (port < 0 || port > 65535) return InvalidArgumentError("--port must be in [0, 65535]");
  if (http_threads < 1 || http_threads > 65536) {
    return InvalidArgumentError("--http-threads must be in [1, 65536]");
  }
  if (max_body_bytes < 1024) return InvalidArgumentError("--max-body-mb is too small");
  if (max_connections < 1) return InvalidArgumentError("--max-connections must be >= 1");
  if (!(header_timeout_s > 0) || !(body_timeout_s > 0) || keep_alive_timeout_s < 0) {
    return InvalidArgumentError("--header-timeout and --body-timeout must be > 0");
  }
  if (shutdown_grace_s < 0) return InvalidArgumentError("--shutdown-grace must be >= 0");
  if (defaults.max_tokens < 0) return InvalidArgumentError("--max-tokens must be >= 0");
  if (defaults.max_output_tokens < 0) {
    return InvalidArgumentError("--max-output-tokens must be >= 0");
  }
  if (defaults.temperature < 0 || defaults.temperature > 2) {
    return InvalidArgumentError("--temp must be in [0, 2]");
  }
  if (!(defaults.top_p > 0 && defaults.top_p <= 1)) {
    return InvalidArgumentError("--top-p must be in (0, 1]");
  }
  if (defaults.top_k < 0) return InvalidArgumentError("--top-k must be >= 0");
  if (responses_store < 0) return InvalidArgumentError("--responses-store must be >= 0");
  if (defaults.reasoning_budget < -1) {
    return InvalidArgumentError("--reasoning-budget must be -1 (unlimited) or >= 0");
  }
  if (max_queued_requests < 0) return InvalidArgumentError("--max-queued-requests must be >= 0");
  return access.Validate();
}

HttpServer::HttpServer(ServerContext* ctx)
    : ctx_(ctx),
      policy_(std::make_shared<const AccessPolicy>(ctx->options.host, ctx->options.access,
                                                   HostName())) {
  RegisterRoutes();
  const ServerOptions& o = ctx_->options;
  auto ms = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); };
  HttpLoopOptions options;
  options.max_connections = o.max_connections;
  options.header_timeout = ms(o.header_timeout_s);
  options.body_timeout = ms(o.body_timeout_s);
  options.keep_alive_timeout = ms(o.keep_alive_timeout_s);
  options.max_body_bytes = o.max_body_bytes;
  options.max_head_bytes = kMaxHeadBytes;
  options.num_workers = o.http_threads;
  HttpLoopCallbacks callbacks;
  callbacks.on_head = [this](HttpRequest& req, HttpResponse& res) { return OnHead(req, res); };
  callbacks.handle = [this](const HttpRequest& req, HttpResponse& res) { Handle(req, res); };
  callbacks.on_error = [this](int status, const std::string& message, const HttpRequest& req,
                              HttpResponse& res) {
    res.set_header("x-request-id", "req-" + std::to_string(next_id_.fetch_add(1)));
    ApiError e;
    e.http_status = status;
    e.message = message;
    if (status == 431) e.code = "request_headers_too_large";
    SendError(res, FlavorOf(req.path), e);
  };
  callbacks.on_done = [this](const HttpRequest& req, size_t body_bytes, const HttpResponse& res) {
    OnDone(req, body_bytes, res);
  };
  loop_ = std::make_unique<HttpLoop>(options, std::move(callbacks));
}

HttpServer::~HttpServer() = default;

bool HttpServer::OnHead(HttpRequest& req, HttpResponse& res) {
  req.received_us = SteadyMicros();
  res.set_header("x-request-id", "req-" + std::to_string(next_id_.fetch_add(1)));
  res.set_header("Vary", "Origin");
  size_t num_headers = 0, header_bytes = 0;
  for (const auto& [name, value] : req.headers) {
    ++num_headers;
    header_bytes += name.size() + value.size() + 4;  // "name: value\r\n"
  }
  if (num_headers > kMaxHeaderCount || header_bytes > kMaxHeaderBytes) {
    return Refuse(req, res, 431, "request_headers_too_large",
                  "the request has " + std::to_string(num_headers) + " headers (" +
                      std::to_string(header_bytes) + " bytes); at most " +
                      std::to_string(kMaxHeaderCount) + " headers and " +
                      std::to_string(kMaxHeaderBytes >> 10) + " KiB are accepted");
  }
  const std::string host = req.get_header_value("Host");
  if (!policy_->HostAllowed(req.has_header("Host"), host)) {
    return Refuse(req, res, 403, "forbidden_host",
                  "the Host header '" + Clip(host) +
                      "' does not name this server (a DNS-rebinding guard); start loom serve "
                      "with --allowed-hosts NAME to accept a name");
  }
  if (req.has_header("Origin")) {
    const std::string origin = req.get_header_value("Origin");
    if (!policy_->OriginAllowed(origin, host)) {
      return Refuse(req, res, 403, "forbidden_origin",
                    "web pages from the Origin '" + Clip(origin) +
                        "' may not use this server; start loom serve with --allowed-origins " +
                        "ORIGIN to allow one");
    }
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Access-Control-Expose-Headers", "x-request-id");
  }
  if (req.method == "OPTIONS") {  // CORS preflight (an allowed Origin, or none): answered here
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    res.set_header("Access-Control-Allow-Headers",
                   req.has_header("Access-Control-Request-Headers")
                       ? req.get_header_value("Access-Control-Request-Headers")
                       : "Content-Type, Authorization, x-api-key, anthropic-version");
    res.set_header("Access-Control-Max-Age", "86400");
    return false;
  }
  if (policy_->keys_required() && !IsPublic(req.path) &&
      !policy_->KeyAccepted(req.get_header_value("Authorization"),
                            req.get_header_value("x-api-key"))) {
    res.set_header("WWW-Authenticate", "Bearer realm=\"loom\"");
    const bool sent = req.has_header("Authorization") || req.has_header("x-api-key");
    return Refuse(req, res, 401, "invalid_api_key",
                  sent ? "invalid API key"
                       : "missing API key: send 'Authorization: Bearer <key>' or 'x-api-key'");
  }
  if (req.method == "POST") {
    std::string type = req.get_header_value("Content-Type");
    // curl -d sends application/x-www-form-urlencoded; accept it (the body is parsed as JSON
    // anyway) so the common `curl -d '{...}'` works, as it does with llama.cpp.
    if (!type.empty() && type.find("application/json") == std::string::npos &&
        type.find("text/plain") == std::string::npos &&
        type.find("application/x-www-form-urlencoded") == std::string::npos) {
      return Refuse(req, res, 415, "", "Content-Type must be application/json, got '" + type + "'");
    }
  }
  // Checked before the body is read or tokenized; requests being parsed right now are not
  // counted yet, so a burst may overshoot the cap by at most the number of HTTP workers.
  if (const int cap = ctx_->options.max_queued_requests; cap > 0 && IsGenerationRoute(req)) {
    if (const int waiting = ctx_->engine->stats().pending_rows; waiting >= cap) {
      res.set_header("Retry-After", "1");
      return Refuse(req, res, 429, "queue_full",
                    std::to_string(waiting) +
                        " requests are waiting for the engine (--max-queued-requests " +
                        std::to_string(cap) + "); retry later");
    }
  }
  return true;
}

void HttpServer::RegisterRoutes() {
  HttpRouter& s = router_;
  RegisterOpenAiRoutes(s, ctx_);
  RegisterAnthropicRoutes(s, ctx_);
  RegisterResponsesRoutes(s, ctx_);
  RegisterEmbeddingsRoutes(s, ctx_);
  RegisterOpsRoutes(s, ctx_);
  if (ctx_->options.chat_page) RegisterChatPage(s);
  auto method_not_allowed = [](const char* allowed) {
    return [allowed](const HttpRequest& req, HttpResponse& res) {
      ApiError e;
      e.http_status = 405;
      e.message = req.method + " " + req.path + " is not allowed; use " + allowed;
      res.set_header("Allow", allowed);
      SendError(res, FlavorOf(req.path), e);
    };
  };
  for (const char* path : kPostRoutes) s.Get(path, method_not_allowed("POST"));
  for (const char* path : kGetRoutes) s.Post(path, method_not_allowed("GET"));
}

void HttpServer::Handle(const HttpRequest& const_req, HttpResponse& res) {
  HttpRequest& req = const_cast<HttpRequest&>(const_req);  // the loop's own; Find sets matches
  const HttpHandler* handler = router_.Find(&req);
  if (handler == nullptr) {
    ApiError e;
    e.http_status = 404;
    e.message = "unknown route: " + req.method + " " + req.path;
    return SendError(res, FlavorOf(req.path), e);
  }
  try {
    (*handler)(req, res);
  } catch (const std::exception& ex) {
    LOG(ERROR) << RequestIdHeader(res) << " " << req.path << ": internal error: " << ex.what();
    res.stream.reset();
    res.deferred.reset();
    ApiError e;
    e.http_status = 500;
    e.message = std::string("internal error: ") + ex.what();
    SendError(res, FlavorOf(req.path), e);
  }
}

// One line a request: id, method, route, status, peer, body bytes in and out (a stream's are not
// counted here), milliseconds since its headers were read. Never a header value or a body:
// prompts and completions are logged only with --log-prompts (Generation), keys never.
void HttpServer::OnDone(const HttpRequest& req, size_t body_bytes, const HttpResponse& res) {
  const std::string route = req.path.empty() ? "-" : req.path;
  ctx_->metrics.CountRequest(route, res.status);
  const double ms =
      req.received_us == 0 ? 0.0 : static_cast<double>(SteadyMicros() - req.received_us) / 1e3;
  char took[32];
  std::snprintf(took, sizeof took, "%.1f ms", ms);
  LOG(INFO) << RequestIdHeader(res) << " " << (req.method.empty() ? "-" : req.method) << " "
            << route << " " << res.status << " " << req.remote_addr << " in " << body_bytes
            << " B out "
            << (res.body.empty() && res.status == 200 ? std::string("stream")
                                                      : std::to_string(res.body.size()) + " B")
            << " " << took;
}

Status HttpServer::Bind() {
  const ServerOptions& o = ctx_->options;
  const int64_t files = RaiseFileLimit();
  if (files > 0 && files < o.max_connections + 64) {
    LOG(WARNING) << "the open-file limit is " << files << ": fewer than --max-connections "
                 << o.max_connections << " connections fit (raise it with ulimit -n)";
  }
  return loop_->Listen(o.host, o.port);
}

void HttpServer::Serve() { loop_->Run(); }

void HttpServer::Shutdown(std::chrono::milliseconds grace) {
  ctx_->draining.store(true);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (ctx_->metrics.in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (ctx_->metrics.in_flight() > 0) {
    LOG(WARNING) << ctx_->metrics.in_flight()
                 << " requests still running after the grace period; ending them";
  }
  // Ends every unfinished request with kAbort: streams write a clean error event and close.
  ctx_->engine->Shutdown();
  auto hard_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (ctx_->metrics.in_flight() > 0 && std::chrono::steady_clock::now() < hard_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  loop_->Stop();
}

}  // namespace loom
