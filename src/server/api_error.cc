#include "server/api_error.h"

namespace loom {

ApiError ApiError::FromStatus(const Status& status, std::string param) {
  ApiError e;
  e.message = std::string(status.message());
  e.param = std::move(param);
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      e.http_status = 400;
      break;
    case StatusCode::kOutOfRange:
      e.http_status = 400;
      e.code = "context_length_exceeded";
      break;
    case StatusCode::kResourceExhausted:
      e.http_status = 400;
      e.code = "memory_admission";
      break;
    case StatusCode::kNotFound:
      e.http_status = 404;
      break;
    case StatusCode::kUnimplemented:
      e.http_status = 400;
      e.code = "not_supported";
      break;
    case StatusCode::kFailedPrecondition:
    case StatusCode::kUnavailable:
      e.http_status = 503;
      break;
    default:
      e.http_status = 500;
      break;
  }
  return e;
}

std::string ApiError::OpenAiType() const {
  switch (http_status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 405:
      return "invalid_request_error";
    case 413:
      return "invalid_request_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "server_unavailable";
    default:
      return http_status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string ApiError::AnthropicType() const {
  switch (http_status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return http_status >= 500 ? "api_error" : "invalid_request_error";
  }
}

nlohmann::ordered_json ApiError::ToJson(ApiFlavor flavor) const {
  using nlohmann::ordered_json;
  if (flavor == ApiFlavor::kAnthropic) {
    return ordered_json{{"type", "error"},
                        {"error", ordered_json{{"type", AnthropicType()}, {"message", message}}}};
  }
  ordered_json err{{"message", message},
                   {"type", OpenAiType()},
                   {"param", param.empty() ? ordered_json() : ordered_json(param)},
                   {"code", code.empty() ? ordered_json() : ordered_json(code)}};
  return ordered_json{{"error", std::move(err)}};
}

}  // namespace loom
