#include "server/http_router.h"

namespace loom {

void HttpRouter::Add(std::string method, std::string pattern, HttpHandler handler) {
  Route r;
  r.method = std::move(method);
  if (pattern.find('(') != std::string::npos) r.re.emplace(pattern);
  r.path = std::move(pattern);
  r.handler = std::move(handler);
  routes_.push_back(std::move(r));
}

const HttpHandler* HttpRouter::Find(HttpRequest* req) const {
  const std::string& method = req->method == "HEAD" ? std::string("GET") : req->method;
  for (const Route& r : routes_) {
    if (r.method != method) continue;
    if (!r.re.has_value()) {
      if (r.path != req->path) continue;
      req->matches = {req->path};
      return &r.handler;
    }
    std::smatch m;
    if (!std::regex_match(req->path, m, *r.re)) continue;
    req->matches.assign(m.begin(), m.end());
    return &r.handler;
  }
  return nullptr;
}

}  // namespace loom
