// StreamDetokenizer: turns a request's generated token ids into text deltas as they arrive,
// holding back incomplete UTF-8 (a trailing U+FFFD) until the next token completes it. Works
// over any TextCodec::Decode by re-decoding a short window (the prefix/read offset scheme of
// HF text-generation-inference and vLLM), so tokenizers whose decoders strip or merge pieces
// (SentencePiece's leading "▁") produce the same text as one Decode of all ids.
#pragma once

#include <string>
#include <vector>

#include "server/text_codec.h"

namespace loom {

class StreamDetokenizer {
 public:
  // `context` are ids before the generated ones (the prompt's tail); they give the first
  // generated token its left neighbour and are never emitted. `codec` must outlive this.
  StreamDetokenizer(const TextCodec* codec, std::vector<TokenId> context,
                    bool skip_special_tokens = true);

  // Appends `token` and returns the newly completed text (maybe "").
  std::string Add(TokenId token);
  // Returns whatever is still held back (incomplete UTF-8 decodes as U+FFFD). Call once, last.
  std::string Flush();

 private:
  std::string DecodeRange(size_t begin, size_t end) const;

  const TextCodec* codec_;
  bool skip_special_tokens_;
  std::vector<TokenId> ids_;  // context + generated
  size_t prefix_offset_;      // start of the decode window
  size_t read_offset_;        // ids before this have been emitted
};

}  // namespace loom
