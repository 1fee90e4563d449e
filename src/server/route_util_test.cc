#include "server/route_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace loom {
namespace {

// A listener on 127.0.0.1 with a free port and the given backlog; returns its fd, sets *port.
int Listen(int backlog, int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      listen(fd, backlog) != 0) {
    return -1;
  }
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

// Opens n non-blocking connections to port and counts those whose handshake completes (nobody
// accepts: the accept queue alone decides) within the wait.
int CompletedConnects(int port, int n) {
  std::vector<pollfd> fds;
  for (int i = 0; i < n; ++i) {
    const int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
    fds.push_back({c, POLLOUT, 0});
  }
  int done = 0;
  // Loopback handshakes complete at once or not before the client's 1 s SYN retry.
  poll(fds.data(), fds.size(), 300);
  for (const pollfd& p : fds) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if ((p.revents & POLLOUT) != 0 && err == 0) {
      // A handshake the server dropped leaves the client in SYN_SENT: not writable.
      ++done;
    }
    close(p.fd);
  }
  return done;
}

TEST(WidenListenBacklogTest, ABurstOfConnectsFitsAfterWidening) {
  int port = 0;
  const int narrow = Listen(1, &port);
  ASSERT_GE(narrow, 0);
  // Control: with backlog 1 most of a burst of 32 cannot complete (proves the check can fail).
  EXPECT_LT(CompletedConnects(port, 32), 32);
  close(narrow);

  const int fd = Listen(1, &port);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(WidenListenBacklog(port, 128), 1);
  EXPECT_EQ(CompletedConnects(port, 32), 32);
  EXPECT_EQ(WidenListenBacklog(port + 1 == 65536 ? 1 : port + 1, 128), 0);  // no such listener
  close(fd);
}

// HttpServer sets TCP_NODELAY through httplib, which applies it to the listening socket only:
// this pins the Linux behaviour it relies on (accepted connections inherit the option).
TEST(TcpNoDelayTest, AcceptedSocketsInheritItFromTheListener) {
  int port = 0;
  const int fd = Listen(4, &port);
  ASSERT_GE(fd, 0);
  int yes = 1;
  ASSERT_EQ(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes), 0);
  const int c = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const int accepted = accept(fd, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  int on = 0;
  socklen_t len = sizeof on;
  ASSERT_EQ(getsockopt(accepted, IPPROTO_TCP, TCP_NODELAY, &on, &len), 0);
  EXPECT_NE(on, 0);
  close(accepted);
  close(c);
  close(fd);
}

}  // namespace
}  // namespace loom
