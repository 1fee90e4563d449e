// Regex: a compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) used by the
// Split/Replace components of tokenizer.json and by the GGUF pre-tokenizer presets. Immutable
// after construction; FindAll is thread-safe (per-thread match data and JIT stack).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace loom {

class Regex {
 public:
  // Compiles `pattern` (Oniguruma/HF syntax: \p{L}, (?i:...), lookahead work as in PCRE2).
  // Errors name the pattern and the PCRE2 message.
  static StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern);
  // A pattern that matches `literal` exactly (for {"String": ...} patterns).
  static StatusOr<std::unique_ptr<Regex>> Literal(std::string_view literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges [start, end) of successive non-overlapping leftmost matches in `subject` (valid
  // UTF-8). An empty match advances one character, as the Rust regex iterators do.
  void FindAll(std::string_view subject, std::vector<std::pair<size_t, size_t>>* matches) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace loom
