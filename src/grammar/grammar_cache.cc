#include "grammar/grammar_cache.h"

#include <functional>

#include "grammar/gbnf.h"
#include "grammar/regex_grammar.h"

namespace loom {

StatusOr<std::shared_ptr<const CompiledGrammar>> CompileGrammarSpec(
    const GrammarSpec& spec, const JsonSchemaOptions& options) {
  switch (spec.kind) {
    case GrammarKind::kGbnf: {
      ASSIGN_OR_RETURN(const Grammar g, CompileGbnf(spec.text));
      return CompiledGrammar::Compile(g);
    }
    case GrammarKind::kRegex: {
      ASSIGN_OR_RETURN(const Grammar g, CompileRegex(spec.text));
      return CompiledGrammar::Compile(g);
    }
    case GrammarKind::kChoice: {
      const nlohmann::json j = nlohmann::json::parse(spec.text, nullptr, false);
      if (j.is_discarded() || !j.is_array()) {
        return InvalidArgumentError("choice: expected a JSON array of strings");
      }
      std::vector<std::string> choices;
      for (const auto& c : j) {
        if (!c.is_string()) return InvalidArgumentError("choice: expected a JSON array of strings");
        choices.push_back(c.get<std::string>());
      }
      ASSIGN_OR_RETURN(const Grammar g, CompileChoice(choices));
      return CompiledGrammar::Compile(g);
    }
    case GrammarKind::kJsonSchema: {
      ASSIGN_OR_RETURN(const Grammar g, CompileJsonSchemaText(spec.text, options));
      return CompiledGrammar::Compile(g);
    }
  }
  return InternalError("grammar: unknown spec kind");
}

GrammarCache::GrammarCache(size_t capacity, JsonSchemaOptions options)
    : capacity_(capacity), options_(options) {
  CHECK_GE(capacity_, size_t{1});
}

uint64_t GrammarCache::Hash(const GrammarSpec& spec) {
  return std::hash<std::string>()(spec.text) * 31 + static_cast<uint64_t>(spec.kind);
}

StatusOr<std::shared_ptr<const CompiledGrammar>> GrammarCache::Get(const GrammarSpec& spec) {
  const uint64_t h = Hash(spec);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto [it, end] = index_.equal_range(h); it != end; ++it) {
      if (it->second->spec == spec) {
        lru_.splice(lru_.begin(), lru_, it->second);
        ++hits_;
        return it->second->grammar;
      }
    }
    ++misses_;
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const CompiledGrammar> grammar,
                   CompileGrammarSpec(spec, options_));
  std::lock_guard<std::mutex> lock(mu_);
  for (auto [it, end] = index_.equal_range(h); it != end; ++it) {
    if (it->second->spec == spec) return it->second->grammar;  // another thread got here first
  }
  lru_.push_front({spec, grammar});
  index_.emplace(h, lru_.begin());
  while (lru_.size() > capacity_) {
    const auto victim = std::prev(lru_.end());
    for (auto [it, end] = index_.equal_range(Hash(victim->spec)); it != end; ++it) {
      if (it->second == victim) {
        index_.erase(it);
        break;
      }
    }
    lru_.erase(victim);
  }
  return grammar;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

uint64_t GrammarCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

uint64_t GrammarCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace loom
