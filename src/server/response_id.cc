#include "server/response_id.h"

#include <atomic>
#include <cstdint>
#include <random>

namespace loom {

std::string NewResponseId(const std::string& prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  uint64_t x = salt ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  static const char* kDigits = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) {
    id.push_back(kDigits[x % 36]);
    x = x / 36 + (static_cast<uint64_t>(i) + 1) * 0x2545F4914F6CDD1Dull;
  }
  return id;
}

}  // namespace loom
