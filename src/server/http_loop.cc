#include "server/http_loop.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/logging.h"
#include "base/thread_pool.h"
#include "base/unique_fd.h"
#include "server/http_parser.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kListenerKey = 0;
constexpr uint64_t kMailboxKey = 1;
constexpr uint64_t kFirstConnectionId = 2;
constexpr auto kTick = std::chrono::milliseconds(100);         // deadlines and keep-alives
constexpr auto kLingerTime = std::chrono::milliseconds(2000);  // draining a closed exchange
constexpr size_t kReadChunkBytes = 64 << 10;
constexpr size_t kStreamLowWaterBytes = 64 << 10;
constexpr int kMaxLingering = 1024;  // closes in progress beyond the connection cap

// Handed from worker threads and the engine's stream callbacks to the loop: finished handlers
// and streams with new output. Shared, so a callback that runs after the loop is gone is harmless.
class Mailbox {
 public:
  struct Completion {
    uint64_t conn_id;
    HttpRequest req;
    HttpResponse res;
  };

  Mailbox() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    CHECK(fd_.valid()) << "eventfd: " << std::strerror(errno);
  }
  int fd() const { return fd_.get(); }

  void Wake(uint64_t conn_id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    woken_.push_back(conn_id);
    SignalLocked();
  }
  // Returns false (and leaves `c` with the caller) once the loop has stopped.
  bool Complete(Completion& c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    done_.push_back(std::move(c));
    SignalLocked();
    return true;
  }
  void Take(std::vector<uint64_t>* woken, std::vector<Completion>* done) {
    uint64_t n;
    while (read(fd_.get(), &n, sizeof n) > 0) {
    }
    std::lock_guard<std::mutex> lock(mu_);
    signaled_ = false;
    woken->swap(woken_);
    done->swap(done_);
  }
  // Wakes the loop without work (Stop).
  void Poke() {
    std::lock_guard<std::mutex> lock(mu_);
    SignalLocked();
  }
  // Later Wake / Complete calls are dropped; returns what was still queued.
  std::vector<Completion> Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    return std::move(done_);
  }

 private:
  void SignalLocked() {
    if (signaled_) return;
    signaled_ = true;
    const uint64_t one = 1;
    (void)!write(fd_.get(), &one, sizeof one);
  }

  UniqueFd fd_;
  std::mutex mu_;
  bool signaled_ = false;
  bool closed_ = false;
  std::vector<uint64_t> woken_;
  std::vector<Completion> done_;
};

// kDefer: the handler returned a deferred response (HttpDeferredResponse) that is not complete yet.
enum class Phase { kRead, kWait, kDefer, kWrite, kStream, kLinger };

struct Connection {
  uint64_t id = 0;
  UniqueFd fd;
  std::string remote_addr;
  int remote_port = -1;
  Phase phase = Phase::kRead;
  Clock::time_point deadline;
  bool first_request = true;
  bool counted = false;   // in num_connections (not over the cap, not lingering)
  bool paused = false;    // kStream: stopped pumping above kStreamHighWaterBytes
  uint32_t interest = 0;  // what epoll watches now

  std::string in;  // received, not yet parsed: in[in_pos...]
  size_t in_pos = 0;
  std::string out;  // to send: out[out_pos...]
  size_t out_pos = 0;
  Clock::time_point last_write_progress;

  HttpRequestParser parser;
  bool head_seen = false;  // on_head ran for the request being read
  bool refused = false;    // on_head refused it: `res` is the answer
  bool keep_alive = true;
  bool head_method = false;
  bool chunked_out = true;
  HttpResponse res;
  HttpRequest req;  // kWait .. done: the request (its body dropped once handled)
  size_t body_bytes = 0;
  std::shared_ptr<std::atomic<bool>> gone = std::make_shared<std::atomic<bool>>(false);

