// HttpServer: the HTTP plumbing around the routes — an HttpLoop (http_loop.h: one epoll thread
// owning the sockets, a worker pool of --http-threads for the handlers, per-connection timeouts,
// --max-connections), a body cap (413), keep-alive, the access checks of AccessPolicy before the
// body is read (Host and Origin: 403; API keys: 401; header caps: 431; queue cap: 429), CORS for
// allowed origins (preflight OPTIONS, the origin echoed), a request id per request (x-request-id,
// in every log line), JSON errors for unknown routes (404), wrong methods (405) and malformed
// requests, and a graceful stop.
//
//   HttpServer server(&ctx);
//   RETURN_IF_ERROR(server.Bind());      // fails when the port is taken
//   std::thread t([&] { server.Serve(); });
//   ...
//   server.Shutdown(grace);              // drains, then stops; Serve() returns
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "base/status.h"
#include "server/http_loop.h"
#include "server/http_router.h"
#include "server/server_context.h"

namespace loom {

class HttpServer {
 public:
  // `ctx` (engine started, options validated) must outlive this.
  explicit HttpServer(ServerContext* ctx);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Raises the open-file limit to its hard limit, then binds ctx->options.host:port (port 0 = a
  // free port). FailedPrecondition naming the address when it is taken or cannot be bound.
  Status Bind();
  // The bound port. Precondition: Bind() succeeded.
  int port() const { return loop_->port(); }
  // Serves until Shutdown() (blocking; call from one thread). Precondition: Bind() succeeded.
  void Serve();
  // Graceful stop, from any thread: new generation requests get 503 at once; in-flight ones
  // have `grace` to finish; then the engine is shut down (remaining streams end with an error
  // event) and the loop stops. Returns when Serve() may return.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  void RegisterRoutes();
  // The pre-routing checks, on the loop thread once the head is parsed: false (with the error in
  // `res`) refuses the request before its body is used.
  bool OnHead(HttpRequest& req, HttpResponse& res);
  // On a worker: routes the request; 404 / 500 as JSON.
  void Handle(const HttpRequest& req, HttpResponse& res);
  // The request log line and the per-route counters.
  void OnDone(const HttpRequest& req, size_t body_bytes, const HttpResponse& res);

  ServerContext* ctx_;
  std::shared_ptr<const AccessPolicy> policy_;
  HttpRouter router_;
  std::atomic<uint64_t> next_id_{1};
  std::unique_ptr<HttpLoop> loop_;
};

}  // namespace loom
