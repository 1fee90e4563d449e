#include "server/http_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace loom {
namespace {

using State = HttpRequestParser::State;

struct Parsed {
  State state = State::kHead;
  size_t consumed = 0;
  HttpRequest req;
  int error = 0;
  bool keep_alive = false;
};

// Feeds `raw` in pieces cut at `cuts` (ascending offsets); stops at the end of the first request.
Parsed ParseInPieces(std::string_view raw, const std::vector<size_t>& cuts,
                     HttpParserLimits limits = {}) {
  HttpRequestParser p(limits);
  Parsed out;
  size_t from = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(raw.size());
  for (size_t end : ends) {
    // Like the event loop: what the parser leaves of a piece is offered again with the next one.
    while (from < end && (p.state() == State::kHead || p.state() == State::kBody)) {
      const size_t n = p.Feed(raw.substr(from, end - from));
      from += n;
      if (n == 0) break;
    }
  }
  out.state = p.state();
  out.consumed = from;
  out.error = p.error_status();
  if (p.head_done()) out.keep_alive = p.keep_alive();
  if (p.state() == State::kComplete) out.req = p.Take();
  return out;
}

Parsed ParseWhole(std::string_view raw, HttpParserLimits limits = {}) {
  return ParseInPieces(raw, {}, limits);
}

struct ValidCase {
  std::string name;
  std::string raw;  // one request, then "NEXT" (what must stay unread)
  std::string method, path, query, body;
  bool keep_alive;
};

const std::vector<ValidCase>& ValidCases() {
  static const std::vector<ValidCase> cases = {
      {"get", "GET /health HTTP/1.1\r\nHost: a\r\n\r\nNEXT", "GET", "/health", "", "", true},
      {"query and escapes", "GET /v1/responses/r%5Fx?beta=true HTTP/1.1\r\nHost: a\r\n\r\nNEXT",
       "GET", "/v1/responses/r_x", "beta=true", "", true},
      {"content-length",
       "POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n{\"a\":\"bcd\"}NEXT",
       "POST", "/v1/completions", "", "{\"a\":\"bcd\"}", true},
      {"zero length", "POST /x HTTP/1.1\r\nContent-Length: 0\r\n\r\nNEXT", "POST", "/x", "", "",
       true},
      {"chunked with extension and trailer",
       "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
       "4;ext=1\r\nWiki\r\nA\r\npedia in 1\r\n0\r\nX-Trailer: t\r\n\r\nNEXT",
       "POST", "/x", "", "Wikipedia in 1", true},
      {"connection close", "GET / HTTP/1.1\r\nConnection: close\r\n\r\nNEXT", "GET", "/", "", "",
       false},
      {"http/1.0 closes", "GET / HTTP/1.0\r\n\r\nNEXT", "GET", "/", "", "", false},
      {"http/1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nNEXT", "GET", "/",
       "", "", true},
      {"ows around values", "GET / HTTP/1.1\r\nX-A: \t v \t\r\nContent-Length:  2 \r\n\r\nhiNEXT",
       "GET", "/", "", "hi", true},
      {"leading blank line", "\r\nGET / HTTP/1.1\r\n\r\nNEXT", "GET", "/", "", "", true},
  };
  return cases;
}

void ExpectRequest(const ValidCase& c, const Parsed& got, const std::string& how) {
  SCOPED_TRACE(c.name + " " + how);
  ASSERT_EQ(got.state, State::kComplete);
  EXPECT_EQ(got.consumed, c.raw.size() - 4);  // "NEXT" is the next request's
  EXPECT_EQ(got.req.method, c.method);
  EXPECT_EQ(got.req.path, c.path);
  EXPECT_EQ(got.req.query, c.query);
  EXPECT_EQ(got.req.body, c.body);
  EXPECT_EQ(got.keep_alive, c.keep_alive);
}

TEST(HttpRequestParserTest, ValidRequestsWhole) {
  for (const ValidCase& c : ValidCases()) ExpectRequest(c, ParseWhole(c.raw), "whole");
}

TEST(HttpRequestParserTest, ValidRequestsSplitAtEveryByte) {
  for (const ValidCase& c : ValidCases()) {
    for (size_t cut = 1; cut < c.raw.size(); ++cut) {
      ExpectRequest(c, ParseInPieces(c.raw, {cut}), "cut at " + std::to_string(cut));
    }
    std::vector<size_t> every;
    for (size_t i = 1; i < c.raw.size(); ++i) every.push_back(i);
    ExpectRequest(c, ParseInPieces(c.raw, every), "one byte at a time");
  }
}

TEST(HttpRequestParserTest, HeadersAreCaseInsensitiveAndKeepTheirValues) {
  Parsed p = ParseWhole("GET / HTTP/1.1\r\nhOsT: 127.0.0.1:8080\r\nX-A: 1\r\nx-a: 2\r\n\r\n");
  ASSERT_EQ(p.state, State::kComplete);
  EXPECT_EQ(p.req.get_header_value("Host"), "127.0.0.1:8080");
  EXPECT_EQ(p.req.headers.count("X-A"), 2u);
  EXPECT_FALSE(p.req.has_header("Origin"));
}

TEST(HttpRequestParserTest, IncompleteRequestsWait) {
  EXPECT_EQ(ParseWhole("GET / HTTP/1.1\r\nHost: a\r\n").state, State::kHead);
  Parsed body = ParseWhole("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n12345");
  EXPECT_EQ(body.state, State::kBody);
  EXPECT_EQ(ParseWhole("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab").state,
            State::kBody);
}

struct BadCase {
  std::string name;
  std::string raw;
  int status;
};

TEST(HttpRequestParserTest, BadRequestsGetTheirStatus) {
  const std::string big_header = "X-Big: " + std::string(90 << 10, 'b') + "\r\n";
  const std::vector<BadCase> cases = {
      {"no version", "GET /\r\n\r\n", 400},
      {"extra space", "GET  / HTTP/1.1\r\n\r\n", 400},
      {"lower-case version", "GET / http/1.1\r\n\r\n", 400},
      {"http/2", "GET / HTTP/2.0\r\n\r\n", 505},
      {"unknown method", "BREW /pot HTTP/1.1\r\n\r\n", 501},
      {"method not a token", "G(T / HTTP/1.1\r\n\r\n", 400},
      {"absolute target", "GET http://a/ HTTP/1.1\r\n\r\n", 400},
      {"control in target", std::string("GET /a\x01 HTTP/1.1\r\n\r\n"), 400},
      {"bare LF", "GET / HTTP/1.1\nHost: a\n\n", 400},
      {"space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400},
      {"no colon", "GET / HTTP/1.1\r\nHost a\r\n\r\n", 400},
      {"obs-fold", "GET / HTTP/1.1\r\nX-A: 1\r\n 2\r\n\r\n", 400},
      {"control in value", std::string("GET / HTTP/1.1\r\nX-A: a\x7f\r\n\r\n"), 400},
      {"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
      {"content-length not a number", "POST / HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n", 400},
      {"negative content-length", "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"content-length list", "POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\nx", 400},
      {"conflicting content-lengths",
       "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 400},
      {"content-length with transfer-encoding",
       "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"gzip transfer-encoding", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
       501},
      {"transfer-encoding on 1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"bad chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"chunk without CRLF",
       "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n0\r\n\r\n", 400},
      {"head over the cap", "GET / HTTP/1.1\r\n" + big_header + "\r\n", 431},
      {"unterminated head over the cap", "GET / HTTP/1.1\r\n" + big_header, 431},
      {"body over the cap", "POST / HTTP/1.1\r\nContent-Length: 2048\r\n\r\n", 413},
      {"chunked body over the cap", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n801\r\n",
       413},
  };
  HttpParserLimits limits;
  limits.max_body_bytes = 2047;
  for (const BadCase& c : cases) {
    Parsed whole = ParseWhole(c.raw, limits);
    EXPECT_EQ(whole.state, State::kError) << c.name;
    EXPECT_EQ(whole.error, c.status) << c.name;
    // Split anywhere, the verdict is the same.
    for (size_t cut = 1; cut < std::min<size_t>(c.raw.size(), 200); ++cut) {
      Parsed split = ParseInPieces(c.raw, {cut}, limits);
      EXPECT_EQ(split.error, c.status) << c.name << " cut at " << cut;
    }
  }
}

TEST(HttpRequestParserTest, PipelinedRequestsParseOneAfterAnother) {
  const std::string raw =
      "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\n\r\n"
      "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n";
  HttpRequestParser p;
  std::string_view rest = raw;
  std::vector<std::string> got;
  while (!rest.empty()) {
    rest.remove_prefix(p.Feed(rest));
    ASSERT_EQ(p.state(), State::kComplete);
    HttpRequest r = p.Take();
    got.push_back(r.method + " " + r.path + " " + r.body);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"POST /a abc", "GET /b ", "POST /c z"}));
}

TEST(HttpRequestParserTest, DiscardedBodiesAreConsumedNotKept) {
  HttpRequestParser p;
  const std::string raw = "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
  size_t used = p.Feed(std::string_view(raw).substr(0, raw.size() - 5));
  ASSERT_TRUE(p.head_done());
  p.DiscardBody();
  used += p.Feed(std::string_view(raw).substr(used));
  EXPECT_EQ(used, raw.size());
  ASSERT_EQ(p.state(), State::kComplete);
  EXPECT_EQ(p.Take().body, "");
}

TEST(HttpRequestParserTest, ExpectContinueIsReported) {
  HttpRequestParser p;
  p.Feed("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  ASSERT_EQ(p.state(), State::kBody);
  EXPECT_TRUE(p.expects_continue());
  HttpRequestParser q;
  q.Feed("GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n");  // no body: nothing to wait for
  EXPECT_FALSE(q.expects_continue());
}

}  // namespace
}  // namespace loom
