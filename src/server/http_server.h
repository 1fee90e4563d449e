// HttpServer: the HTTP plumbing around the routes — cpp-httplib with a worker pool sized for
// many concurrent streams (--http-threads), a body cap (413), keep-alive, the access checks of
// AccessPolicy before anything is parsed (Host and Origin: 403; API keys: 401), CORS for allowed
// origins (preflight OPTIONS, the origin echoed), a request id per request (x-request-id, in every
// log line), JSON errors for unknown routes (404) and wrong methods (405), and a graceful stop.
//
//   HttpServer server(&ctx);
//   RETURN_IF_ERROR(server.Bind());      // fails when the port is taken
//   std::thread t([&] { server.Serve(); });
//   ...
//   server.Shutdown(grace);              // drains, then stops; Serve() returns
#pragma once

#include <chrono>
#include <memory>

#include "base/status.h"
#include "server/server_context.h"

namespace httplib {
class Server;
}

namespace loom {

class HttpServer {
 public:
  // `ctx` (engine started, options validated) must outlive this.
  explicit HttpServer(ServerContext* ctx);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds ctx->options.host:port (port 0 = a free port). FailedPrecondition naming the address
  // when it is taken or cannot be bound.
  Status Bind();
  // The bound port. Precondition: Bind() succeeded.
  int port() const { return port_; }
  // Serves until Shutdown() (blocking; call from one thread). Precondition: Bind() succeeded.
  void Serve();
  // Graceful stop, from any thread: new generation requests get 503 at once; in-flight ones
  // have `grace` to finish; then the engine is shut down (remaining streams end with an error
  // event) and the listener closes. Returns when Serve() may return.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  void Configure();
  // Raises the listener's backlog from httplib's 5 (see WidenListenBacklog).
  void WidenBacklog();
  static constexpr int kListenBacklog = 1024;

  ServerContext* ctx_;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
};

}  // namespace loom
