// StreamPlan: a decoder chain compiled for token-at-a-time decoding. Most real chains are
//   ByteLevel                                  (GPT-2, Llama 3, Qwen)
//   [per-token maps] [ByteFallback] [Fuse [Strip(c, n, 0)]]   (Llama 2, Mistral, Gemma, Phi-3)
// where a "per-token map" (Replace, Metaspace, WordPiece, Strip before Fuse) depends only on
// the token and on whether it is the first one. For those, every id's contribution is computed
// once at load time, and the IncrementalDecoder only concatenates pieces, holds back
// incomplete UTF-8 / byte-fallback runs and strips the leading characters. Other chains are
// not `supported` and the IncrementalDecoder falls back to re-decoding.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace loom {

class Decoder;

struct StreamPlan {
  bool supported = false;
  bool byte_level = false;           // pieces are raw bytes; output is lossy UTF-8 of the stream
  bool byte_fallback = false;        // <0xNN> pieces form runs decoded all-or-nothing
  bool join_with_space = false;      // no decoder: tokens joined with " "
  bool first_sensitive = false;      // a map behaves differently for the first token
  std::vector<const Decoder*> maps;  // per-token maps, in order (owned by the tokenizer)
  char32_t strip_char = U' ';
  size_t strip_count = 0;  // leading strip_char removed from the fused text (Strip start)

  // Per id, for a token that is not the first one: its text piece, or its byte (byte_value
  // >= 0) when it is a byte-fallback token. Sized to the tokenizer's id space.
  std::vector<std::string> pieces;
  std::vector<int16_t> byte_value;

  // Compiles `decoder` (null = no decoder). `token_of(id)` returns the token string of id or
  // nullptr; `num_ids` is the id space size.
  static StreamPlan Compile(const Decoder* decoder, int32_t num_ids,
                            const std::function<const std::string*(int32_t)>& token_of);
  // The piece of `token` as the first token (maps applied with first = true), and its byte
  // value (-1 when it is not a byte-fallback token).
  void FirstPiece(const std::string& token, std::string* piece, int* byte) const;
};

}  // namespace loom
