// HttpRequestParser: a small strict incremental HTTP/1.1 request parser. Bytes go in as they
// arrive, split anywhere; it stops at the end of one request, so the bytes after it (a pipelined
// request) stay with the caller and cannot desync the connection.
//
//   kHead ──"\r\n\r\n"──► kBody ──Content-Length / last chunk──► kComplete
//     │                     │
//     └──── anything malformed or over a limit ───► kError (error_status(): 400, 413, 431, 501,
//     505)
//
// Strict where leniency lets two parsers disagree about where a request ends (request
// smuggling): CRLF only; header names are tokens with no space before the colon; no obs-fold;
// Content-Length is digits only and one value; Transfer-Encoding is exactly "chunked" and never
// with Content-Length (400); other transfer codings are 501; one Host. Bodies: Content-Length, or
// chunked (decoded; chunk extensions and trailers are read and dropped); neither means no body.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http_message.h"

namespace loom {

struct HttpParserLimits {
  // The request line and the header section together; beyond: 431.
  size_t max_head_bytes = 80 << 10;
  // The decoded body; beyond: 413 (at once when Content-Length says so).
  int64_t max_body_bytes = 32ll << 20;
};

class HttpRequestParser {
 public:
  enum class State { kHead, kBody, kComplete, kError };

  explicit HttpRequestParser(HttpParserLimits limits = {});

  // Consumes a prefix of `data`: everything up to the end of the current request (kComplete) or
  // the byte that made it kError; returns how many bytes it used. In kComplete / kError it
  // consumes nothing: Take() (or Reset()) first.
  size_t Feed(std::string_view data);
  State state() const { return state_; }
  // True once the request line and headers are parsed (kBody, kComplete).
  bool head_done() const { return state_ == State::kBody || state_ == State::kComplete; }
  // Nothing of a request yet (what an idle keep-alive connection looks like).
  bool idle() const { return state_ == State::kHead && head_.empty(); }

  // The request being parsed: method, target, path, query, version and headers once head_done(),
  // the body once kComplete. The caller may add fields (remote address, headers of its own).
  HttpRequest& request() { return request_; }
  // Reads the rest of the body by its framing but keeps none of it (a refused request).
  // Precondition: head_done().
  void DiscardBody() { discard_body_ = true; }
  // Whether the connection persists after this request (version and Connection header).
  // Precondition: head_done().
  bool keep_alive() const { return keep_alive_; }
  // "Expect: 100-continue" on a request with a body. Precondition: head_done().
  bool expects_continue() const { return expects_continue_; }
  // Body bytes still to come (chunked: unknown, 1 until the last chunk). Precondition: head_done().
  bool body_pending() const { return state_ == State::kBody; }

  // kError: the status to answer (400, 413, 431, 501, 505) and why, for the client.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // Precondition: kComplete. Returns the request and starts over for the next one.
  HttpRequest Take();
  // Forgets everything: back to kHead with nothing read.
  void Reset();

 private:
  enum class BodyMode { kNone, kLength, kChunked };
  enum class ChunkState { kSize, kData, kDataEnd, kTrailer };

  void Fail(int status, std::string message);
  // Parses head_ (request line + headers, without the final blank line).
  void ParseHead();
  bool ParseRequestLine(std::string_view line);
  bool ParseHeaderLine(std::string_view line);
  // Validates the framing headers; sets body_mode_ and friends.
  void ResolveFraming();
  size_t FeedLength(std::string_view data);
  size_t FeedChunked(std::string_view data);
  void AppendBody(std::string_view bytes);

  HttpParserLimits limits_;
  State state_ = State::kHead;
  std::string head_;  // kHead: bytes so far
  HttpRequest request_;
  BodyMode body_mode_ = BodyMode::kNone;
  int64_t body_remaining_ = 0;  // kLength: bytes; kChunked kData: the chunk's bytes
  int64_t body_bytes_ = 0;      // decoded so far (the 413 cap)
  ChunkState chunk_state_ = ChunkState::kSize;
  std::string line_;  // kChunked: the size or trailer line so far
  size_t trailer_bytes_ = 0;
  bool discard_body_ = false;
  bool keep_alive_ = true;
  bool expects_continue_ = false;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace loom
