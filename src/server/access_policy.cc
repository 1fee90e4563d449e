#include "server/access_policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>

namespace loom {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsDigits(std::string_view s) {
  return !s.empty() && s.size() <= 5 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

bool Contains(const std::vector<std::string>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// An origin "scheme://authority" split into its parts; port "" = the scheme's default, "*" = any
// (allowed only in --allowed-origins entries).
struct OriginParts {
  std::string scheme, name, port;
};

bool ParseOrigin(std::string_view s, bool allow_any_port, OriginParts* out) {
  const size_t sep = s.find("://");
  if (sep == std::string_view::npos || sep == 0) return false;
  std::string_view scheme = s.substr(0, sep);
  if (!std::isalpha(static_cast<unsigned char>(scheme[0]))) return false;
  for (char c : scheme) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') {
      return false;
    }
  }
  std::string_view authority = s.substr(sep + 3);
  if (!authority.empty() && authority.back() == '/') authority.remove_suffix(1);
  bool any_port = false;
  if (allow_any_port && authority.size() > 2 && authority.substr(authority.size() - 2) == ":*") {
    authority.remove_suffix(2);
    any_port = true;
  }
  out->scheme = Lower(scheme);
  if (!SplitAuthority(authority, &out->name, &out->port)) return false;
  if (any_port) {
    if (!out->port.empty()) return false;
    out->port = "*";
  }
  if ((out->scheme == "http" && out->port == "80") ||
      (out->scheme == "https" && out->port == "443")) {
    out->port.clear();
  }
  return true;
}

bool IsWildcardBind(std::string_view name) {
  return name.empty() || name == "0.0.0.0" || name == "::";
}

// --host as a name: brackets removed, lowercase.
std::string BindName(std::string_view bind_host) {
  if (bind_host.size() >= 2 && bind_host.front() == '[' && bind_host.back() == ']') {
    bind_host = bind_host.substr(1, bind_host.size() - 2);
  }
  return Lower(bind_host);
}

}  // namespace

bool SplitAuthority(std::string_view authority, std::string* name, std::string* port) {
  std::string_view n, p;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return false;
    n = authority.substr(1, close - 1);
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return false;
      p = rest.substr(1);
      if (!IsDigits(p)) return false;
    }
    std::string v6(n);
    in6_addr a6;
    if (inet_pton(AF_INET6, v6.c_str(), &a6) != 1) return false;
  } else {
    const size_t colon = authority.find(':');
    n = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      p = authority.substr(colon + 1);
      if (!IsDigits(p)) return false;  // also refuses a second ':' (an unbracketed IPv6)
    }
    if (n.empty() || !std::all_of(n.begin(), n.end(), IsNameChar)) return false;
  }
  *name = Lower(n);
  *port = std::string(p);
  return true;
}

