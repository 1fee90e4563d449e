// A fake process environment for tests of what reads LOOM_* variables through an EnvLookup
// (backend/cuda_tuning.h, cli/session.h).
#pragma once

#include <map>
#include <string>

#include "backend/cuda_tuning.h"

namespace loom::test {

// name -> value from `vars`; nullptr for any other name.
inline EnvLookup FakeEnv(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace loom::test
