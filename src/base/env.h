// Integer environment switches (A/B knobs of the CUDA kernels and the benchmarks).
#pragma once

#include <cstdlib>

namespace loom {

// The value of environment variable `name` as an int (atoi), or `fallback` when it is unset or
// empty.
inline int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? std::atoi(v) : fallback;
}

}  // namespace loom
