// libFuzzer entry point for the HTTP/1.1 request parser (server/http_parser.h), which reads
// untrusted bytes from every client. Any input must end in requests or an error status, never a
// crash; and since the event loop feeds whatever each read() returned, the outcome must not
// depend on where the bytes were split: the input parsed in one piece and byte by byte (and in
// pieces of a size the first byte picks) gives the same requests and the same error. A
// disagreement is a desync, the root of request smuggling.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_parser.h"

namespace {

// What a connection would see: each request's fields, then the error or where parsing stopped.
std::string Outcome(std::string_view input, size_t piece) {
  loom::HttpParserLimits limits;
  limits.max_head_bytes = 2048;  // small caps, so the fuzzer reaches 431 / 413 too
  limits.max_body_bytes = 4096;
  loom::HttpRequestParser parser(limits);
  std::string out;
  size_t at = 0;
  int requests = 0;
  while (requests < 64) {
    const size_t given = std::min(input.size() - at, piece);
    const size_t used = parser.Feed(input.substr(at, given));
    at += used;
    if (parser.state() == loom::HttpRequestParser::State::kError) {
      out += "error " + std::to_string(parser.error_status());
      return out;
    }
    if (parser.state() == loom::HttpRequestParser::State::kComplete) {
      const bool keep_alive = parser.keep_alive();
      const loom::HttpRequest r = parser.Take();
      out += r.method + ' ' + r.target + ' ' + r.path + ' ' + r.query + ' ' + r.version + '\n';
      for (const auto& [name, value] : r.headers) out += name + ": " + value + '\n';
      out += std::to_string(r.body.size()) + ':' + r.body + '\n';
      ++requests;
      if (!keep_alive) break;  // the server closes: the rest is never parsed
      continue;
    }
    if (used != given) std::abort();  // a parser in kHead / kBody consumes all it is given
    if (at == input.size()) break;    // everything fed: waiting for more bytes
  }
  out += "stopped at " + std::to_string(at) + (parser.idle() ? " idle" : " partial");
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 2 + data[0] % 31;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string whole = Outcome(input, input.size() + 1);
  if (Outcome(input, 1) != whole || Outcome(input, piece) != whole) std::abort();
  return 0;
}
