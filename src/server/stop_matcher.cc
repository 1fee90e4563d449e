#include "server/stop_matcher.h"

#include <algorithm>

namespace loom {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopMatcher::Result StopMatcher::Add(std::string_view delta) {
  Result result;
  if (stopped_) return result;
  held_.append(delta);
  if (stops_.empty()) {
    result.text.swap(held_);
    return result;
  }
  // Earliest match wins; on a tie the longer stop string.
  size_t best_pos = std::string::npos;
  const std::string* best = nullptr;
  for (const auto& s : stops_) {
    size_t pos = held_.find(s);
    if (pos == std::string::npos) continue;
    if (pos < best_pos || (pos == best_pos && s.size() > best->size())) {
      best_pos = pos;
      best = &s;
    }
  }
  if (best != nullptr) {
    stopped_ = true;
    result.text = held_.substr(0, best_pos);
    result.stop = *best;
    held_.clear();
    return result;
  }
  // Hold back the longest suffix of held_ that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_) {
    size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  result.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return result;
}

std::string StopMatcher::Flush() {
  std::string out;
  if (!stopped_) out.swap(held_);
  return out;
}

}  // namespace loom