  std::unique_ptr<HttpBodyStream> stream;          // kStream
  std::unique_ptr<HttpDeferredResponse> deferred;  // kDefer
  std::shared_ptr<std::atomic<bool>> wake_queued;

  explicit Connection(HttpParserLimits limits) : parser(limits) {}
  size_t unsent() const { return out.size() - out_pos; }
};

std::string AddressText(const sockaddr_storage& a, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
    *port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
    *port = ntohs(v6->sin6_port);
  }
  return buf;
}

}  // namespace

int64_t RaiseFileLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return -1;
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised = r;
    raised.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  return r.rlim_cur == RLIM_INFINITY ? INT64_MAX : static_cast<int64_t>(r.rlim_cur);
}

class HttpLoop::Impl {
 public:
  Impl(HttpLoop* owner, HttpLoopOptions options, HttpLoopCallbacks callbacks)
      : owner_(owner),
        options_(options),
        callbacks_(std::move(callbacks)),
        epoll_(epoll_create1(EPOLL_CLOEXEC)),
        mailbox_(std::make_shared<Mailbox>()),
        spare_fd_(open("/dev/null", O_RDONLY | O_CLOEXEC)),
        workers_(static_cast<size_t>(options.num_workers)) {
    CHECK(epoll_.valid()) << "epoll_create1: " << std::strerror(errno);
    Watch(mailbox_->fd(), kMailboxKey, EPOLLIN);
  }

  ~Impl() {
    // Handlers still queued or running finish first: their completions are then dropped.
    for (Mailbox::Completion& c : mailbox_->Close()) ReleaseResponse(c.res);
  }

  Status Listen(const std::string& host, int port, int* bound_port);
  void Run();
  void Stop() {
    stop_.store(true);
    mailbox_->Poke();
  }

 private:
  void Watch(int fd, uint64_t key, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = key;
    CHECK(epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) == 0)
        << "epoll_ctl: " << std::strerror(errno);
  }
  void SetInterest(Connection& c);
  void AcceptAll();
  void OnEvent(Connection& c, uint32_t events);
  void ReadInput(Connection& c);
  void ProcessInput(Connection& c);
  void Dispatch(Connection& c);
  void OnCompletion(Mailbox::Completion& done);
  void StartResponse(Connection& c);
  void PumpStream(Connection& c);
  void PollDeferred(Connection& c);
  // kStream / kDefer: the source said it has news (its wake, or the sweep's timer).
  void OnWake(Connection& c);
  // The wake callback a stream or deferred response gets: one mailbox entry until the loop ran.
  std::function<void()> MakeWake(Connection& c);
  void Flush(Connection& c);
  void AfterResponse(Connection& c);
  void SendError(Connection& c, int status, const std::string& message);
  void Linger(Connection& c);
  void Close(uint64_t id);
  void Sweep(Clock::time_point now);
  void ReleaseResponse(HttpResponse& res) {
    if (res.stream != nullptr) res.stream->Release();
    if (res.deferred != nullptr) res.deferred->Release();
  }
  void Done(Connection& c) {
    if (callbacks_.on_done) callbacks_.on_done(c.req, c.body_bytes, c.res);
  }
  // The Keep-Alive: timeout=N hint of each response (whole seconds of keep_alive_timeout).
  int KeepAliveHintSeconds() const {
    return static_cast<int>(options_.keep_alive_timeout.count() / 1000);
  }

  HttpLoop* owner_;
  HttpLoopOptions options_;
  HttpLoopCallbacks callbacks_;
  UniqueFd epoll_;
  UniqueFd listener_;
  std::shared_ptr<Mailbox> mailbox_;
  UniqueFd spare_fd_;  // given up to accept (and drop) a connection when out of descriptors
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns_;
  uint64_t next_id_ = kFirstConnectionId;
  int num_lingering_ = 0;
  std::atomic<bool> stop_{false};
  ThreadPool workers_;  // last: destroyed (joined) first
};

