// HttpLoop: the event-driven HTTP/1.1 connection layer under HttpServer. One thread runs an epoll
// loop that owns every socket (non-blocking, level-triggered); a small worker pool runs the
// handlers (JSON parsing, chat templates, tokenizing, non-streaming generations). An idle or
// slow connection costs a file descriptor and its buffers, never a thread.
//
// Per connection:
//
//   kRead ──head parsed: on_head (loop thread; refuse → answer, drop the body)──┐
//     │  body complete                                                          │
//     ▼                                                                         ▼
//   kWait (handler on a worker) ──whole body──► kWrite ──drained──► keep-alive: kRead
//     │                                                       └──► close: kLinger → closed
//     └──stream──► kStream (pumped from the loop when its source wakes it) ──end──► kWrite
//
// Timeouts: a request's head must arrive within header_timeout of its first byte (a new
// connection's first byte within header_timeout of the accept), its body may not pause longer
// than body_timeout: both answer 408 and close. Between requests a connection may idle for
// keep_alive_timeout. A response that makes no write progress for write_timeout is dropped.
// Above max_connections a new connection gets 503 and is closed. A client that closes (FIN or
// reset) while its request runs is noticed at once (EPOLLRDHUP): a stream is released (its
// engine request aborted), a waiting handler sees HttpRequest::ClientGone().
// Streams are pumped while less than kStreamHighWaterBytes wait unsent; a slow reader pauses its
// stream (the engine's OutputStream coalesces what it produces meanwhile), so memory stays bounded.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "server/http_message.h"

namespace loom {

struct HttpLoopOptions {
  int max_connections = 4096;
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{10000};
  std::chrono::milliseconds keep_alive_timeout{5000};
  std::chrono::milliseconds write_timeout{60000};
  int64_t max_body_bytes = 32ll << 20;
  size_t max_head_bytes = 80 << 10;
  int num_workers = 64;
  int listen_backlog = 1024;
};

// What the loop asks of its owner.
struct HttpLoopCallbacks {
  // Loop thread, once a request's head is parsed and before its body is read: sets `res`'s
  // headers; returns false to refuse the request (`res` is the answer; the body is read by its
  // framing and dropped, so it cannot be taken for a second request).
  std::function<bool(HttpRequest& req, HttpResponse& res)> on_head;
  // A worker thread: answers the complete request. May set res.stream.
  std::function<void(const HttpRequest& req, HttpResponse& res)> handle;
  // Loop thread: fills `res` with the error answer for a request the loop refuses itself
  // (malformed: 400/413/431/501/505, timed out: 408, over the connection cap: 503). `req` holds
  // what was parsed (its path may be empty).
  std::function<void(int status, const std::string& message, const HttpRequest& req,
                     HttpResponse& res)>
      on_error;
  // Loop thread: the exchange is over (a whole body sent, a stream ended or its client left).
  // `req.body` is empty by then; `body_bytes` is its size.
  std::function<void(const HttpRequest& req, size_t body_bytes, const HttpResponse& res)> on_done;
};

class HttpLoop {
 public:
  static constexpr size_t kStreamHighWaterBytes = 256 << 10;

  HttpLoop(HttpLoopOptions options, HttpLoopCallbacks callbacks);
  ~HttpLoop();  // Stop(), then joins the workers (handlers still running finish first)
  HttpLoop(const HttpLoop&) = delete;
  HttpLoop& operator=(const HttpLoop&) = delete;

  // Binds host:port (port 0: a free one) and listens. FailedPrecondition naming the address when
  // it is taken or cannot be bound.
  Status Listen(const std::string& host, int port);
  // The bound port. Precondition: Listen() succeeded.
  int port() const { return port_; }
  // Runs the loop on the calling thread until Stop(). Precondition: Listen() succeeded.
  void Run();
  // From any thread: Run() closes every connection (streams released, waiting handlers told the
  // client is gone) and returns.
  void Stop();
  // Open connections (lingering closes not counted); thread-safe.
  int num_connections() const { return num_connections_.load(); }

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::atomic<int> num_connections_{0};
};

// Raises this process's open-file soft limit to its hard limit; returns the new soft limit.
int64_t RaiseFileLimit();

}  // namespace loom
