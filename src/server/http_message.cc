#include "server/http_message.h"

#include <algorithm>

namespace loom {
namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

namespace {

template <class Headers>
std::string ValueOf(const Headers& headers, std::string_view name) {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

void Replace(HttpHeaders* headers, std::string_view name, std::string_view value) {
  auto [lo, hi] = headers->equal_range(name);
  headers->erase(lo, hi);
  headers->emplace(std::string(name), std::string(value));
}

}  // namespace

bool HeaderNameLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [](char x, char y) { return Lower(x) < Lower(y); });
}

bool HttpRequest::has_header(std::string_view name) const { return headers.count(name) > 0; }
std::string HttpRequest::get_header_value(std::string_view name) const {
  return ValueOf(headers, name);
}
void HttpRequest::set_header(std::string_view name, std::string_view value) {
  Replace(&headers, name, value);
}

bool HttpResponse::has_header(std::string_view name) const { return headers.count(name) > 0; }
std::string HttpResponse::get_header_value(std::string_view name) const {
  return ValueOf(headers, name);
}
void HttpResponse::set_header(std::string_view name, std::string_view value) {
  Replace(&headers, name, value);
}
void HttpResponse::set_content(std::string content, std::string_view content_type) {
  body = std::move(content);
  set_header("Content-Type", content_type);
}

const char* HttpReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
  }
  return "";
}

std::string SerializeResponseHead(const HttpResponse& res, bool keep_alive, bool chunked,
                                  int keep_alive_timeout_s) {
  std::string out = "HTTP/1.1 " + std::to_string(res.status) + " ";
  out += HttpReasonPhrase(res.status);
  out += "\r\n";
  for (const auto& [name, value] : res.headers) {
    if (EqualsIgnoreCase(name, "Content-Length") || EqualsIgnoreCase(name, "Connection") ||
        EqualsIgnoreCase(name, "Transfer-Encoding") || EqualsIgnoreCase(name, "Keep-Alive")) {
      continue;  // ours to set
    }
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  if (res.stream != nullptr) {
    if (chunked) out += "Transfer-Encoding: chunked\r\n";
  } else if (res.status != 204 && res.status >= 200) {
    out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  }
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  if (keep_alive && keep_alive_timeout_s > 0) {
    out += "Keep-Alive: timeout=" + std::to_string(keep_alive_timeout_s) + "\r\n";
  }
  out += "\r\n";
  return out;
}

}  // namespace loom
