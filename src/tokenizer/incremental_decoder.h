// IncrementalDecoder: streaming detokenization for one generated sequence. Feed ids one at a
// time; each Add returns the text that just became final. Guarantees:
//   * every returned delta is valid UTF-8 (incomplete multi-byte sequences and byte-fallback
//     runs are held back until they complete or the stream is flushed);
//   * concat(Add(id_1) ... Add(id_n), Flush()) == tokenizer.Decode({id_1..id_n}, skip) exactly,
//     including SentencePiece's leading-space rule (only the first token loses its space).
// Cost: a few tens of ns per token for the compiled decoder chains (see StreamPlan); chains
// that do not compile fall back to re-decoding the sequence (correct but O(n) per token).
// Not thread-safe (one per sequence); the Tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace loom {

class IncrementalDecoder {
 public:
  IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens);

  // Consumes `id`; returns the newly final text (often empty while bytes are held back).
  std::string Add(int32_t id);
  // Same, appending to *out (no allocation for the common short delta).
  void AddTo(int32_t id, std::string* out);
  // Ends the sequence: returns everything still held back (an incomplete UTF-8 tail becomes
  // U+FFFD, as a full Decode would) and resets the decoder to its initial state.
  std::string Flush();

 private:
  void Emit(std::string_view text, std::string* out);
  void EmitByteLevel(std::string* out, bool final);
  void FlushByteRun(std::string* out);

  const Tokenizer* tokenizer_;
  const StreamPlan* plan_;
  bool skip_special_;
  size_t num_tokens_ = 0;       // tokens that reached the decoder chain (after skipping)
  std::string pending_;         // byte-level: undecided UTF-8 tail; byte-fallback: the run
  size_t strip_remaining_ = 0;  // leading strip_char still to remove from the stream
  // Fallback for chains without a StreamPlan.
  std::vector<int32_t> ids_;
  size_t emitted_bytes_ = 0;
};

}  // namespace loom