bool IsLoopbackName(std::string_view name) {
  if (name == "localhost") return true;
  const std::string s(name);
  in_addr a4;
  if (inet_pton(AF_INET, s.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6;
  if (inet_pton(AF_INET6, s.c_str(), &a6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
  }
  return false;
}

bool IsIpLiteral(std::string_view name) {
  const std::string s(name);
  in_addr a4;
  in6_addr a6;
  return inet_pton(AF_INET, s.c_str(), &a4) == 1 || inet_pton(AF_INET6, s.c_str(), &a6) == 1;
}

bool ConstantTimeEquals(std::string_view given, std::string_view secret) {
  // Runs over the whole secret whatever `given` holds; a shorter `given` reads as zero bytes.
  unsigned diff = given.size() == secret.size() ? 0u : 1u;
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(secret[i]);
  }
  return diff == 0;
}

std::string_view BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() ||
      Lower(authorization.substr(0, kScheme.size())) != kScheme) {
    return {};
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return token;
}

bool IsLoopbackBind(std::string_view bind_host) { return IsLoopbackName(BindName(bind_host)); }

Status AccessOptions::Validate() const {
  for (const std::string& o : allowed_origins) {
    OriginParts parts;
    if (o != "*" && o != "null" && !ParseOrigin(o, /*allow_any_port=*/true, &parts)) {
      return InvalidArgumentError("--allowed-origins: '" + o +
                                  "' is not an origin; use scheme://host[:port] (port * = any), "
                                  "null or *, e.g. https://app.example.com");
    }
  }
  for (const std::string& h : allowed_hosts) {
    std::string name, port;
    if (h != "*" && !SplitAuthority(h, &name, &port)) {
      return InvalidArgumentError("--allowed-hosts: '" + h +
                                  "' is not a host name; use name[:port] or *, e.g. "
                                  "myhost.lan");
    }
  }
  for (size_t i = 0; i < api_keys.size(); ++i) {
    const std::string& k = api_keys[i];
    if (k.empty()) return InvalidArgumentError("--api-key: an API key is empty");
    if (!std::all_of(k.begin(), k.end(), [](char c) { return c > ' ' && c < 0x7f; })) {
      return InvalidArgumentError("--api-key: API key " + std::to_string(i + 1) +
                                  " holds a space or a non-printable character");
    }
  }
  return OkStatus();
}

AccessPolicy::AccessPolicy(std::string bind_host, AccessOptions options,
                           std::string machine_hostname)
    : bind_name_(BindName(bind_host)),
      machine_hostname_(Lower(machine_hostname)),
      options_(std::move(options)) {
  bound_to_loopback_ = IsLoopbackName(bind_name_);
  bound_to_wildcard_ = IsWildcardBind(bind_name_);
  for (std::string& h : options_.allowed_hosts) {
    std::string name, port;
    if (h != "*" && SplitAuthority(h, &name, &port)) h = name;
  }
}

bool AccessPolicy::HostAllowed(bool has_host, std::string_view host) const {
  if (!has_host || Contains(options_.allowed_hosts, "*")) return true;
  std::string name, port;
  if (!SplitAuthority(host, &name, &port)) return false;
  if (IsLoopbackName(name) || Contains(options_.allowed_hosts, name)) return true;
  if (bound_to_loopback_) return false;
  if (name == bind_name_ || (!machine_hostname_.empty() && name == machine_hostname_)) return true;
  return bound_to_wildcard_ && IsIpLiteral(name);
}

bool AccessPolicy::OriginAllowed(std::string_view origin, std::string_view host) const {
  if (Contains(options_.allowed_origins, "*")) return true;
  if (origin == "null") return Contains(options_.allowed_origins, "null");
  OriginParts o;
  if (!ParseOrigin(origin, /*allow_any_port=*/false, &o)) return false;
  // Same origin: the page was served by this server under the name the request came to.
  std::string host_name, host_port;
  if (!host.empty() && SplitAuthority(host, &host_name, &host_port)) {
    if ((o.scheme == "http" && host_port == "80") || (o.scheme == "https" && host_port == "443")) {
      host_port.clear();
    }
    if (o.name == host_name && o.port == host_port) return true;
  }
  if ((o.scheme == "http" || o.scheme == "https") && IsLoopbackName(o.name)) return true;
  for (const std::string& entry : options_.allowed_origins) {
    OriginParts e;
    if (!ParseOrigin(entry, /*allow_any_port=*/true, &e)) continue;  // "null"
    if (e.scheme == o.scheme && e.name == o.name && (e.port == "*" || e.port == o.port)) {
      return true;
    }
  }
  return false;
}

bool AccessPolicy::KeyAccepted(std::string_view authorization, std::string_view x_api_key) const {
  const std::string_view bearer = BearerToken(authorization);
  bool ok = false;
  for (const std::string& key : options_.api_keys) {
    // Both comparisons run for every key: no early exit reveals which one matched.
    const bool by_bearer = !bearer.empty() && ConstantTimeEquals(bearer, key);
    const bool by_header = !x_api_key.empty() && ConstantTimeEquals(x_api_key, key);
    ok |= by_bearer | by_header;
  }
  return ok;
}

std::vector<std::string> AccessWarnings(std::string_view bind_host, const AccessOptions& options) {
  std::vector<std::string> out;
  if (Contains(options.allowed_origins, "*")) {
    out.push_back("--allowed-origins *: any web page open in a browser here can use this API");
  }
  if (Contains(options.allowed_hosts, "*")) {
    out.push_back("--allowed-hosts *: no Host check; a DNS-rebinding web page can reach this API");
  }
  if (!IsLoopbackBind(bind_host) && options.api_keys.empty()) {
    out.push_back("listening on " + std::string(bind_host) +
                  " without an API key: anyone who can reach it can use the model "
                  "(--api-key / --api-key-file / LOOM_API_KEY)");
  }
  return out;
}

}  // namespace loom
