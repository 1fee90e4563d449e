#include "grammar/compiled_grammar.h"

namespace loom {

StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Compile(const Grammar& grammar) {
  RETURN_IF_ERROR(grammar.Validate());
  auto out = std::make_shared<CompiledGrammar>();
  for (const GrammarRule& rule : grammar.rules()) {
    out->rule_alt_begin_.push_back(static_cast<int32_t>(out->alt_starts_.size()));
    for (const GrammarSequence& alt : rule.alternatives) {
      out->alt_starts_.push_back(static_cast<int32_t>(out->elements_.size()));
      for (const GrammarElement& e : alt) {
        if (e.kind == GrammarElement::Kind::kRule) {
          out->elements_.push_back({Kind::kRule, e.rule_idx});
        } else {
          out->elements_.push_back({Kind::kBytes, static_cast<int32_t>(out->byte_sets_.size())});
          out->byte_sets_.push_back(e.bytes);
        }
      }
      out->elements_.push_back({Kind::kEnd, 0});
    }
  }
  out->rule_alt_begin_.push_back(static_cast<int32_t>(out->alt_starts_.size()));
  out->root_idx_ = grammar.root_idx();
  return std::shared_ptr<const CompiledGrammar>(std::move(out));
}

}  // namespace loom
