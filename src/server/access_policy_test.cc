#include "server/access_policy.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

AccessOptions Make(std::vector<std::string> origins, std::vector<std::string> hosts,
                   std::vector<std::string> keys) {
  AccessOptions o;
  o.allowed_origins = std::move(origins);
  o.allowed_hosts = std::move(hosts);
  o.api_keys = std::move(keys);
  return o;
}
AccessOptions Origins(std::vector<std::string> v) { return Make(std::move(v), {}, {}); }
AccessOptions Hosts(std::vector<std::string> v) { return Make({}, std::move(v), {}); }
AccessOptions Keys(std::vector<std::string> v) { return Make({}, {}, std::move(v)); }

TEST(AccessPolicyTest, SplitAuthority) {
  struct Case {
    const char* in;
    bool ok;
    const char* name;
    const char* port;
  };
  const Case cases[] = {
      {"localhost", true, "localhost", ""},
      {"LocalHost:8080", true, "localhost", "8080"},
      {"127.0.0.1:1", true, "127.0.0.1", "1"},
      {"[::1]:8080", true, "::1", "8080"},
      {"[::1]", true, "::1", ""},
      {"my_host.lan", true, "my_host.lan", ""},
      {"", false, "", ""},
      {":8080", false, "", ""},
      {"localhost:", false, "", ""},
      {"localhost:80a", false, "", ""},
      {"localhost:123456", false, "", ""},
      {"::1", false, "", ""},  // IPv6 must be bracketed
      {"[::1", false, "", ""},
      {"[::1]x", false, "", ""},
      {"[evil.example]", false, "", ""},
      {"evil.example/x", false, "", ""},
      {"user@localhost", false, "", ""},
      {"local host", false, "", ""},
  };
  for (const Case& c : cases) {
    std::string name, port;
    EXPECT_EQ(SplitAuthority(c.in, &name, &port), c.ok) << c.in;
    if (c.ok) {
      EXPECT_EQ(name, c.name) << c.in;
      EXPECT_EQ(port, c.port) << c.in;
    }
  }
}