Status HttpLoop::Impl::Listen(const std::string& host, int port, int* bound_port) {
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    return FailedPreconditionError("cannot listen on " + where + ": " + gai_strerror(rc));
  }
  std::string why = "no address";
  bool in_use = false;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    UniqueFd fd(socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) continue;
    // SO_REUSEADDR only (no SO_REUSEPORT): a second server must fail to bind a busy port.
    int yes = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 ||
        listen(fd.get(), options_.listen_backlog) != 0) {
      in_use = in_use || errno == EADDRINUSE;
      why = std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len);
    AddressText(local, bound_port);
    listener_ = std::move(fd);
    break;
  }
  freeaddrinfo(found);
  if (!listener_.valid()) {
    if (in_use) {
      return FailedPreconditionError("cannot listen on " + where +
                                     ": the port is already in use (or the address is not "
                                     "local); stop the other server or pass --port N");
    }
    return FailedPreconditionError("cannot listen on " + where + ": " + why);
  }
  Watch(listener_.get(), kListenerKey, EPOLLIN);
  return OkStatus();
}

void HttpLoop::Impl::SetInterest(Connection& c) {
  uint32_t want = EPOLLRDHUP;
  switch (c.phase) {
    case Phase::kRead:
    case Phase::kLinger:
      want |= EPOLLIN;
      break;
    case Phase::kWait:
    case Phase::kDefer:
    case Phase::kWrite:
    case Phase::kStream:
      break;
  }
  if (c.unsent() > 0) want |= EPOLLOUT;
  if (want == c.interest) return;
  c.interest = want;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
}

void HttpLoop::Impl::AcceptAll() {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    UniqueFd fd(accept4(listener_.get(), reinterpret_cast<sockaddr*>(&peer), &len,
                        SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && spare_fd_.valid()) {
        // Out of descriptors: a level-triggered listener would spin. Take the connection with
        // the spare descriptor and close it at once (the client sees a reset, not a hang).
        LOG(WARNING) << "out of file descriptors (" << owner_->num_connections()
                     << " connections); refusing new ones";
        spare_fd_.reset();
        UniqueFd drop(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        drop.reset();
        spare_fd_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
        continue;
      }
      return;  // EAGAIN: all taken
    }
    int yes = 1;
    // Streams write one small event per token: without TCP_NODELAY an event written while the
    // previous one is unacknowledged waits for the client's delayed ACK (up to 40 ms).
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    auto c = std::make_unique<Connection>(
        HttpParserLimits{options_.max_head_bytes, options_.max_body_bytes});
    c->id = next_id_++;
    c->fd = std::move(fd);
    c->remote_addr = AddressText(peer, &c->remote_port);
    c->deadline = Clock::now() + options_.header_timeout;
    c->interest = EPOLLIN | EPOLLRDHUP;
    Watch(c->fd.get(), c->id, c->interest);
    Connection& conn = *c;
    conns_.emplace(c->id, std::move(c));
    if (owner_->num_connections() >= options_.max_connections) {
      if (num_lingering_ >= kMaxLingering) {
        conns_.erase(conn.id);
        continue;
      }
      SendError(conn, 503,
                "the server has " + std::to_string(owner_->num_connections()) +
                    " open connections (--max-connections " +
                    std::to_string(options_.max_connections) + "); retry later");
      continue;
    }
    conn.counted = true;
    owner_->num_connections_.fetch_add(1);
  }
}

