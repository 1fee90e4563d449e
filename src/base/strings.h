// Small string helpers shared by the rooms.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace loom {

// items[0] + sep + items[1] + ... ("" for none).
inline std::string JoinStrings(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

}  // namespace loom
