#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
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
bool IsGenerationRoute(const httplib::Request& req) {
  return req.method == "POST" &&
         (req.path == "/v1/chat/completions" || req.path == "/v1/completions" ||
          req.path == "/v1/messages" || req.path == "/v1/responses");
}

// Refuse() reroutes a refused request that carries a body here, naming its path in this header.
constexpr char kRefusedPath[] = "/.loom/refused";
constexpr char kRefusedPathHeader[] = "x-loom-refused-path";
// When the pre-routing handler saw the request (steady-clock microseconds), for the request log.
constexpr char kReceivedHeader[] = "x-loom-received-us";

// Header caps: cpp-httplib 0.11 bounds each header line (8 KiB) but not their number, so a client
// could hold a worker with an endless header section. Beyond these the request gets 431; they are
// far above what browsers, SDKs and agent CLIs send (a few dozen headers, a few KiB).
constexpr size_t kMaxHeaderCount = 100;
constexpr size_t kMaxHeaderBytes = 64 << 10;

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Writes the error and ends the request before its body is parsed. Answered from the pre-routing
// handler, a POST's unread body would stay in the keep-alive connection and be read as the next
// request: a web page's text/plain body could carry a whole request without an Origin. So a
// request that has a body (httplib reads one for these methods) is routed to kRefusedPath, whose
// handler leaves `res` alone after httplib has read the body (capped by --max-body-mb) and
// dropped it.
httplib::Server::HandlerResponse Refuse(httplib::Request& req, httplib::Response& res, int status,
                                        const std::string& code, const std::string& message) {
  ApiError e;
  e.http_status = status;
  e.code = code;
  e.message = message;
  SendError(res, FlavorOf(req.path), e);
  if (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
      req.method == "DELETE") {
    req.set_header(kRefusedPathHeader, req.path);
    req.path = kRefusedPath;
    return httplib::Server::HandlerResponse::Unhandled;
  }
  return httplib::Server::HandlerResponse::Handled;
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
    : ctx_(ctx), server_(std::make_unique<httplib::Server>()) {
  Configure();
}

HttpServer::~HttpServer() = default;

void HttpServer::Configure() {
  httplib::Server& s = *server_;
  const int threads = ctx_->options.http_threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  // httplib's default socket options add SO_REUSEPORT, which lets a second server bind a port
  // that is already serving; keep only SO_REUSEADDR so a busy port fails to bind.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Streams write one small SSE event per token: with Nagle's algorithm an event written while
  // the previous one is unacknowledged waits for the client's (delayed, up to 40 ms) ACK. httplib
  // sets the option on the listening socket; Linux copies it to every accepted connection.
  s.set_tcp_nodelay(true);
  s.set_payload_max_length(static_cast<size_t>(ctx_->options.max_body_bytes));
  s.set_keep_alive_max_count(1000);
  s.set_keep_alive_timeout(ctx_->options.keep_alive_timeout_s);
  s.set_read_timeout(60);
  s.set_write_timeout(60);
  auto next_id = std::make_shared<std::atomic<uint64_t>>(1);
  ServerContext* ctx = ctx_;
  auto policy =
      std::make_shared<const AccessPolicy>(ctx_->options.host, ctx_->options.access, HostName());
  s.set_pre_routing_handler([ctx, policy, next_id](const httplib::Request& const_req,
                                                   httplib::Response& res) {
    // Not a const object: httplib passes its own request; Refuse() reroutes it.
    auto& req = const_cast<httplib::Request&>(const_req);
    req.headers.erase(kRefusedPathHeader);  // only Refuse() sets it
    req.headers.erase(kReceivedHeader);
    req.set_header(kReceivedHeader, std::to_string(SteadyMicros()));
    res.set_header("x-request-id", "req-" + std::to_string(next_id->fetch_add(1)));
    res.set_header("Vary", "Origin");
    size_t num_headers = 0, header_bytes = 0;  // as sent: not httplib's or ours
    for (const auto& [name, value] : req.headers) {
      if (name == kReceivedHeader || name == "REMOTE_ADDR" || name == "REMOTE_PORT" ||
          name == "LOCAL_ADDR" || name == "LOCAL_PORT") {
        continue;
      }
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
    if (!policy->HostAllowed(req.has_header("Host"), host)) {
      return Refuse(req, res, 403, "forbidden_host",
                    "the Host header '" + Clip(host) +
                        "' does not name this server (a DNS-rebinding guard); start loom serve "
                        "with --allowed-hosts NAME to accept a name");
    }
    if (req.has_header("Origin")) {
      const std::string origin = req.get_header_value("Origin");
      if (!policy->OriginAllowed(origin, host)) {
        return Refuse(req, res, 403, "forbidden_origin",
                      "web pages from the Origin '" + Clip(origin) +
                          "' may not use this server; start loom serve with --allowed-origins " +
                          "ORIGIN to allow one");
      }
      res.set_header("Access-Control-Allow-Origin", origin);
      res.set_header("Access-Control-Expose-Headers", "x-request-id");
    }
    if (req.method == "OPTIONS") {  // CORS preflight (an allowed Origin, or none)
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
      res.set_header("Access-Control-Allow-Headers",
                     req.has_header("Access-Control-Request-Headers")
                         ? req.get_header_value("Access-Control-Request-Headers")
                         : "Content-Type, Authorization, x-api-key, anthropic-version");
      res.set_header("Access-Control-Max-Age", "86400");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (policy->keys_required() && !IsPublic(req.path) &&
        !policy->KeyAccepted(req.get_header_value("Authorization"),
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
        return Refuse(req, res, 415, "",
                      "Content-Type must be application/json, got '" + type + "'");
      }
    }
    // Checked before the body is read or tokenized; requests being parsed right now are not
    // counted yet, so a burst may overshoot the cap by at most the number of HTTP workers.
    if (const int cap = ctx->options.max_queued_requests; cap > 0 && IsGenerationRoute(req)) {
      if (const int waiting = ctx->engine->stats().pending_rows; waiting >= cap) {
        res.set_header("Retry-After", "1");
        return Refuse(req, res, 429, "queue_full",
                      std::to_string(waiting) +
                          " requests are waiting for the engine (--max-queued-requests " +
                          std::to_string(cap) + "); retry later");
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // A refused request's body, read and dropped (see Refuse); the error is already in `res`.
  // Asked for directly (no Refuse header), the path is unknown.
  auto refused = [](const httplib::Request& req, httplib::Response& res) {
    if (!req.has_header(kRefusedPathHeader)) res.status = 404;
  };
  s.Post(kRefusedPath, refused);
  s.Put(kRefusedPath, refused);
  s.Patch(kRefusedPath, refused);
  s.Delete(kRefusedPath, refused);

  RegisterOpenAiRoutes(s, ctx_);
  RegisterAnthropicRoutes(s, ctx_);
  RegisterResponsesRoutes(s, ctx_);
  RegisterEmbeddingsRoutes(s, ctx_);
  RegisterOpsRoutes(s, ctx_);
  if (ctx_->options.chat_page) RegisterChatPage(s);
  auto method_not_allowed = [](const char* allowed) {
    return [allowed](const httplib::Request& req, httplib::Response& res) {
      ApiError e;
      e.http_status = 405;
      e.message = req.method + " " + req.path + " is not allowed; use " + allowed;
      res.set_header("Allow", allowed);
      SendError(res, FlavorOf(req.path), e);
    };
  };
  for (const char* path : kPostRoutes) s.Get(path, method_not_allowed("POST"));
  for (const char* path : kGetRoutes) s.Post(path, method_not_allowed("GET"));

  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a route already wrote its error
    ApiError e;
    e.http_status = res.status;
    if (res.status == 404) {
      e.message = "unknown route: " + req.method + " " + req.path;
    } else if (res.status == 413) {
      e.message = "the request body exceeds the limit (--max-body-mb)";
    } else {
      e.message = "HTTP error " + std::to_string(res.status);
    }
    SendError(res, FlavorOf(req.path), e);
  });
  s.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& ex) {
          what = ex.what();
        } catch (...) {
        }
        LOG(ERROR) << RequestIdHeader(res) << " " << req.path << ": internal error: " << what;
        ApiError e;
        e.http_status = 500;
        e.message = "internal error: " + what;
        SendError(res, FlavorOf(req.path), e);
      });
  // One line a request: id, method, route, status, peer, body bytes in and out (a stream's are not
  // counted here), milliseconds since its headers were read. Never a header value or a body:
  // prompts and completions are logged only with --log-prompts (Generation), keys never.
  s.set_logger([ctx](const httplib::Request& req, const httplib::Response& res) {
    const std::string route =
        req.has_header(kRefusedPathHeader) ? req.get_header_value(kRefusedPathHeader) : req.path;
    ctx->metrics.CountRequest(route, res.status);
    const std::string received = req.get_header_value(kReceivedHeader);
    const double ms =
        received.empty() ? 0.0 : static_cast<double>(SteadyMicros() - std::stoll(received)) / 1e3;
    char took[32];
    std::snprintf(took, sizeof took, "%.1f ms", ms);
    LOG(INFO) << RequestIdHeader(res) << " " << req.method << " " << route << " " << res.status
              << " " << req.remote_addr << " in " << req.body.size() << " B out "
              << (res.body.empty() && res.status == 200 ? std::string("stream")
                                                        : std::to_string(res.body.size()) + " B")
              << " " << took;
  });
}

Status HttpServer::Bind() {
  const ServerOptions& o = ctx_->options;
  std::string where = o.host + ":" + std::to_string(o.port);
  if (o.port == 0) {
    port_ = server_->bind_to_any_port(o.host);
    if (port_ <= 0) return FailedPreconditionError("cannot bind " + o.host + " to a free port");
    WidenBacklog();
    return OkStatus();
  }
  if (!server_->bind_to_port(o.host, o.port)) {
    return FailedPreconditionError("cannot listen on " + where +
                                   ": the port is already in use (or the address is not local); "
                                   "stop the other server or pass --port N");
  }
  port_ = o.port;
  WidenBacklog();
  return OkStatus();
}

void HttpServer::WidenBacklog() {
  if (WidenListenBacklog(port_, kListenBacklog) == 0) {
    LOG(WARNING) << "could not widen the listen backlog of port " << port_
                 << "; bursts of more than 5 simultaneous connects may wait a second";
  }
}

void HttpServer::Serve() { server_->listen_after_bind(); }

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
  server_->stop();
}

}  // namespace loom