void HttpLoop::Impl::OnEvent(Connection& c, uint32_t events) {
  const uint64_t id = c.id;
  const bool hangup = (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
  if ((events & EPOLLOUT) != 0) {
    Flush(c);
    if (conns_.count(id) == 0) return;
    if (c.phase == Phase::kStream && c.paused && c.unsent() < kStreamLowWaterBytes) {
      PumpStream(c);  // the slow reader caught up
      if (conns_.count(id) == 0) return;
    }
  }
  switch (c.phase) {
    case Phase::kRead:
    case Phase::kLinger:
      if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) ReadInput(c);
      return;
    case Phase::kWait:
    case Phase::kDefer:
      if (hangup) {
        // kWait: the handler keeps running until it notices; stop watching (a hung-up socket
        // stays readable) and drop the connection: its completion will find nothing. kDefer:
        // Close releases the deferred response, which aborts its generation.
        Close(id);
      }
      return;
    case Phase::kWrite:
    case Phase::kStream:
      if (hangup) Close(id);
      return;
  }
}

void HttpLoop::Impl::ReadInput(Connection& c) {
  const uint64_t id = c.id;
  size_t total = 0;
  while (total < 4 * kReadChunkBytes) {
    if (c.in_pos == c.in.size()) {
      c.in.clear();
      c.in_pos = 0;
    }
    const size_t old = c.in.size();
    c.in.resize(old + kReadChunkBytes);
    const ssize_t n = recv(c.fd.get(), c.in.data() + old, kReadChunkBytes, 0);
    c.in.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // end of file or reset
      if (c.phase == Phase::kRead && !c.parser.idle()) {
        LOG(INFO) << c.remote_addr << " closed the connection mid-request";
      }
      return Close(id);
    }
    total += static_cast<size_t>(n);
    if (c.phase == Phase::kLinger) {
      c.in.clear();
      continue;
    }
    if (c.parser.head_done()) c.deadline = Clock::now() + options_.body_timeout;
    ProcessInput(c);
    if (conns_.count(id) == 0 || c.phase != Phase::kRead) return;
  }
}

void HttpLoop::Impl::ProcessInput(Connection& c) {
  while (c.phase == Phase::kRead) {
    const HttpRequestParser::State before = c.parser.state();
    if (before == HttpRequestParser::State::kHead || before == HttpRequestParser::State::kBody) {
      if (c.in_pos == c.in.size()) break;
      const bool was_idle = c.parser.idle();
      c.in_pos += c.parser.Feed(std::string_view(c.in).substr(c.in_pos));
      if (was_idle && !c.parser.idle() && !c.parser.head_done()) {
        c.deadline = Clock::now() + options_.header_timeout;
      }
    }
    const HttpRequestParser::State state = c.parser.state();
    if (state == HttpRequestParser::State::kError) {
      c.req = std::move(c.parser.request());
      return SendError(c, c.parser.error_status(), c.parser.error_message());
    }
    if (c.parser.head_done() && !c.head_seen) {
      c.head_seen = true;
      c.deadline = Clock::now() + options_.body_timeout;
      c.keep_alive = c.parser.keep_alive();
      HttpRequest& req = c.parser.request();
      req.remote_addr = c.remote_addr;
      req.remote_port = c.remote_port;
      req.client_gone = c.gone;
      c.head_method = req.method == "HEAD";
      c.chunked_out = req.version == "HTTP/1.1";
      c.res = HttpResponse();
      c.refused = callbacks_.on_head && !callbacks_.on_head(req, c.res);
      if (c.refused) {
        c.parser.DiscardBody();
        if (c.parser.expects_continue()) {  // the client waits for us: answer, then close
          c.keep_alive = false;
          c.req = std::move(req);
          c.phase = Phase::kWrite;
          return StartResponse(c);
        }
      } else if (c.parser.expects_continue()) {
        c.out += "HTTP/1.1 100 Continue\r\n\r\n";
        Flush(c);
        return;  // the body comes after the client reads it; ReadInput resumes
      }
    }
    if (state == HttpRequestParser::State::kComplete) {
      c.req = c.parser.Take();
      c.head_seen = false;
      c.first_request = false;
      c.body_bytes = c.req.body.size();
      if (c.refused) {
        c.phase = Phase::kWrite;
        return StartResponse(c);
      }
      return Dispatch(c);
    }
    if (state == before && c.in_pos == c.in.size()) break;
  }
  if (c.in_pos == c.in.size()) {
    c.in.clear();
    c.in_pos = 0;
  }
  SetInterest(c);
}

