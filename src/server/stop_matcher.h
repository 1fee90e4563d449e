// StopMatcher: finds stop strings in streamed text. Text that could be the start of a stop
// string is held back until the next delta decides it, so a stop string split across chunks
// (or tokens) is never emitted, and nothing after it either.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

class StopMatcher {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;                 // safe to emit now
    std::optional<std::string> stop;  // the stop string that matched (the stream ends)
  };
  // Appends `delta`. After a match, further calls return nothing.
  Result Add(std::string_view delta);
  // The held-back tail, at the end of the stream (no stop can complete any more).
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace loom
