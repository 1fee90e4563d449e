// AccessPolicy: which clients may drive the server, decided from request headers alone (so it is
// tested without a socket). Three checks, in the order HttpServer applies them:
//   Host    DNS rebinding: a page on attacker.example whose name later resolves to 127.0.0.1
//           reaches loom with `Host: attacker.example`. Bound to loopback, only loopback names
//           pass (any port: ssh tunnels and proxies change it); bound elsewhere, also the bound
//           address (any IP literal when bound to 0.0.0.0 / ::; no DNS name can rebind to an IP
//           literal) and the machine's host name; plus --allowed-hosts. No Host header (HTTP/1.0)
//           passes: browsers always send one.
//   Origin  web pages: a browser sends Origin on cross-origin requests, and a "simple" POST
//           (text/plain) runs without a preflight, so a disallowed Origin is refused outright.
//           Allowed: same-origin (the chat page: Origin names the Host), loopback origins
//           (http(s)://localhost|127.x|[::1], any port), --allowed-origins entries. `Origin:
//           null` (sandboxed frames, file://) only when listed as "null" or with "*".
//   API key --api-key / --api-key-file / LOOM_API_KEY: `Authorization: Bearer KEY` or Anthropic's
//           `x-api-key: KEY`, compared in constant time against every key.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace loom {

struct AccessOptions {
  // --allowed-origins: "*", "null", or origins "scheme://host[:port]" with port "*" = any port.
  std::vector<std::string> allowed_origins;
  // --allowed-hosts: extra Host names ("name" or "name:port"; the port is ignored), or "*" = no
  // Host check.
  std::vector<std::string> allowed_hosts;
  // Accepted API keys (none = no key needed). Never logged.
  std::vector<std::string> api_keys;

  // Messages name the flag; they never quote a key.
  Status Validate() const;
};

// "name[:port]" or "[ipv6][:port]" (a Host header, a URL authority) → the lowercase name without
// brackets and the port ("" when absent). False when malformed (empty name, a non-numeric port,
// spaces, '/', '@').
bool SplitAuthority(std::string_view authority, std::string* name, std::string* port);
// localhost, 127.0.0.0/8, ::1 (and ::ffff:127.x); `name` as SplitAuthority returns it.
bool IsLoopbackName(std::string_view name);
// A dotted IPv4 address or an IPv6 address (unbracketed).
bool IsIpLiteral(std::string_view name);
// True when given == secret; the time taken depends on the lengths only, never on where the
// bytes differ.
bool ConstantTimeEquals(std::string_view given, std::string_view secret);
// The token of "Bearer <token>" (scheme case-insensitive); "" for anything else.
std::string_view BearerToken(std::string_view authorization);

class AccessPolicy {
 public:
  // `bind_host`: --host. `machine_hostname`: gethostname(), accepted as a Host name when bound to
  // a non-loopback address ("" = none). Precondition: options.Validate() is OK.
  AccessPolicy(std::string bind_host, AccessOptions options, std::string machine_hostname);

  // `host`: the Host header value; has_host false when the request carried none.
  bool HostAllowed(bool has_host, std::string_view host) const;
  // `origin`: the Origin header value (the request carried one); `host`: its Host header ("" if
  // none), for the same-origin test.
  bool OriginAllowed(std::string_view origin, std::string_view host) const;
  bool keys_required() const { return !options_.api_keys.empty(); }
  // True when the bearer token of `authorization` or `x_api_key` is one of the keys. Checks every
  // key (no early exit). Precondition: keys_required().
  bool KeyAccepted(std::string_view authorization, std::string_view x_api_key) const;

 private:
  bool bound_to_loopback_;
  bool bound_to_wildcard_;
  std::string bind_name_;  // lowercase, unbracketed
  std::string machine_hostname_;
  AccessOptions options_;
};

// True when `bind_host` (--host) is a loopback address or localhost.
bool IsLoopbackBind(std::string_view bind_host);

// One line each for the ready card: origins or hosts opened with "*", a non-loopback bind
// without an API key.
std::vector<std::string> AccessWarnings(std::string_view bind_host, const AccessOptions& options);

}  // namespace loom
