// HttpRequest / HttpResponse: what a route handler reads and writes, independent of the socket
// layer (http_server.h owns the sockets, http_parser.h fills requests). The accessors keep the
// names the routes used with cpp-httplib (has_header, get_header_value, set_header, set_content,
// matches) so the routes read as before.
//
// A response is either a whole body (set_content / body), a stream (`stream`, set by
// ServeStream): the server then sends it with chunked transfer-encoding, pumping the stream from
// its event loop whenever the stream says it has something new (HttpBodyStream::SetWakeup), or a
// whole body computed later (`deferred`, set by DeferCollected for a non-streamed generation):
// the loop holds the connection, no worker thread, until the answer is complete.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

// ASCII case-insensitive ordering: HTTP header names compare without case.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
struct HeaderNameLess {
  bool operator()(std::string_view a, std::string_view b) const;
  using is_transparent = void;
};
using HttpHeaders = std::multimap<std::string, std::string, HeaderNameLess>;

struct HttpRequest {
  std::string method;   // "GET", "POST", ...
  std::string target;   // as sent: "/v1/models?x=1"
  std::string path;     // target before '?', percent-decoded: what routes match
  std::string query;    // after '?', as sent ("" when none)
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  HttpHeaders headers;
  std::string body;  // Content-Length or chunked body, decoded
  std::string remote_addr;
  int remote_port = -1;
  int64_t received_us = 0;  // steady-clock microseconds when the head was parsed (request log)
  // A pattern route's captures: [0] the whole path, [1...] the groups.
  std::vector<std::string> matches;
  // Set by the event loop (any time, another thread) once the client closed its connection; null
  // for a request that is not attached to one (tests).
  std::shared_ptr<const std::atomic<bool>> client_gone;

  bool has_header(std::string_view name) const;
  // The first value of `name`, "" when absent.
  std::string get_header_value(std::string_view name) const;
  // Replaces every value of `name` with `value`.
  void set_header(std::string_view name, std::string_view value);
  // True once the client went away (see client_gone); thread-safe.
  bool ClientGone() const { return client_gone != nullptr && client_gone->load(); }
};

// A streamed response body (server-sent events). The server's event loop owns it once the
// handler returned: SetWakeup once, then Pump from the loop thread whenever woken (and on a timer
// for keep-alives) until kDone, or Release when the client went away. Not thread-safe besides
// the wake callback.
class HttpBodyStream {
 public:
  enum class Step {
    kContinue,    // call Pump again
    kDone,        // the stream is complete: close it (nothing more to write)
    kClientGone,  // a write failed: drop the connection (Release then aborts the source)
  };
  // Writes bytes to the client; false when the client is gone.
  using Writer = std::function<bool(std::string_view)>;

  virtual ~HttpBodyStream() = default;
  // `wake` (callable from any thread, cheap) is called whenever Pump may have new output.
  virtual void SetWakeup(std::function<void()> wake) = 0;
  // One step: writes what is ready through `write` (at most once), never blocks.
  virtual Step Pump(const Writer& write) = 0;
  // The connection is done with the stream (finished or not); idempotent.
  virtual void Release() = 0;
};

struct HttpResponse;

// A whole response completed after the handler returned. The server's event loop owns it once
// the handler returned: SetWakeup once, then Poll from the loop thread whenever woken (and on a
// timer) until it returns true with the answer written into the response, or Release when the
// client went away first (abort the work). Not thread-safe besides the wake callback.
class HttpDeferredResponse {
 public:
  virtual ~HttpDeferredResponse() = default;
  // `wake` (callable from any thread, cheap) is called whenever Poll may complete.
  virtual void SetWakeup(std::function<void()> wake) = 0;
  // Never blocks. True once `res` (status, headers, body) is the answer: the loop sends it then.
  // `res` carries the headers the handler set before deferring.
  virtual bool Poll(HttpResponse& res) = 0;
  // The connection is done with it, complete or not; idempotent.
  virtual void Release() = 0;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;
  std::string body;
  // When set, the body is this stream (Content-Type from the headers) and `body` is unused.
  std::unique_ptr<HttpBodyStream> stream;
  // When set, the whole response is completed later by this (see HttpDeferredResponse).
  std::unique_ptr<HttpDeferredResponse> deferred;

  bool has_header(std::string_view name) const;
  std::string get_header_value(std::string_view name) const;
  // Replaces every value of `name` with `value`.
  void set_header(std::string_view name, std::string_view value);
  void set_content(std::string content, std::string_view content_type);
};

// "Not Found" for 404 ...; "" for a code it does not know.
const char* HttpReasonPhrase(int status);

// The status line and headers of `res` for the wire, ending with the blank line. Adds
// Content-Length (a whole body) or Transfer-Encoding: chunked (a stream on HTTP/1.1), and
// Connection: close / keep-alive as `keep_alive` says, with Keep-Alive: timeout=N when
// `keep_alive_timeout_s` > 0 (clients that read it, like node's fetch, close an idle connection
// before the server does instead of reusing one the server is closing). A stream without
// `chunked` (HTTP/1.0) is delimited by the connection's close.
std::string SerializeResponseHead(const HttpResponse& res, bool keep_alive, bool chunked,
                                  int keep_alive_timeout_s = 0);

}  // namespace loom
