// Status / StatusOr<T>: the error type for failures at an edge (a file, a request, a config).
// Broken invariants use CHECK (check.h); expected outcomes in hot loops are plain values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "base/check.h"

namespace loom {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller passed something wrong (a request field, a flag, a file)
  kNotFound,            // a file, tensor, token or route that does not exist
  kFailedPrecondition,  // the system is not in a state to do this
  kResourceExhausted,   // memory / KV / queue capacity
  kOutOfRange,          // a value outside what is supported (context length, vocab)
  kUnimplemented,       // a feature that loom does not support (yet)
  kDataLoss,            // a corrupted or truncated file
  kAborted,             // cancelled by the client or shutdown
  kUnavailable,         // try again later
  kInternal,            // a bug: should not happen
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message" (or "OK").
  std::string ToString() const;

  // Returns a copy with `prefix + ": "` prepended to the message (for adding context such as a
  // file name while propagating).
  Status WithContext(std::string_view prefix) const;

  // Explicitly drop a status (documented at the call site why it is safe).
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status ResourceExhaustedError(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status OutOfRangeError(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status UnimplementedError(std::string m) {
  return {StatusCode::kUnimplemented, std::move(m)};
}
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status AbortedError(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : rep_(std::move(status)) {  // NOLINT: implicit by design
    CHECK(!std::get<Status>(rep_).ok()) << "StatusOr constructed from an OK Status";
  }
  StatusOr(T value) : rep_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(rep_); }
  Status status() const { return ok() ? Status() : std::get<Status>(rep_); }

  const T& value() const& {
    CHECK(ok()) << "StatusOr::value() on error: " << std::get<Status>(rep_).ToString();
    return std::get<T>(rep_);
  }
  T& value() & {
    CHECK(ok()) << "StatusOr::value() on error: " << std::get<Status>(rep_).ToString();
    return std::get<T>(rep_);
  }
  T&& value() && {
    CHECK(ok()) << "StatusOr::value() on error: " << std::get<Status>(rep_).ToString();
    return std::get<T>(std::move(rep_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<Status, T> rep_;
};

}  // namespace loom

#define LOOM_CONCAT_INNER_(a, b) a##b
#define LOOM_CONCAT_(a, b) LOOM_CONCAT_INNER_(a, b)

// Returns from the current function if `expr` (a Status) is not OK.
#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    ::loom::Status loom_status_ = (expr);        \
    if (!loom_status_.ok()) return loom_status_; \
  } while (0)

// ASSIGN_OR_RETURN(auto x, MakeX()); declares/assigns x or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(LOOM_CONCAT_(loom_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()