void HttpLoop::Impl::Dispatch(Connection& c) {
  c.phase = Phase::kWait;
  SetInterest(c);
  auto req = std::make_shared<HttpRequest>(std::move(c.req));
  auto res = std::make_shared<HttpResponse>(std::move(c.res));
  c.req = HttpRequest();
  c.res = HttpResponse();
  workers_.Submit([this, id = c.id, req, res] {
    try {
      callbacks_.handle(*req, *res);
    } catch (...) {  // the handler's own exception handling failed: still answer
      res->stream.reset();
      res->deferred.reset();
      res->status = 500;
      res->body.clear();
    }
    req->body.clear();
    req->body.shrink_to_fit();
    Mailbox::Completion done{id, std::move(*req), std::move(*res)};
    if (!mailbox_->Complete(done)) ReleaseResponse(done.res);
  });
}

void HttpLoop::Impl::OnCompletion(Mailbox::Completion& done) {
  auto it = conns_.find(done.conn_id);
  if (it == conns_.end()) {  // the client left while the handler ran
    if (done.res.stream != nullptr || done.res.deferred != nullptr) {
      ReleaseResponse(done.res);
      if (callbacks_.on_done) callbacks_.on_done(done.req, 0, done.res);
    }
    return;
  }
  Connection& c = *it->second;
  c.req = std::move(done.req);
  c.res = std::move(done.res);
  StartResponse(c);
}

std::function<void()> HttpLoop::Impl::MakeWake(Connection& c) {
  c.wake_queued = std::make_shared<std::atomic<bool>>(true);
  std::weak_ptr<Mailbox> mailbox = mailbox_;
  return [mailbox, queued = c.wake_queued, id = c.id] {
    if (queued->exchange(true)) return;
    if (auto m = mailbox.lock()) m->Wake(id);
  };
}

void HttpLoop::Impl::StartResponse(Connection& c) {
  if (c.res.deferred != nullptr) {
    c.deferred = std::move(c.res.deferred);
    c.phase = Phase::kDefer;
    c.deferred->SetWakeup(MakeWake(c));
    c.wake_queued->store(false);
    SetInterest(c);
    return PollDeferred(c);
  }
  if (c.res.stream != nullptr) {
    if (!c.chunked_out) c.keep_alive = false;  // HTTP/1.0: the close ends the body
    c.out += SerializeResponseHead(c.res, c.keep_alive, c.chunked_out, KeepAliveHintSeconds());
    c.stream = std::move(c.res.stream);
    c.phase = Phase::kStream;
    c.stream->SetWakeup(MakeWake(c));
    c.wake_queued->store(false);
    c.last_write_progress = Clock::now();
    return PumpStream(c);
  }
  c.out += SerializeResponseHead(c.res, c.keep_alive, c.chunked_out, KeepAliveHintSeconds());
  if (!c.head_method) c.out += c.res.body;
  c.phase = Phase::kWrite;
  c.last_write_progress = Clock::now();
  Flush(c);
}

void HttpLoop::Impl::PollDeferred(Connection& c) {
  if (!c.deferred->Poll(c.res)) return;
  c.deferred->Release();
  c.deferred.reset();
  c.res.stream.reset();  // an answer is a whole body
  c.res.deferred.reset();
  StartResponse(c);
}

void HttpLoop::Impl::OnWake(Connection& c) {
  if (c.phase == Phase::kStream) {
    c.wake_queued->store(false);
    PumpStream(c);
  } else if (c.phase == Phase::kDefer) {
    c.wake_queued->store(false);
    PollDeferred(c);
  }
}

