#include "grammar/grammar_cache.h"

#include <functional>

#include "grammar/gbnf.h"
#include "grammar/grammar_compose.h"
#include "grammar/regex_grammar.h"

namespace loom {
namespace {

// The front end's grammar of `spec`, before its wrappings.
StatusOr<Grammar> FrontEnd(const GrammarSpec& spec, const JsonSchemaOptions& options,
                           const GrammarBudget& budget) {
  switch (spec.kind) {
    case GrammarKind::kGbnf: {
      if (spec.parts.empty()) return CompileGbnf(spec.text);
      Grammar base;
      std::vector<std::pair<std::string, int32_t>> externals;
      for (const GrammarPart& part : spec.parts) {
        JsonSchemaOptions part_options = options;
        part_options.spaced_separators = part.spaced;
        StatusOr<Grammar> g = part.kind == GrammarPart::Kind::kUpTo
                                  ? StatusOr<Grammar>(UpTo(part.text))
                                  : CompileJsonSchemaText(part.text, part_options, budget);
        if (!g.ok() && part.kind == GrammarPart::Kind::kJsonSchema && !part.fallback.empty()) {
          g = CompileJsonSchemaText(part.fallback, part_options, budget);
        }
        if (!g.ok()) return g.status();
        externals.emplace_back(part.name, base.Embed(*g, part.name));
        RETURN_IF_ERROR(budget.Check(base.rules().size()));
      }
      return CompileGbnf(spec.text, std::move(base), externals);
    }
    case GrammarKind::kRegex:
      return CompileRegex(spec.text);
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
      return CompileChoice(choices);
    }
    case GrammarKind::kJsonSchema:
      return CompileJsonSchemaText(spec.text, options, budget);
  }
  return InternalError("grammar: unknown spec kind");
}

}  // namespace

StatusOr<std::shared_ptr<const CompiledGrammar>> CompileGrammarSpec(
    const GrammarSpec& spec, const JsonSchemaOptions& options, const GrammarBudget& budget) {
  ASSIGN_OR_RETURN(Grammar g, FrontEnd(spec, options, budget));
  if (!spec.frame_prefix.empty() || !spec.frame_suffix.empty()) {
    g = Framed(std::move(g), spec.frame_prefix, spec.frame_suffix);
  }
  if (!spec.trigger.empty()) {
    g = spec.trigger_at_start ? AtStart(std::move(g), spec.trigger)
                              : Triggered(std::move(g), spec.trigger, spec.trigger_repeats);
  }
  if (!spec.reasoning_close.empty()) {
    g = AfterReasoning(std::move(g), spec.reasoning_open, spec.reasoning_close,
                       spec.reasoning_already_open);
  }
  return CompiledGrammar::Compile(g, budget);
}

GrammarCache::GrammarCache(size_t capacity, JsonSchemaOptions options, int64_t timeout_ms)
    : capacity_(capacity), options_(options), timeout_ms_(timeout_ms) {
  CHECK_GE(capacity_, size_t{1});
}

uint64_t GrammarCache::Hash(const GrammarSpec& spec) {
  const std::hash<std::string> h;
  uint64_t x = h(spec.text) * 31 + static_cast<uint64_t>(spec.kind);
  for (const std::string* s : {&spec.frame_prefix, &spec.frame_suffix, &spec.trigger,
                               &spec.reasoning_open, &spec.reasoning_close}) {
    x = x * 1000003 ^ h(*s);
  }
  for (const GrammarPart& p : spec.parts) {
    x = ((x * 1000003 ^ h(p.name)) * 1000003 ^ h(p.text)) * 1000003 ^ h(p.fallback);
    x = x * 6 + static_cast<uint64_t>(p.kind) * 2 + (p.spaced ? 1 : 0);
  }
  return x * 8 + (spec.reasoning_already_open ? 1 : 0) + (spec.trigger_repeats ? 2 : 0) +
         (spec.trigger_at_start ? 4 : 0);
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
                   CompileGrammarSpec(spec, options_, GrammarBudget::WithTimeout(timeout_ms_)));
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
