// BpeModel: byte-pair encoding as in HF tokenizers' BPE model: GPT-2 style byte-level vocabularies
// (Llama 3, Qwen, GPT-2) and SentencePiece-converted ones with "\u2581" and byte_fallback
// (Llama 2, Mistral, Gemma, Phi-3). Merges are applied lowest rank first (leftmost on ties)
// with a heap over a linked list of symbols, so long words cost O(n log n); a WordCache memoizes
// short words.
#pragma once

#include <array>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tokenizer/model.h"
#include "tokenizer/word_cache.h"

namespace loom {

struct BpeOptions {
  // Vocabulary strings are in the GPT-2 byte alphabet; Tokenize receives raw bytes.
  bool byte_level = false;
  // Unknown characters become <0xNN> byte tokens (when the vocabulary has them).
  bool byte_fallback = false;
  // A word that is itself in the vocabulary is emitted as one token without merging (Llama 3).
  bool ignore_merges = false;
  // Consecutive unknown characters share one unk token.
  bool fuse_unk = false;
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
};

class BpeModel final : public TokenizerModel {
 public:
  // `vocab` maps token strings to ids; `merges` are (left, right) token strings in rank order.
  // Errors name the offending merge (a part or the result missing from the vocabulary).
  static StatusOr<std::unique_ptr<BpeModel>> Create(
      StringMap<int32_t> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      BpeOptions options);
  // Reads a tokenizer.json "model" object of type BPE (merges as "a b" strings or [a, b]
  // arrays). May throw nlohmann::json exceptions (the loader catches them).
  static StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& j, bool byte_level);

  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const override;
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  const std::string* IdToToken(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(id_to_token_.size()); }
  // Byte-level: the longest token in raw bytes, when all 256 byte tokens exist. Otherwise the
  // longest token string, when byte_fallback has all 256 <0xNN> tokens and no subword affixes.
  std::optional<size_t> MaxBytesPerToken() const override;

  const BpeOptions& options() const { return options_; }

 private:
  BpeModel() = default;
  Status Init(StringMap<int32_t> vocab, BpeOptions options);
  Status AddMerge(std::string_view left, std::string_view right, int32_t rank);
  void ComputeSplitPoints();
  void TokenizeWord(std::string_view word, std::vector<int32_t>* ids) const;
  void InitialSymbols(std::string_view word, std::vector<int32_t>* symbols) const;

  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  BpeOptions options_;
  StringMap<int32_t> vocab_;              // token string -> id
  StringMap<int32_t> raw_vocab_;          // byte_level only: raw bytes -> id
  std::vector<std::string> id_to_token_;  // id -> token string ("" for holes)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (a,b) -> (rank, new id)
  std::array<int32_t, 256> byte_ids_{};  // byte_level: raw byte -> id; else <0xNN> ids (-1)
  int32_t unk_id_ = -1;
  // SentencePiece-style vocabularies: a word may be cut before "\u2581" when the previous
  // character never precedes "\u2581" inside any token (then no merge can cross the cut), so
  // a whole sentence becomes cacheable words. Empty marker = disabled.
  bool split_metaspace_ = false;  // SentencePiece-style: SplitAtMetaspace (metaspace.h)
  std::unordered_set<char32_t> sticky_before_marker_;
  WordCache cache_;
};

}  // namespace loom