TEST(AccessPolicyTest, LoopbackNames) {
  for (const char* n : {"localhost", "127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackName(n)) << n;
  }
  for (const char* n : {"localhost.evil.example", "128.0.0.1", "0.0.0.0", "::", "10.0.0.1", "127.1",
                        "evil.example", "::2"}) {
    EXPECT_FALSE(IsLoopbackName(n)) << n;
  }
  EXPECT_TRUE(IsLoopbackBind("[::1]"));
  EXPECT_TRUE(IsLoopbackBind("127.0.0.1"));
  EXPECT_FALSE(IsLoopbackBind("0.0.0.0"));
}

TEST(AccessPolicyTest, HostHeaderByBindAddress) {
  struct Case {
    const char* bind;
    std::vector<std::string> allowed;
    const char* host;  // nullptr: no Host header
    bool ok;
  };
  const std::vector<std::string> none;
  const Case cases[] = {
      // Bound to loopback: loopback names only, with any port.
      {"127.0.0.1", none, "localhost", true},
      {"127.0.0.1", none, "localhost:8080", true},
      {"127.0.0.1", none, "127.0.0.1:8080", true},
      {"127.0.0.1", none, "127.0.0.5", true},
      {"127.0.0.1", none, "[::1]:8080", true},
      {"127.0.0.1", none, "evil.example", false},
      {"127.0.0.1", none, "evil.example:8080", false},
      {"127.0.0.1", none, "localhost.evil.example:8080", false},
      {"127.0.0.1", none, "192.168.1.5:8080", false},
      {"127.0.0.1", none, "box", false},  // the machine's own name: not when loopback-bound
      {"127.0.0.1", none, "", false},
      {"127.0.0.1", none, "local host", false},
      {"127.0.0.1", none, nullptr, true},  // HTTP/1.0 without Host: not a browser
      {"127.0.0.1", {"myname.lan"}, "myname.lan:8080", true},
      {"127.0.0.1", {"MyName.lan:9"}, "myname.lan", true},
      {"127.0.0.1", {"myname.lan"}, "other.lan", false},
      {"127.0.0.1", {"*"}, "evil.example", true},
      // Bound to one address: it, the machine's name, loopback, the list.
      {"192.168.1.5", none, "192.168.1.5:8080", true},
      {"192.168.1.5", none, "box:8080", true},
      {"192.168.1.5", none, "localhost:8080", true},
      {"192.168.1.5", none, "192.168.1.6:8080", false},
      {"192.168.1.5", none, "evil.example", false},
      // Bound to every interface: any IP literal (no DNS name rebinds to one), names as above.
      {"0.0.0.0", none, "10.1.2.3:8080", true},
      {"0.0.0.0", none, "[fe80::1]:8080", true},
      {"0.0.0.0", none, "box", true},
      {"0.0.0.0", none, "evil.example:8080", false},
      {"0.0.0.0", {"loom.lan"}, "loom.lan", true},
  };
  for (const Case& c : cases) {
    AccessPolicy p(c.bind, Hosts(c.allowed), "Box");
    EXPECT_EQ(p.HostAllowed(c.host != nullptr, c.host ? c.host : ""), c.ok)
        << "bind " << c.bind << " host " << (c.host ? c.host : "(none)");
  }
}

TEST(AccessPolicyTest, Origins) {
  struct Case {
    std::vector<std::string> allowed;
    const char* origin;
    const char* host;
    bool ok;
  };
  const std::vector<std::string> none;
  const Case cases[] = {
      // Same origin: the chat page served under the Host it came to.
      {none, "http://127.0.0.1:8080", "127.0.0.1:8080", true},
      {none, "http://myname.lan:8080", "myname.lan:8080", true},
      {none, "http://myname.lan", "myname.lan:80", true},
      {none, "https://loom.example", "loom.example", true},  // behind a TLS proxy
      {none, "http://myname.lan:8081", "myname.lan:8080", false},
      // Loopback origins, any port, http or https.
      {none, "http://localhost:3000", "127.0.0.1:8080", true},
      {none, "https://127.0.0.1", "127.0.0.1:8080", true},
      {none, "http://[::1]:5173", "127.0.0.1:8080", true},
      {none, "ftp://localhost", "127.0.0.1:8080", false},
      // Anything else is refused.
      {none, "http://evil.example", "127.0.0.1:8080", false},
      {none, "https://localhost.evil.example", "127.0.0.1:8080", false},
      {none, "null", "127.0.0.1:8080", false},
      {none, "", "127.0.0.1:8080", false},
      {none, "http://evil.example/path", "127.0.0.1:8080", false},
      {none, "evil.example", "127.0.0.1:8080", false},
      {none, "http://evil.example", "", false},
      // --allowed-origins.
      {{"https://app.example.com"}, "https://app.example.com", "127.0.0.1:8080", true},
      {{"https://app.example.com/"}, "https://APP.example.com", "127.0.0.1:8080", true},
      {{"https://app.example.com"}, "http://app.example.com", "127.0.0.1:8080", false},
      {{"https://app.example.com"}, "https://app.example.com:8443", "127.0.0.1:8080", false},
      {{"https://app.example.com:443"}, "https://app.example.com", "127.0.0.1:8080", true},
      {{"http://dev.lan:*"}, "http://dev.lan:5173", "127.0.0.1:8080", true},
      {{"http://dev.lan:*"}, "http://dev.lan", "127.0.0.1:8080", true},
      {{"http://dev.lan:*"}, "http://dev.lan.evil:1", "127.0.0.1:8080", false},
      {{"chrome-extension://abcdef"}, "chrome-extension://abcdef", "127.0.0.1:8080", true},
      {{"null"}, "null", "127.0.0.1:8080", true},
      {{"*"}, "http://evil.example", "127.0.0.1:8080", true},
      {{"*"}, "null", "127.0.0.1:8080", true},
  };
  for (const Case& c : cases) {
    AccessPolicy p("127.0.0.1", Origins(c.allowed), "");
    EXPECT_EQ(p.OriginAllowed(c.origin, c.host), c.ok)
        << "origin " << c.origin << " host " << c.host
        << (c.allowed.empty() ? "" : " allowed " + c.allowed[0]);
  }
}

TEST(AccessPolicyTest, ApiKeys) {
  AccessPolicy p("127.0.0.1", Keys({"sk-one", "sk-two"}), "");
  ASSERT_TRUE(p.keys_required());
  struct Case {
    const char* authorization;
    const char* x_api_key;
    bool ok;
  };
  const Case cases[] = {
      {"Bearer sk-one", "", true},
      {"bearer  sk-two ", "", true},
      {"", "sk-two", true},
      {"Bearer wrong", "sk-one", true},  // either header may carry it
      {"", "", false},
      {"Bearer ", "", false},
      {"sk-one", "", false},
      {"Basic sk-one", "", false},
      {"Bearer sk-on", "", false},
      {"Bearer sk-one1", "", false},
      {"", "sk-one ", false},
      {"", "SK-ONE", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(p.KeyAccepted(c.authorization, c.x_api_key), c.ok)
        << "'" << c.authorization << "' / '" << c.x_api_key << "'";
  }
  EXPECT_FALSE(AccessPolicy("127.0.0.1", AccessOptions{}, "").keys_required());
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals(std::string_view("abc\0", 4), "abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "abc"));
}

TEST(AccessPolicyTest, ValidateNamesTheFlag) {
  EXPECT_TRUE(Make({"*", "null", "http://a.lan:*", "https://b:8443"},
                   {"*", "a.lan", "b:80", "[::1]"}, {"sk-1"})
                  .Validate()
                  .ok());
  struct Case {
    AccessOptions o;
    const char* flag;
  };
  const Case cases[] = {
      {Origins({"app.example.com"}), "--allowed-origins"},
      {Origins({"https://app.example.com/x"}), "--allowed-origins"},
      {Origins({"https://"}), "--allowed-origins"},
      {Hosts({"http://a.lan"}), "--allowed-hosts"},
      {Hosts({""}), "--allowed-hosts"},
      {Keys({""}), "--api-key"},
      {Keys({"sk one"}), "--api-key"},
      {Keys({"sk-\x01"}), "--api-key"},
  };
  for (const Case& c : cases) {
    Status s = c.o.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.flag;
    EXPECT_NE(std::string(s.message()).find(c.flag), std::string::npos) << s.message();
  }
  // A key is never quoted back.
  EXPECT_EQ(std::string(Keys({"sk secret"}).Validate().message()).find("secret"),
            std::string::npos);
}

TEST(AccessPolicyTest, Warnings) {
  EXPECT_TRUE(AccessWarnings("127.0.0.1", AccessOptions{}).empty());
  EXPECT_TRUE(AccessWarnings("0.0.0.0", Keys({"k"})).empty());
  const auto open = AccessWarnings("0.0.0.0", AccessOptions{});
  ASSERT_EQ(open.size(), 1u);
  EXPECT_NE(open[0].find("without an API key"), std::string::npos);
  const auto star = AccessWarnings("127.0.0.1", Make({"*"}, {"*"}, {}));
  ASSERT_EQ(star.size(), 2u);
  EXPECT_NE(star[0].find("--allowed-origins"), std::string::npos);
  EXPECT_NE(star[1].find("--allowed-hosts"), std::string::npos);
}

}  // namespace
}  // namespace loom