void HttpLoop::Impl::PumpStream(Connection& c) {
  bool ended = false;
  for (int i = 0; i < 8 && c.unsent() < kStreamHighWaterBytes; ++i) {
    bool wrote = false;
    const HttpBodyStream::Step step = c.stream->Pump([&](std::string_view s) {
      if (s.empty()) return true;
      wrote = true;
      if (c.head_method) return true;
      if (c.chunked_out) {
        char size[24];
        std::snprintf(size, sizeof size, "%zx\r\n", s.size());
        c.out += size;
        c.out.append(s);
        c.out += "\r\n";
      } else {
        c.out.append(s);
      }
      return true;
    });
    if (step != HttpBodyStream::Step::kContinue) {
      ended = true;
      break;
    }
    if (!wrote) break;
  }
  c.paused = !ended && c.unsent() >= kStreamHighWaterBytes;
  if (ended) {
    if (c.chunked_out && !c.head_method) c.out += "0\r\n\r\n";
    c.stream->Release();
    c.stream.reset();
    c.phase = Phase::kWrite;
  }
  Flush(c);
}

void HttpLoop::Impl::Flush(Connection& c) {
  const uint64_t id = c.id;
  while (c.unsent() > 0) {
    const ssize_t n = send(c.fd.get(), c.out.data() + c.out_pos, c.unsent(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out_pos += static_cast<size_t>(n);
      c.last_write_progress = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return Close(id);  // the client is gone
  }
  if (c.out_pos == c.out.size()) {
    c.out.clear();
    c.out_pos = 0;
  } else if (c.out_pos > (1 << 20) && c.out_pos > c.out.size() / 2) {
    c.out.erase(0, c.out_pos);
    c.out_pos = 0;
  }
  if (c.phase == Phase::kWrite && c.unsent() == 0) return AfterResponse(c);
  SetInterest(c);
}

void HttpLoop::Impl::AfterResponse(Connection& c) {
  Done(c);
  c.req = HttpRequest();
  c.res = HttpResponse();
  if (!c.keep_alive || stop_.load()) return Linger(c);
  c.phase = Phase::kRead;
  c.refused = false;
  c.deadline = Clock::now() + options_.keep_alive_timeout;
  ProcessInput(c);  // a pipelined request may be waiting
}

void HttpLoop::Impl::SendError(Connection& c, int status, const std::string& message) {
  c.res = HttpResponse();
  if (callbacks_.on_error) {
    callbacks_.on_error(status, message, c.req, c.res);
  } else {
    c.res.status = status;
    c.res.set_content(message, "text/plain");
  }
  c.keep_alive = false;
  c.head_method = false;
  c.body_bytes = 0;
  c.phase = Phase::kWrite;
  StartResponse(c);
}

void HttpLoop::Impl::Linger(Connection& c) {
  // Unread input at close() would make the kernel send a reset, which can destroy the answer
  // before the client reads it; so shut down our side and read until the client closes.
  shutdown(c.fd.get(), SHUT_WR);
  if (c.counted) {  // a closing connection does not count against the cap
    c.counted = false;
    owner_->num_connections_.fetch_sub(1);
  }
  c.phase = Phase::kLinger;
  c.deadline = Clock::now() + kLingerTime;
  c.in.clear();
  c.in_pos = 0;
  ++num_lingering_;
  SetInterest(c);
}

void HttpLoop::Impl::Close(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Connection& c = *it->second;
  c.gone->store(true);
  if (c.stream != nullptr) {
    c.stream->Release();  // not finished: logs and counts the disconnect, aborts the request
    c.stream.reset();
    Done(c);
  }
  if (c.deferred != nullptr) {
    c.deferred->Release();  // not complete: the same
    c.deferred.reset();
    Done(c);
  }
  if (c.phase == Phase::kLinger) --num_lingering_;
  if (c.counted) owner_->num_connections_.fetch_sub(1);
  conns_.erase(it);
}

void HttpLoop::Impl::Sweep(Clock::time_point now) {
  std::vector<uint64_t> expired;
  std::vector<uint64_t> pump;
  for (auto& [id, c] : conns_) {
    switch (c->phase) {
      case Phase::kRead:
        if (now >= c->deadline) expired.push_back(id);
        break;
      case Phase::kLinger:
        if (now >= c->deadline) expired.push_back(id);
        break;
      case Phase::kWait:
        break;
      case Phase::kDefer:
        pump.push_back(id);  // a missed wake costs at most a tick
        break;
      case Phase::kWrite:
      case Phase::kStream:
        if (c->unsent() > 0 && now - c->last_write_progress >= options_.write_timeout) {
          expired.push_back(id);
        } else if (c->phase == Phase::kStream) {
          pump.push_back(id);  // keep-alives, and a stream paused by a slow reader
        }
        break;
    }
  }
  for (uint64_t id : expired) {
    auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    Connection& c = *it->second;
    if (c.phase == Phase::kRead && !c.parser.idle()) {
      const bool in_body = c.parser.head_done();
      c.req = std::move(c.parser.request());
      SendError(c, 408,
                in_body ? "the request body stopped arriving (no bytes for " +
                              std::to_string(options_.body_timeout.count() / 1000) + " s)"
                        : "the request headers did not arrive within " +
                              std::to_string(options_.header_timeout.count() / 1000) + " s");
    } else {
      if (c.phase == Phase::kWrite || c.phase == Phase::kStream) {
        LOG(WARNING) << c.remote_addr << " read nothing for "
                     << options_.write_timeout.count() / 1000 << " s; dropping the response";
      }
      Close(id);
    }
  }
  for (uint64_t id : pump) {
    auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    Connection& c = *it->second;
    if (c.phase == Phase::kStream) {
      PumpStream(c);
    } else if (c.phase == Phase::kDefer) {
      PollDeferred(c);
    }
  }
}

void HttpLoop::Impl::Run() {
  std::vector<epoll_event> events(512);
  std::vector<uint64_t> woken;
  std::vector<Mailbox::Completion> done;
  Clock::time_point next_sweep = Clock::now() + kTick;
  while (!stop_.load()) {
    const int n = epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()),
                             static_cast<int>(kTick.count()));
    if (n < 0 && errno != EINTR) {
      LOG(ERROR) << "epoll_wait: " << std::strerror(errno);
      break;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t key = events[i].data.u64;
      if (key == kListenerKey) {
        AcceptAll();
      } else if (key == kMailboxKey) {
        woken.clear();
        done.clear();
        mailbox_->Take(&woken, &done);
        for (Mailbox::Completion& d : done) OnCompletion(d);
        for (uint64_t id : woken) {
          auto it = conns_.find(id);
          if (it != conns_.end()) OnWake(*it->second);
        }
      } else if (auto it = conns_.find(key); it != conns_.end()) {
        OnEvent(*it->second, events[i].events);
      }
    }
    const Clock::time_point now = Clock::now();
    if (now >= next_sweep) {
      Sweep(now);
      next_sweep = now + kTick;
    }
  }
  // Stopping: every connection goes; waiting handlers see ClientGone(), streams are released.
  std::vector<uint64_t> ids;
  for (const auto& [id, c] : conns_) ids.push_back(id);
  for (uint64_t id : ids) Close(id);
  listener_.reset();
}

HttpLoop::HttpLoop(HttpLoopOptions options, HttpLoopCallbacks callbacks)
    : impl_(std::make_unique<Impl>(this, options, std::move(callbacks))) {}

HttpLoop::~HttpLoop() {
  Stop();
  impl_.reset();
}

Status HttpLoop::Listen(const std::string& host, int port) {
  return impl_->Listen(host, port, &port_);
}
void HttpLoop::Run() { impl_->Run(); }
void HttpLoop::Stop() { impl_->Stop(); }

}  // namespace loom
