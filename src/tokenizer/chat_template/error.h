// TemplateError: the internal error of the Jinja implementation. It is thrown inside the
// interpreter only and converted to a Status at the ChatTemplate interface (no exception leaves
// chat_template.h).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace loom::chat_template {

// A position in the template source, 1-based (0 = unknown).
struct SourcePos {
  int32_t line = 0;
  int32_t column = 0;
};

class TemplateError : public std::runtime_error {
 public:
  enum class Kind {
    kSyntax,   // the template does not parse
    kRuntime,  // an operation failed while rendering (TypeError, UndefinedError, ...)
    kRaised,   // the template called raise_exception(message)
    kLimit,    // a render limit (iterations, output size, call depth) was exceeded
  };
  TemplateError(Kind kind, std::string message, SourcePos pos = {})
      : std::runtime_error(message), kind_(kind), pos_(pos) {}

  Kind kind() const { return kind_; }
  SourcePos pos() const { return pos_; }
  void set_pos_if_unknown(SourcePos pos) {
    if (pos_.line == 0) pos_ = pos;
  }

 private:
  Kind kind_;
  SourcePos pos_;
};

[[noreturn]] inline void ThrowRuntime(std::string message) {
  throw TemplateError(TemplateError::Kind::kRuntime, std::move(message));
}

}  // namespace loom::chat_template
