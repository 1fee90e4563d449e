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

#include "server/tokenizer_codec.h"
#include "tokenizer/tokenizer.h"

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

// A codec whose tokens stand for at most 4 bytes; Encode must not be reached by the check.
class FourBytesCodec final : public TextCodec {
 public:
  StatusOr<std::vector<TokenId>> Encode(std::string_view, bool) const override {
    ADD_FAILURE() << "CheckPromptLength tokenized";
    return std::vector<TokenId>{};
  }
  std::string Decode(std::span<const TokenId>, bool) const override { return ""; }
  size_t MinTokenCount(std::string_view text, bool add_special_tokens) const override {
    return (text.size() + 3) / 4 + (add_special_tokens ? 1 : 0);
  }
  size_t max_bytes_per_token() const override { return 4; }
  int vocab_size() const override { return 100; }
  bool has_chat_template() const override { return false; }
  StatusOr<std::string> RenderChat(const nlohmann::ordered_json&) const override {
    return std::string();
  }
};

// A codec that knows no bound (the TextCodec defaults).
class UnboundedCodec final : public TextCodec {
 public:
  StatusOr<std::vector<TokenId>> Encode(std::string_view, bool) const override {
    return std::vector<TokenId>{};
  }
  std::string Decode(std::span<const TokenId>, bool) const override { return ""; }
  int vocab_size() const override { return 100; }
  bool has_chat_template() const override { return false; }
  StatusOr<std::string> RenderChat(const nlohmann::ordered_json&) const override {
    return std::string();
  }
};

TEST(CheckPromptLengthTest, RefusesWhatCannotFitBeforeTokenizing) {
  const FourBytesCodec codec;
  struct Case {
    size_t bytes;
    bool add_special;
    int context;
    bool refused;
  };
  const Case kCases[] = {
      {4 * 1000, false, 1000, true},       // exactly 1000 tokens at least: the context is full
      {4 * 1000 - 4, false, 1000, false},  // 999 at least: may fit, the exact check decides
      {4 * 999, true, 1000, true},         // 999 + BOS
      {30 << 20, false, 4096, true},       // a 30 MB body
      {999, false, 1000, false},           // shorter than the context in bytes: not checked
      {0, true, 1, false},
  };
  for (const Case& c : kCases) {
    const std::string text(c.bytes, 'x');
    const Status s = CheckPromptLength(codec, text, c.add_special, c.context);
    EXPECT_EQ(!s.ok(), c.refused) << c.bytes << " bytes, context " << c.context;
    if (s.ok()) continue;
    // The same 400 as the check after tokenization, naming the estimate, the bytes and the limit.
    const ApiError e = ApiError::FromStatus(s, "messages");
    EXPECT_EQ(e.http_status, 400);
    EXPECT_EQ(e.code, "context_length_exceeded");
    EXPECT_EQ(e.param, "messages");
    const std::string at_least = std::to_string(codec.MinTokenCount(text, c.add_special));
    EXPECT_EQ(std::string(s.message()),
              "the prompt has at least " + at_least + " tokens (" + std::to_string(c.bytes) +
                  " bytes, and no token of this model is longer than 4 bytes) but the "
                  "context length is " +
                  std::to_string(c.context) + "; shorten the prompt");
  }
  // No bound known: never refused here.
  EXPECT_TRUE(CheckPromptLength(UnboundedCodec(), std::string(1 << 20, 'x'), true, 16).ok());
}

// The real codec of the default model (byte-level BPE, 15 raw bytes in its longest token): refused
// exactly when the tokenizer's bound says so, and never a prompt whose real count fits.
TEST(CheckPromptLengthTest, TheDefaultModelsTokenizer) {
  auto tok = Tokenizer::FromHfDirectory(std::string(LOOM_SOURCE_DIR) + "/models/default");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const TokenizerCodec codec(std::shared_ptr<const Tokenizer>(std::move(tok).value()), nullptr);
  ASSERT_EQ(codec.max_bytes_per_token(), 15u);
  const int context = 512;
  for (const std::string& text :
       {std::string(512 * 15, ' '), std::string(512 * 15 - 15, ' '), std::string(1 << 20, 'a'),
        std::string(20000, 'x'), std::string("Once upon a time ") + std::string(9000, '!')}) {
    const Status s = CheckPromptLength(codec, text, /*add_special_tokens=*/true, context);
    const size_t real = codec.Encode(text, true)->size();
    if (!s.ok()) {
      EXPECT_GE(real, static_cast<size_t>(context)) << text.size() << " bytes refused but fit";
    }
    EXPECT_LE(codec.MinTokenCount(text, true), real);
  }
  EXPECT_FALSE(CheckPromptLength(codec, std::string(1 << 20, 'a'), true, context).ok());
}

}  // namespace
}  // namespace loom
