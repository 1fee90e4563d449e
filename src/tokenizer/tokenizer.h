// Tokenizer: text <-> token ids, byte-identical with Hugging Face `tokenizers` for the
// tokenizer.json files real models ship (and for GGUF vocabularies, following llama.cpp).
//
//   Encode: added tokens split out of the raw text -> Normalizer per piece -> normalized added
//           tokens -> PreTokenizer -> TokenizerModel per word -> post-processor (BOS/EOS) if asked.
//   Decode: ids -> token strings (specials skipped if asked) -> Decoder chain.
//
// Invalid UTF-8 input: Encode replaces every ill-formed subpart with U+FFFD first (what Python
// would see after bytes.decode("utf-8", "replace")); EncodeChecked rejects it instead.
// Decode never returns invalid UTF-8.
//
// Immutable after loading; every method is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/stream_plan.h"

namespace loom {

class Decoder;
class TokenizerModel;
class Normalizer;
class PreTokenizer;

class Tokenizer {
 public:
  // A model directory: tokenizer.json (+ tokenizer_config.json when present), or the GPT-2
  // style vocab.json + merges.txt pair. Errors name the directory / file.
  static StatusOr<std::unique_ptr<Tokenizer>> FromHfDirectory(const std::string& dir);
  // tokenizer.json, plus an optional tokenizer_config.json ("" = none) whose bos_token,
  // eos_token, add_bos_token and add_eos_token override the post-processor.
  static StatusOr<std::unique_ptr<Tokenizer>> FromTokenizerJson(
      const std::string& json_path, const std::string& config_path = "");
  // Same, from the file contents.
  static StatusOr<std::unique_ptr<Tokenizer>> FromTokenizerJsonText(
      std::string_view tokenizer_json, std::string_view config_json = "");
  // GPT-2 vocab.json + merges.txt (byte-level BPE, GPT-2 regex, <|endoftext|> special).
  static StatusOr<std::unique_ptr<Tokenizer>> FromVocabAndMerges(const std::string& vocab_path,
                                                                 const std::string& merges_path);
  // A GGUF vocabulary: "llama" (SentencePiece scores) or "gpt2" (BPE merges + pre preset).
  static StatusOr<std::unique_ptr<Tokenizer>> FromGgufVocab(const GgufVocab& vocab);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text`; add_special_tokens adds the model's BOS/EOS template. Special-token
  // strings inside `text` are always recognized (HF's default split_special_tokens=false).
  std::vector<TokenId> Encode(std::string_view text, bool add_special_tokens) const;
  // As Encode, but InvalidArgumentError (with the byte offset) for ill-formed UTF-8.
  StatusOr<std::vector<TokenId>> EncodeChecked(std::string_view text,
                                               bool add_special_tokens) const;
  // A lower bound on Encode(text, add_special_tokens).size(), from byte counts alone: splits out
  // the added tokens and runs the normalizer (one pass over `text`), but neither the
  // pre-tokenizer nor the model. 0 when max_bytes_per_token() is nullopt. For refusing a prompt
  // that cannot fit a context before paying for its tokenization.
  size_t MinTokenCount(std::string_view text, bool add_special_tokens) const;
  // The most bytes of normalized text (raw text for an added token) that one token of Encode
  // stands for, computed from the vocabulary at load; nullopt when no such bound holds: the model
  // can map a run of characters to one unknown token or drop text (TokenizerModel::
  // MaxBytesPerToken), the pre-tokenizer drops text (Whitespace), or an added token swallows
  // whitespace (lstrip / rstrip).
  std::optional<size_t> max_bytes_per_token() const { return max_bytes_per_token_; }
  // Text of `ids` (unknown ids are ignored, as HF does). No clean_up_tokenization_spaces.
  std::string Decode(std::span<const TokenId> ids, bool skip_special_tokens) const;

  // Size of the id space (model vocabulary and added tokens).
  int32_t vocab_size() const { return num_ids_; }
  std::optional<TokenId> TokenToId(std::string_view token) const;
  // The token string of id as written in the vocabulary; nullopt for an unknown id.
  std::optional<std::string> IdToToken(TokenId id) const;
  std::optional<TokenId> bos_id() const { return bos_id_; }
  std::optional<TokenId> eos_id() const { return eos_id_; }
  // "" when the model has none (chat templates read these).
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }
  // True for added tokens marked special (skipped by skip_special_tokens).
  bool IsSpecial(TokenId id) const { return added_.IsSpecial(id); }
  const AddedVocabulary& added_vocabulary() const { return added_; }
  // Ids added by add_special_tokens before / after the text.
  const std::vector<TokenId>& prefix_ids() const { return prefix_ids_; }
  const std::vector<int32_t>& suffix_ids() const { return suffix_ids_; }
  // tokenizer_config.json clean_up_tokenization_spaces (transformers applies it in decode;
  // loom's Decode does not, like the Rust library).
  bool clean_up_tokenization_spaces() const { return clean_up_tokenization_spaces_; }

  // The compiled decoder used by IncrementalDecoder.
  const StreamPlan& stream_plan() const { return stream_plan_; }
  // Token string lookup without a copy (added tokens first); nullptr for an unknown id.
  const std::string* TokenString(int32_t id) const;

 private:
  Tokenizer();
  void EncodeInto(std::string_view text, std::vector<int32_t>* ids) const;
  void TokenizeSection(std::string_view text, bool first_section, std::vector<int32_t>* ids) const;
  // Called once every component is set: builds the added-token matchers, id space, stream plan
  // and max_bytes_per_token_.
  void Finalize();
  std::optional<size_t> ComputeMaxBytesPerToken() const;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<TokenizerModel> model_;
  std::unique_ptr<Decoder> decoder_;
  AddedVocabulary added_;
  std::vector<int32_t> prefix_ids_, suffix_ids_;
  std::optional<int32_t> bos_id_, eos_id_;
  std::string bos_token_, eos_token_;
  bool clean_up_tokenization_spaces_ = false;
  int32_t num_ids_ = 0;
  std::optional<size_t> max_bytes_per_token_;
  StreamPlan stream_plan_;
};

}  // namespace loom
