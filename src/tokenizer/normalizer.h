// Normalizer: the tokenizer.json "normalizer" stage (NFC/NFKC/NFD/NFKD, Lowercase, Strip,
// StripAccents, Replace, Prepend, BertNormalizer, Sequence), applied to every piece of input
// text between added tokens before pre-tokenization. Immutable; thread-safe.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "base/status.h"

namespace loom {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `text` (valid UTF-8 in, valid UTF-8 out).
  virtual void Normalize(std::string* text) const = 0;

  // Builds a normalizer from its tokenizer.json object. Unknown types -> UnimplementedError.
  // May throw nlohmann::json exceptions on malformed JSON (the loader catches them).
  static StatusOr<std::unique_ptr<Normalizer>> FromJson(const nlohmann::json& j);

  // Factories used by the GGUF and vocab.json loaders.
  static std::unique_ptr<Normalizer> MakePrepend(std::string prefix);
  static std::unique_ptr<Normalizer> MakeReplace(std::string from, std::string to);
  static std::unique_ptr<Normalizer> MakeSequence(std::vector<std::unique_ptr<Normalizer>> steps);
};

}  // namespace loom
