// libFuzzer entry point for the grammar compilers (GBNF, regex, choice list, JSON Schema; issue
// 22): any spec must compile or give a Status, never crash, hang or read out of bounds; a compiled
// grammar's matcher and token mask must take any bytes. The first input byte picks the front
// end, the rest is the spec; the spec's own bytes are then fed to the matcher (random text
// through the matcher, with checkpoints and rollbacks) and one mask over a small vocabulary is
// filled.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar_cache.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 4096) return 0;
  loom::GrammarSpec spec;
  switch (data[0] % 4) {
    case 0:
      spec.kind = loom::GrammarKind::kGbnf;
      break;
    case 1:
      spec.kind = loom::GrammarKind::kRegex;
      break;
    case 2:
      spec.kind = loom::GrammarKind::kChoice;
      break;
    default:
      spec.kind = loom::GrammarKind::kJsonSchema;
  }
  spec.text.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] >> 2) & 1) {
    spec.reasoning_open = "<think>";
    spec.reasoning_close = "</think>";
  }
  auto grammar = loom::CompileGrammarSpec(spec);
  if (!grammar.ok()) return 0;
  loom::GrammarMatcher m(*grammar);
  for (size_t i = 1; i < size; ++i) {
    const size_t cp = m.Checkpoint();
    if (!m.AcceptByte(data[i])) continue;
    if ((data[i] & 7) == 0) m.Rollback(cp);
  }
  (void)m.IsAccepting();
  static const loom::TokenVocabulary* vocab = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    for (const char* s : {"{\"", "\":", "true", "null", "ab", "</think>", "  ", "\\u00"}) {
      bytes.push_back(s);
    }
    bytes.push_back("");  // EOS
    const loom::TokenId eos = static_cast<loom::TokenId>(bytes.size() - 1);
    return new loom::TokenVocabulary(bytes, {}, {eos});
  }();
  std::vector<uint32_t> mask(vocab->mask_words());
  vocab->FillMask(m, mask.data());
  return 0;
}
