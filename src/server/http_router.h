// HttpRouter: the route table of the HTTP server, by method and path. A path pattern is an exact
// path, or a regular expression matched against the whole path when it holds a '(' (its groups
// become HttpRequest::matches). HEAD requests use the GET routes. Filled once before serving, then
// read-only (thread-safe to Find from many threads).
#pragma once

#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "server/http_message.h"

namespace loom {

using HttpHandler = std::function<void(const HttpRequest& req, HttpResponse& res)>;

class HttpRouter {
 public:
  void Get(std::string pattern, HttpHandler handler) { Add("GET", std::move(pattern), handler); }
  void Post(std::string pattern, HttpHandler handler) { Add("POST", std::move(pattern), handler); }
  void Put(std::string pattern, HttpHandler handler) { Add("PUT", std::move(pattern), handler); }
  void Patch(std::string pattern, HttpHandler handler) {
    Add("PATCH", std::move(pattern), handler);
  }
  void Delete(std::string pattern, HttpHandler handler) {
    Add("DELETE", std::move(pattern), handler);
  }

  // The first route added for req's method whose pattern matches req->path (sets req->matches);
  // null when none does.
  const HttpHandler* Find(HttpRequest* req) const;

 private:
  struct Route {
    std::string method;
    std::string path;              // exact, when `re` is empty
    std::optional<std::regex> re;  // whole-path match
    HttpHandler handler;
  };
  void Add(std::string method, std::string pattern, HttpHandler handler);

  std::vector<Route> routes_;
};

}  // namespace loom
