// Minimal leveled logging to stderr: LOG(INFO) << "loaded " << n << " tensors";
// The level is set once by the CLI (SetLogLevel); thread-safe (one line per write).
#pragma once

#include <sstream>

namespace loom {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();

namespace internal {
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};
}  // namespace internal

}  // namespace loom

#define LOOM_LOG_LEVEL_DEBUG ::loom::LogLevel::kDebug
#define LOOM_LOG_LEVEL_INFO ::loom::LogLevel::kInfo
#define LOOM_LOG_LEVEL_WARNING ::loom::LogLevel::kWarning
#define LOOM_LOG_LEVEL_ERROR ::loom::LogLevel::kError

#define LOG(severity)                                      \
  if (LOOM_LOG_LEVEL_##severity < ::loom::GetLogLevel()) { \
  } else                                                   \
    ::loom::internal::LogMessage(LOOM_LOG_LEVEL_##severity, __FILE__, __LINE__).stream()
