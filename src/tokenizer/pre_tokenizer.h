// PreTokenizer: the tokenizer.json "pre_tokenizer" stage. Splits a normalized piece of text
// into words that the model tokenizes independently (Split with a regex, ByteLevel, Metaspace,
// Digits, Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer, Sequence).
// Immutable; thread-safe.
//
// ByteLevel note: HF maps every byte of a word to the GPT-2 alphabet here. loom keeps the raw
// bytes and lets the byte-level BPE model key its vocabulary by raw bytes instead (same ids,
// no re-encoding); so ByteLevel must be the last step of a Sequence.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace loom {

class Regex;

// How the pieces matched by a pattern are kept (HF SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Refines *words in place: every word is replaced by its sub-words, order kept, empty words
  // dropped. `first_section` is true when the words come from the very start of the input
  // (before any added token), which Metaspace's prepend_scheme "first" needs.
  virtual void PreTokenize(std::vector<std::string>* words, bool first_section) const = 0;
  // True when this stage (or the last stage of a Sequence) is ByteLevel.
  virtual bool IsByteLevel() const { return false; }
  // True when the words out hold every byte of the words in (they may add bytes: a prefix space,
  // U+2581 for ' '); false when a stage may drop text (a Removed split, Whitespace).
  virtual bool KeepsEveryByte() const { return false; }

  // May throw nlohmann::json exceptions on malformed JSON (the loader catches them).
  static StatusOr<std::unique_ptr<PreTokenizer>> FromJson(const nlohmann::json& j);

  // Split(regex, Isolated) steps applied in order, then ByteLevel without regex: the GGUF
  // "gpt2"-type pre-tokenizers (llama.cpp regex presets).
  static StatusOr<std::unique_ptr<PreTokenizer>> MakeRegexSequenceByteLevel(
      const std::vector<std::string>& patterns);
  // GPT-2: ByteLevel(add_prefix_space=false, use_regex=true).
  static StatusOr<std::unique_ptr<PreTokenizer>> MakeGpt2ByteLevel();
};

}  // namespace loom
