// GrammarCache: compiled grammars by spec (kind + text), so that requests repeating a schema
// (the common case: one tool or response_format per client) compile it once. LRU-bounded.
// Thread-safe: one mutex around the map; compilation runs outside it (two threads missing on the
// same spec both compile; the second insert wins, which is harmless).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "grammar/compiled_grammar.h"
#include "grammar/json_schema.h"

namespace loom {

enum class GrammarKind : uint8_t {
  kGbnf,        // text: GBNF
  kRegex,       // text: a regex (regex_grammar.h)
  kChoice,      // text: a JSON array of strings
  kJsonSchema,  // text: a JSON Schema document
};

// A rule a kGbnf spec's text refers to by `name`, built by another front end (CompileGbnf's
// externals): what a tool call's markup wraps around each tool's parameters.
struct GrammarPart {
  enum class Kind : uint8_t {
    kJsonSchema,  // text: a JSON Schema document (compiled with the cache's options)
    kUpTo,        // text: a marker; any bytes up to and including its first occurrence (UpTo)
  };
  std::string name;
  Kind kind = Kind::kJsonSchema;
  std::string text;
  // kJsonSchema: a schema compiled instead when `text` does not compile (a tool whose schema
  // the engine cannot express still gets well-formed calls); empty: the error stands.
  std::string fallback = {};
  // kJsonSchema: ", " and ": " separators (JsonSchemaOptions::spaced_separators).
  bool spaced = false;
  bool operator==(const GrammarPart&) const = default;
};

struct GrammarSpec {
  GrammarKind kind = GrammarKind::kGbnf;
  std::string text;
  std::vector<GrammarPart> parts = {};  // kGbnf only
  // Wrappings applied after the front end, innermost first (grammar_compose.h): Framed when a
  // frame is set (a tool call's markup around its JSON), then Triggered when trigger is set
  // (free text until the trigger, once or, with trigger_repeats, each time; with
  // trigger_at_start AtStart: the trigger only opens the output), then
  // AfterReasoning when reasoning_close is set (the grammar starts after the reasoning section).
  std::string frame_prefix = {}, frame_suffix = {};
  std::string trigger = {};
  bool trigger_repeats = false;
  bool trigger_at_start = false;  // AtStart instead of Triggered (trigger_repeats unused)
  std::string reasoning_open = {}, reasoning_close = {};
  bool reasoning_already_open = false;
  bool operator==(const GrammarSpec&) const = default;
};

// Compiles `spec` with the matching front end and its wrappings (no caching), within `budget`.
StatusOr<std::shared_ptr<const CompiledGrammar>> CompileGrammarSpec(
    const GrammarSpec& spec, const JsonSchemaOptions& options = {},
    const GrammarBudget& budget = {});

class GrammarCache {
 public:
  // Keeps at most `capacity` (>= 1) grammars; `options` applies to every JSON Schema; a compile
  // past `timeout_ms` (0: none) is refused.
  explicit GrammarCache(size_t capacity, JsonSchemaOptions options = {}, int64_t timeout_ms = 0);

  // The compiled grammar of `spec`, from the cache or compiled now (errors are not cached).
  StatusOr<std::shared_ptr<const CompiledGrammar>> Get(const GrammarSpec& spec);

  size_t size() const;
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct Entry {
    GrammarSpec spec;
    std::shared_ptr<const CompiledGrammar> grammar;
  };
  static uint64_t Hash(const GrammarSpec& spec);

  const size_t capacity_;
  const JsonSchemaOptions options_;
  const int64_t timeout_ms_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // front = most recently used
  std::unordered_multimap<uint64_t, std::list<Entry>::iterator> index_;  // Hash(spec) -> entry
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace loom
