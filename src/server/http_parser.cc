#include "server/http_parser.h"

#include <algorithm>
#include <utility>

namespace loom {
namespace {

constexpr std::string_view kCrlf = "\r\n";
constexpr size_t kMaxChunkLineBytes = 1024;
constexpr size_t kMaxTrailerBytes = 8 << 10;

// RFC 9110 tchar: what a method or a header name is made of.
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// A header value's bytes: visible ASCII, obs-text, SP and HTAB; no other control.
bool IsValueChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoding of a path (what httplib did for routing); a malformed escape stays as it is.
std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool IsKnownMethod(std::string_view m) {
  for (std::string_view known : {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    if (m == known) return true;
  }
  return false;
}

// Comma-separated list membership, tokens compared without case ("Connection: keep-alive, x").
bool ListHas(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (EqualsIgnoreCase(TrimOws(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

HttpRequestParser::HttpRequestParser(HttpParserLimits limits) : limits_(limits) {}

void HttpRequestParser::Reset() {
  state_ = State::kHead;
  head_.clear();
  request_ = HttpRequest();
  body_mode_ = BodyMode::kNone;
  body_remaining_ = 0;
  body_bytes_ = 0;
  chunk_state_ = ChunkState::kSize;
  line_.clear();
  trailer_bytes_ = 0;
  discard_body_ = false;
  keep_alive_ = true;
  expects_continue_ = false;
  error_status_ = 0;
  error_message_.clear();
}

HttpRequest HttpRequestParser::Take() {
  HttpRequest out = std::move(request_);
  Reset();
  return out;
}

void HttpRequestParser::Fail(int status, std::string message) {
  state_ = State::kError;
  error_status_ = status;
  error_message_ = std::move(message);
}

size_t HttpRequestParser::Feed(std::string_view data) {
  size_t used = 0;
  if (state_ == State::kHead) {
    // Leading CRLFs before a request line are allowed (RFC 9112 2.2), e.g. after a body.
    while (head_.empty() && used < data.size() && (data[used] == '\r' || data[used] == '\n')) {
      ++used;
    }
    const size_t old = head_.size();
    const size_t take = std::min(data.size() - used, limits_.max_head_bytes + 4 - old);
    head_.append(data.substr(used, take));
    const size_t from = old >= 3 ? old - 3 : 0;
    const size_t end = head_.find("\r\n\r\n", from);
    // A bare "\n\n" before the end of the head is refused whether or not the end has arrived in
    // the same read: the outcome must not depend on how the bytes were split (fuzz_http_parser).
    const size_t bare = head_.find("\n\n", from >= 1 ? from - 1 : 0);
    if (bare != std::string::npos && (end == std::string::npos || bare < end)) {
      Fail(400, "malformed request: lines must end with CRLF");
      return used + take;
    }
    if (end == std::string::npos) {
      if (head_.size() > limits_.max_head_bytes) {
        Fail(431, "the request's header section exceeds " +
                      std::to_string(limits_.max_head_bytes >> 10) +
                      " KiB; at most 100 headers and 64 KiB are accepted");
      }
      return used + take;
    }
    // Give back what belongs to the body or the next request.
    const size_t head_end = end + 4;
    used += take - (head_.size() - head_end);
    head_.resize(end);
    if (head_.size() > limits_.max_head_bytes) {
      Fail(431, "the request's header section exceeds " +
                    std::to_string(limits_.max_head_bytes >> 10) +
                    " KiB; at most 100 headers and 64 KiB are accepted");
      return used;
    }
    ParseHead();
    if (state_ == State::kError) return used;
    if (body_mode_ == BodyMode::kNone ||
        (body_mode_ == BodyMode::kLength && body_remaining_ == 0)) {
      state_ = State::kComplete;
      return used;
    }
    state_ = State::kBody;
    data.remove_prefix(used);
  } else if (state_ != State::kBody) {
    return 0;
  }
  return used + (body_mode_ == BodyMode::kLength ? FeedLength(data) : FeedChunked(data));
}

void HttpRequestParser::ParseHead() {
  std::string_view rest = head_;
  size_t eol = rest.find(kCrlf);
  if (!ParseRequestLine(rest.substr(0, eol))) return;
  rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 2);
  while (!rest.empty()) {
    eol = rest.find(kCrlf);
    if (!ParseHeaderLine(rest.substr(0, eol))) return;
    if (eol == std::string_view::npos) break;
    rest.remove_prefix(eol + 2);
  }
  ResolveFraming();
}

bool HttpRequestParser::ParseRequestLine(std::string_view line) {
  auto bad = [&](const std::string& why) {
    Fail(400, "malformed request line: " + why);
    return false;
  };
  if (line.find_first_of("\r\n") != std::string_view::npos) return bad("stray CR or LF");
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return bad("expected METHOD SP TARGET SP HTTP/1.1");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), IsTokenChar)) {
    return bad("the method is not a token");
  }
  if (target.empty() || !std::all_of(target.begin(), target.end(), [](char c) {
        return static_cast<unsigned char>(c) > 0x20 && c != 0x7f;
      })) {
    return bad("the target is empty or holds control characters");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return bad("the version must be HTTP/1.1 or HTTP/1.0");
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    Fail(505, "HTTP version " + std::string(version.substr(5)) + " is not supported; use 1.1");
    return false;
  }
  if (!IsKnownMethod(method)) {
    Fail(501, "the method " + std::string(method) + " is not implemented");
    return false;
  }
  if (target[0] != '/' && !(target == "*" && method == "OPTIONS")) {
    return bad("the target must be a path starting with '/'");
  }
  request_.method = method;
  request_.target = target;
  request_.version = version;
  const size_t q = target.find('?');
  request_.path = PercentDecode(target.substr(0, q));
  request_.query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
  keep_alive_ = version == "HTTP/1.1";
  return true;
}

bool HttpRequestParser::ParseHeaderLine(std::string_view line) {
  if (line.empty()) return true;
  if (line.front() == ' ' || line.front() == '\t') {
    Fail(400, "malformed header: folded lines (obs-fold) are not accepted");
    return false;
  }
  const size_t colon = line.find(':');
  const std::string_view name = line.substr(0, colon);
  if (colon == std::string_view::npos || name.empty() ||
      !std::all_of(name.begin(), name.end(), IsTokenChar)) {
    Fail(400, "malformed header line (expected 'Name: value', no space before the colon)");
    return false;
  }
  const std::string_view value = TrimOws(line.substr(colon + 1));
  if (!std::all_of(value.begin(), value.end(), IsValueChar)) {
    Fail(400, "the header " + std::string(name) + " holds control characters");
    return false;
  }
  request_.headers.emplace(std::string(name), std::string(value));
  return true;
}

void HttpRequestParser::ResolveFraming() {
  const HttpHeaders& h = request_.headers;
  if (h.count("Host") > 1) return Fail(400, "more than one Host header");
  auto [cl_lo, cl_hi] = h.equal_range("Content-Length");
  auto [te_lo, te_hi] = h.equal_range("Transfer-Encoding");
  const bool has_cl = cl_lo != cl_hi, has_te = te_lo != te_hi;
  if (has_cl && has_te) {
    return Fail(400, "Content-Length together with Transfer-Encoding is not accepted");
  }
  if (has_te) {
    if (request_.version == "HTTP/1.0") {
      return Fail(400, "Transfer-Encoding is not allowed in an HTTP/1.0 request");
    }
    if (std::next(te_lo) != te_hi || !EqualsIgnoreCase(te_lo->second, "chunked")) {
      return Fail(501, "Transfer-Encoding '" + te_lo->second +
                           "' is not supported: send Content-Length or 'chunked'");
    }
    body_mode_ = BodyMode::kChunked;
  } else if (has_cl) {
    const std::string& first = cl_lo->second;
    for (auto it = cl_lo; it != cl_hi; ++it) {
      if (it->second != first) return Fail(400, "conflicting Content-Length headers");
    }
    if (first.empty() || first.size() > 18 ||
        !std::all_of(first.begin(), first.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return Fail(400, "Content-Length must be a decimal number of bytes, got '" +
                           first.substr(0, 40) + "'");
    }
    body_remaining_ = std::stoll(first);
    if (body_remaining_ > limits_.max_body_bytes) {
      return Fail(413, "the request body exceeds the limit (--max-body-mb)");
    }
    body_mode_ = BodyMode::kLength;
  }
  const std::string connection = request_.get_header_value("Connection");
  if (ListHas(connection, "close")) {
    keep_alive_ = false;
  } else if (request_.version == "HTTP/1.0" && ListHas(connection, "keep-alive")) {
    keep_alive_ = true;
  }
  expects_continue_ = (body_mode_ == BodyMode::kChunked || body_remaining_ > 0) &&
                      EqualsIgnoreCase(request_.get_header_value("Expect"), "100-continue");
}

void HttpRequestParser::AppendBody(std::string_view bytes) {
  body_bytes_ += static_cast<int64_t>(bytes.size());
  if (!discard_body_) request_.body.append(bytes);
}

size_t HttpRequestParser::FeedLength(std::string_view data) {
  const size_t take = static_cast<size_t>(std::min<int64_t>(body_remaining_, data.size()));
  AppendBody(data.substr(0, take));
  body_remaining_ -= static_cast<int64_t>(take);
  if (body_remaining_ == 0) state_ = State::kComplete;
  return take;
}

size_t HttpRequestParser::FeedChunked(std::string_view data) {
  size_t used = 0;
  while (used < data.size() && state_ == State::kBody) {
    const char c = data[used];
    switch (chunk_state_) {
      case ChunkState::kSize:
      case ChunkState::kTrailer: {
        ++used;
        line_ += c;
        if (chunk_state_ == ChunkState::kTrailer && ++trailer_bytes_ > kMaxTrailerBytes) {
          Fail(431, "the chunked body's trailers are too large");
          return used;
        }
        if (line_.size() > kMaxChunkLineBytes && chunk_state_ == ChunkState::kSize) {
          Fail(400, "malformed chunked body: chunk size line too long");
          return used;
        }
        if (c != '\n') break;
        if (line_.size() < 2 || line_[line_.size() - 2] != '\r') {
          Fail(400, "malformed chunked body: lines must end with CRLF");
          return used;
        }
        const std::string_view line = std::string_view(line_).substr(0, line_.size() - 2);
        if (chunk_state_ == ChunkState::kTrailer) {
          if (line.empty()) state_ = State::kComplete;  // the blank line after the trailers
          line_.clear();
          break;
        }
        const std::string_view size = line.substr(0, line.find(';'));
        int64_t n = 0;
        if (size.empty() || size.size() > 15) {
          Fail(400, "malformed chunked body: bad chunk size");
          return used;
        }
        for (char d : size) {
          const int v = HexValue(d);
          if (v < 0) {
            Fail(400, "malformed chunked body: bad chunk size");
            return used;
          }
          n = n * 16 + v;
        }
        line_.clear();
        if (n == 0) {
          chunk_state_ = ChunkState::kTrailer;
        } else if (body_bytes_ + n > limits_.max_body_bytes) {
          Fail(413, "the request body exceeds the limit (--max-body-mb)");
          return used;
        } else {
          body_remaining_ = n;
          chunk_state_ = ChunkState::kData;
        }
        break;
      }
      case ChunkState::kData: {
        const size_t take =
            static_cast<size_t>(std::min<int64_t>(body_remaining_, data.size() - used));
        AppendBody(data.substr(used, take));
        used += take;
        body_remaining_ -= static_cast<int64_t>(take);
        if (body_remaining_ == 0) chunk_state_ = ChunkState::kDataEnd;
        break;
      }
      case ChunkState::kDataEnd:
        ++used;
        line_ += c;
        if (line_.size() < 2) break;
        if (line_ != kCrlf) {
          Fail(400, "malformed chunked body: a chunk's data must end with CRLF");
          return used;
        }
        line_.clear();
        chunk_state_ = ChunkState::kSize;
        break;
    }
  }
  return used;
}

}  // namespace loom
