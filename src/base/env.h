// Integer environment switches. The last reader is src/engine/engine.cc's LOOM_STEP_TRACE; the
// CLI now sets EngineConfig::step_trace instead (--step-trace, or LOOM_STEP_TRACE read in
// src/cli/session.cc), so this header goes once Engine::Step reads config_.step_trace. Do not
// add readers: configuration comes from the CLI (STYLE.md rule 9).
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
