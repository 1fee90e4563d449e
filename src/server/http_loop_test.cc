#include "server/http_loop.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <thread>

#include "base/unique_fd.h"

namespace loom {
namespace {

using namespace std::chrono_literals;

// A loop on 127.0.0.1 with a free port, run on its own thread for the test's life.
class LoopRunner {
 public:
  LoopRunner(HttpLoopOptions options, HttpLoopCallbacks callbacks)
      : loop_(options, std::move(callbacks)) {
    Status s = loop_.Listen("127.0.0.1", 0);
    EXPECT_TRUE(s.ok()) << s.message();
    thread_ = std::thread([this] { loop_.Run(); });
  }
  ~LoopRunner() {
    loop_.Stop();
    thread_.join();
  }
  int port() const { return loop_.port(); }
  HttpLoop& loop() { return loop_; }

 private:
  HttpLoop loop_;
  std::thread thread_;
};

UniqueFd Connect(int port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

void Send(const UniqueFd& fd, std::string_view s) {
  ASSERT_EQ(send(fd.get(), s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
}

// Reads until `until` appears, the peer closes, or `wait` passes; *closed says whether it closed.
std::string Read(const UniqueFd& fd, std::string_view until, std::chrono::milliseconds wait,
                 bool* closed = nullptr) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  if (closed != nullptr) *closed = false;
  while (until.empty() || got.find(until) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd.get(), POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[4096];
    const ssize_t n = recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) {
      if (closed != nullptr) *closed = true;
      break;
    }
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

int CountOf(const std::string& s, std::string_view what) {
  int n = 0;
  for (size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
  return n;
}

// Polls `cond` under `mu` every 5 ms for up to a second; returns its last value.
template <typename Cond>
bool WaitUntil(std::mutex& mu, Cond cond) {
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (cond()) return true;
    }
    std::this_thread::sleep_for(5ms);
  }
  std::lock_guard<std::mutex> lock(mu);
  return cond();
}

HttpLoopCallbacks EchoCallbacks() {
  HttpLoopCallbacks cb;
  cb.handle = [](const HttpRequest& req, HttpResponse& res) {
    res.set_content(req.method + " " + req.path + " [" + req.body + "]", "text/plain");
  };
  cb.on_error = [](int status, const std::string& message, const HttpRequest&, HttpResponse& res) {
    res.status = status;
    res.set_content(message, "text/plain");
  };
  return cb;
}

TEST(HttpLoopTest, AnswersKeepsAliveAndAnswersPipelinedRequestsInOrder) {
  LoopRunner loop({}, EchoCallbacks());
  UniqueFd c = Connect(loop.port());
  Send(c,
       "POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
       "GET /b HTTP/1.1\r\n\r\n");
  const std::string got = Read(c, "GET /b []", 5s);
  EXPECT_EQ(CountOf(got, "HTTP/1.1 200 OK"), 2) << got;
  EXPECT_LT(got.find("POST /a [hi]"), got.find("GET /b []")) << got;
  EXPECT_NE(got.find("Content-Length: 12\r\n"), std::string::npos) << got;
  EXPECT_EQ(CountOf(got, "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n"), 2) << got;
  // Still open for a third.
  Send(c, "GET /c HTTP/1.1\r\nConnection: close\r\n\r\n");
  bool closed = false;
  const std::string last = Read(c, "", 5s, &closed);
  EXPECT_NE(last.find("GET /c []"), std::string::npos) << last;
  EXPECT_NE(last.find("Connection: close"), std::string::npos) << last;
  EXPECT_EQ(last.find("Keep-Alive:"), std::string::npos) << last;
  EXPECT_TRUE(closed);
}

TEST(HttpLoopTest, APartialBodyIsCutOffWith408) {
  HttpLoopOptions o;
  o.body_timeout = 200ms;
  LoopRunner loop(o, EchoCallbacks());
  UniqueFd c = Connect(loop.port());
  const auto t0 = std::chrono::steady_clock::now();
  Send(c, "POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  bool closed = false;
  const std::string got = Read(c, "", 5s, &closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("body stopped arriving"), std::string::npos) << got;
  EXPECT_TRUE(closed);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
}

TEST(HttpLoopTest, PartialHeadersGet408AndSilentConnectionsAreClosed) {
  HttpLoopOptions o;
  o.header_timeout = 200ms;
  LoopRunner loop(o, EchoCallbacks());
  UniqueFd partial = Connect(loop.port());
  UniqueFd silent = Connect(loop.port());
  Send(partial, "GET / HTTP/1.1\r\nHost: a");
  bool closed = false;
  std::string got = Read(partial, "", 5s, &closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
  EXPECT_TRUE(closed);
  got = Read(silent, "", 5s, &closed);
  EXPECT_EQ(got, "");
  EXPECT_TRUE(closed);
}

TEST(HttpLoopTest, ConnectionsOverTheCapGet503) {
  HttpLoopOptions o;
  o.max_connections = 2;
  LoopRunner loop(o, EchoCallbacks());
  UniqueFd a = Connect(loop.port());
  UniqueFd b = Connect(loop.port());
  for (const UniqueFd* c : {&a, &b}) {  // both accepted and answered: they hold the two places
    Send(*c, "GET /k HTTP/1.1\r\n\r\n");
    EXPECT_NE(Read(*c, "GET /k []", 5s).find("200 OK"), std::string::npos);
  }
  EXPECT_EQ(loop.loop().num_connections(), 2);
  UniqueFd over = Connect(loop.port());
  bool closed = false;
  const std::string got = Read(over, "", 5s, &closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 503", 0), 0u) << got;
  EXPECT_TRUE(closed);
  a.reset();  // a place frees up
  for (int i = 0; i < 100 && loop.loop().num_connections() > 1; ++i)
    std::this_thread::sleep_for(10ms);
  UniqueFd next = Connect(loop.port());
  Send(next, "GET /n HTTP/1.1\r\n\r\n");
  EXPECT_NE(Read(next, "GET /n []", 5s).find("200 OK"), std::string::npos);
}

TEST(HttpLoopTest, ARefusedRequestsBodyIsDroppedNotServed) {
  std::atomic<int> handled{0};
  HttpLoopCallbacks cb = EchoCallbacks();
  cb.on_head = [](HttpRequest& req, HttpResponse& res) {
    if (req.path != "/refuse") return true;
    res.status = 403;
    res.set_content("no", "text/plain");
    return false;
  };
  auto echo = cb.handle;
  cb.handle = [&handled, echo](const HttpRequest& req, HttpResponse& res) {
    ++handled;
    echo(req, res);
  };
  LoopRunner loop({}, cb);
  UniqueFd c = Connect(loop.port());
  const std::string inner = "GET /inner HTTP/1.1\r\n\r\n";
  Send(c, "POST /refuse HTTP/1.1\r\nContent-Length: " + std::to_string(inner.size()) + "\r\n\r\n");
  std::this_thread::sleep_for(50ms);
  Send(c, inner);
  Send(c, "GET /after HTTP/1.1\r\n\r\n");
  const std::string got = Read(c, "GET /after []", 5s);
  EXPECT_EQ(CountOf(got, "HTTP/1.1 "), 2) << got;
  EXPECT_EQ(got.rfind("HTTP/1.1 403", 0), 0u) << got;
  EXPECT_EQ(got.find("/inner"), std::string::npos) << got;
  EXPECT_EQ(handled.load(), 1);
}

// A stream that writes "start", then one "tick" per Wake() from another thread, then ends.
class FakeStream : public HttpBodyStream {
 public:
  struct Shared {
    std::mutex mu;
    std::function<void()> wake;
    int ticks = 0;  // produced, not yet written
    bool end = false;
    bool released = false;
    bool finished = false;
  };
  explicit FakeStream(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  void SetWakeup(std::function<void()> wake) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->wake = std::move(wake);
  }
  Step Pump(const Writer& write) override {
    std::unique_lock<std::mutex> lock(s_->mu);
    if (!started_) {
      started_ = true;
      write("start;");
      return Step::kContinue;
    }
    std::string out;
    for (; s_->ticks > 0; --s_->ticks) out += "tick;";
    if (!out.empty()) write(out);
    if (s_->end && s_->ticks == 0) {
      s_->finished = true;
      return Step::kDone;
    }
    return Step::kContinue;
  }
  void Release() override {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->released = true;
  }
  static void Produce(Shared& s, bool end) {
    std::function<void()> wake;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.ticks;
      s.end = end;
      wake = s.wake;
    }
    if (wake) wake();
  }

 private:
  std::shared_ptr<Shared> s_;
  bool started_ = false;
};

TEST(HttpLoopTest, AStreamIsPumpedWhenItWakesTheLoop) {
  auto shared = std::make_shared<FakeStream::Shared>();
  HttpLoopCallbacks cb = EchoCallbacks();
  cb.handle = [shared](const HttpRequest&, HttpResponse& res) {
    res.set_header("Content-Type", "text/event-stream");
    res.stream = std::make_unique<FakeStream>(shared);
  };
  LoopRunner loop({}, cb);
  UniqueFd c = Connect(loop.port());
  Send(c, "GET /s HTTP/1.1\r\n\r\n");
  std::string got = Read(c, "start;\r\n", 5s);
  EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
  FakeStream::Produce(*shared, false);
  // Well within the loop's 100 ms tick: the wake-up, not the timer, delivered it.
  const auto t0 = std::chrono::steady_clock::now();
  got = Read(c, "tick;\r\n", 5s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 80ms);
  EXPECT_EQ(got, "5\r\ntick;\r\n");
  FakeStream::Produce(*shared, true);
  got = Read(c, "0\r\n\r\n", 5s);
  EXPECT_EQ(got, "5\r\ntick;\r\n0\r\n\r\n");
  std::lock_guard<std::mutex> lock(shared->mu);
  EXPECT_TRUE(shared->finished);
  EXPECT_TRUE(shared->released);
}

TEST(HttpLoopTest, AClientThatLeavesReleasesItsStream) {
  auto shared = std::make_shared<FakeStream::Shared>();
  HttpLoopCallbacks cb = EchoCallbacks();
  cb.handle = [shared](const HttpRequest&, HttpResponse& res) {
    res.stream = std::make_unique<FakeStream>(shared);
  };
  LoopRunner loop({}, cb);
  {
    UniqueFd c = Connect(loop.port());
    Send(c, "GET /s HTTP/1.1\r\n\r\n");
    Read(c, "start;\r\n", 5s);
  }
  EXPECT_TRUE(WaitUntil(shared->mu, [&] { return shared->released; }));
  std::lock_guard<std::mutex> lock(shared->mu);
  EXPECT_FALSE(shared->finished);
}

// A deferred response that completes once Complete() is called from another thread.
class FakeDeferred : public HttpDeferredResponse {
 public:
  struct Shared {
    std::mutex mu;
    std::function<void()> wake;
    bool ready = false;
    bool released = false;
    int polls = 0;
  };
  explicit FakeDeferred(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  void SetWakeup(std::function<void()> wake) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->wake = std::move(wake);
  }
  bool Poll(HttpResponse& res) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    ++s_->polls;
    if (!s_->ready) return false;
    res.status = 201;
    res.set_content("done after " + res.get_header_value("X-Set-Before"), "text/plain");
    return true;
  }
  void Release() override {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->released = true;
  }
  static void Complete(Shared& s) {
    std::function<void()> wake;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.ready = true;
      wake = s.wake;
    }
    if (wake) wake();
  }

 private:
  std::shared_ptr<Shared> s_;
};

TEST(HttpLoopTest, ADeferredResponseIsSentWholeWhenItCompletesWithoutAWorker) {
  auto shared = std::make_shared<FakeDeferred::Shared>();
  std::atomic<int> handled{0};
  HttpLoopCallbacks cb = EchoCallbacks();
  cb.handle = [shared, &handled](const HttpRequest& req, HttpResponse& res) {
    ++handled;
    if (req.path != "/d") return res.set_content("plain", "text/plain");
    res.set_header("X-Set-Before", "the handler");
    res.deferred = std::make_unique<FakeDeferred>(shared);
  };
  HttpLoopOptions options;
  options.num_workers = 1;  // the deferred request must not hold it
  LoopRunner loop(options, cb);
  UniqueFd c = Connect(loop.port());
  Send(c, "GET /d HTTP/1.1\r\n\r\n");
  EXPECT_EQ(Read(c, "", 200ms), "");  // nothing until it completes
  // The only worker is free: another connection is answered meanwhile.
  UniqueFd other = Connect(loop.port());
  Send(other, "GET /p HTTP/1.1\r\n\r\n");
  EXPECT_NE(Read(other, "plain", 5s).find("plain"), std::string::npos);
  FakeDeferred::Complete(*shared);
  const auto t0 = std::chrono::steady_clock::now();
  std::string got = Read(c, "the handler", 5s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 80ms);  // the wake, not the 100 ms sweep
  EXPECT_NE(got.find("HTTP/1.1 201"), std::string::npos) << got;
  EXPECT_NE(got.find("X-Set-Before: the handler"), std::string::npos) << got;
  EXPECT_NE(got.find("Content-Length: 22"), std::string::npos) << got;
  EXPECT_NE(got.find("done after the handler"), std::string::npos) << got;
  // Kept alive: the next request on the same connection is served.
  Send(c, "GET /p HTTP/1.1\r\n\r\n");
  EXPECT_NE(Read(c, "plain", 5s).find("plain"), std::string::npos);
  std::lock_guard<std::mutex> lock(shared->mu);
  EXPECT_TRUE(shared->released);
  EXPECT_EQ(handled.load(), 3);
}

TEST(HttpLoopTest, AClientThatLeavesReleasesItsDeferredResponse) {
  auto shared = std::make_shared<FakeDeferred::Shared>();
  HttpLoopCallbacks cb = EchoCallbacks();
  cb.handle = [shared](const HttpRequest&, HttpResponse& res) {
    res.deferred = std::make_unique<FakeDeferred>(shared);
  };
  LoopRunner loop({}, cb);
  {
    UniqueFd c = Connect(loop.port());
    Send(c, "GET /d HTTP/1.1\r\n\r\n");
    // Until the loop polled it once.
    EXPECT_TRUE(WaitUntil(shared->mu, [&] { return shared->polls > 0; }));
  }
  EXPECT_TRUE(WaitUntil(shared->mu, [&] { return shared->released; }));
  std::lock_guard<std::mutex> lock(shared->mu);
  EXPECT_FALSE(shared->ready);
}

}  // namespace
}  // namespace loom
