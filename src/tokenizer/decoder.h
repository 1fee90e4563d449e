// Decoder: the tokenizer.json "decoder" stage, turning token strings back into text
// (ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, WordPiece, BPEDecoder, Sequence).
// Semantics follow the Rust crate's decode_chain exactly: every step maps the list of token
// strings to a new list; the result is their concatenation. Immutable; thread-safe.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace loom {

class Decoder {
 public:
  enum class Kind {
    kByteLevel,
    kMetaspace,
    kByteFallback,
    kFuse,
    kStrip,
    kReplace,
    kWordPiece,
    kBpe,
    kSequence
  };
  virtual ~Decoder() = default;
  virtual Kind kind() const = 0;
  // One decode_chain step over *tokens (in place).
  virtual void DecodeChain(std::vector<std::string>* tokens) const = 0;
  // If this step transforms each token independently (given only whether it is the first
  // token), applies it to *token and returns true; returns false for cross-token steps.
  virtual bool MapToken(std::string* token, bool first) const { return false; }

  // decode_chain followed by concatenation.
  std::string Decode(std::vector<std::string> tokens) const;

  // May throw nlohmann::json exceptions (the loader catches them).
  static StatusOr<std::unique_ptr<Decoder>> FromJson(const nlohmann::json& j);
  static std::unique_ptr<Decoder> MakeByteLevel();
  // Replace("\u2581", " "), ByteFallback, Fuse, and Strip(" ", 1, 0) when strip_leading_space:
  // the decoder of SentencePiece-BPE vocabularies (Llama 2 tokenizer.json, GGUF "llama").
  static std::unique_ptr<Decoder> MakeSentencePiece(bool strip_leading_space);
};

// Steps of a (possibly nested) Sequence in order; a non-Sequence decoder is its own only step.
std::vector<const Decoder*> FlattenDecoder(const Decoder* decoder);

// Accessors for the streaming compiler (incremental_decoder.cc).
struct StripSpec {
  char32_t content;
  size_t start, stop;
};
// Returns the Strip parameters when decoder->kind() == kStrip.
StripSpec GetStripSpec(const Decoder* decoder);

}  // namespace loom
