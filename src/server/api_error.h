// ApiError: an HTTP error as the OpenAI and Anthropic APIs shape it. Built from a Status (the
// code picks the HTTP status and type) plus the offending request field.
//   OpenAI:    {"error": {"message", "type", "param", "code"}}
//   Anthropic: {"type": "error", "error": {"type", "message"}}
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace loom {

enum class ApiFlavor { kOpenAi, kAnthropic };

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string param;  // the request field at fault; "" = none
  std::string code;   // machine-readable code (OpenAI "code"); "" = null

  // InvalidArgument/OutOfRange → 400, NotFound → 404, ResourceExhausted → 400 "memory_admission",
  // FailedPrecondition/Unavailable → 503, the rest → 500. `param` names the field, "" when unknown.
  static ApiError FromStatus(const Status& status, std::string param = "");

  // OpenAI's error "type" for the status: invalid_request_error, authentication_error,
  // not_found_error, server_error ...
  std::string OpenAiType() const;
  // Anthropic's error "type": invalid_request_error, authentication_error, not_found_error,
  // request_too_large, overloaded_error, api_error.
  std::string AnthropicType() const;

  nlohmann::ordered_json ToJson(ApiFlavor flavor) const;
};

}  // namespace loom
