// UnigramModel: SentencePiece Unigram (T5, ALBERT, XLNet style tokenizer.json "Unigram"):
// Viterbi over all vocabulary pieces by log-probability score; a character no piece covers
// costs min_score - 10 as <unk>; consecutive unknowns fuse; optional byte_fallback.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/model.h"

namespace loom {

class UnigramModel final : public TokenizerModel {
 public:
  // pieces[i] = (token, score) of id i. Errors: unk_id out of range.
  static StatusOr<std::unique_ptr<UnigramModel>> Create(
      std::vector<std::pair<std::string, double>> pieces, std::optional<int32_t> unk_id,
      bool byte_fallback);
  // May throw nlohmann::json exceptions (the loader catches them).
  static StatusOr<std::unique_ptr<UnigramModel>> FromJson(const nlohmann::json& j);

  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const override;
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  const std::string* IdToToken(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  // The longest piece, when unknown runs (fused into one <unk>) always fall back to bytes: an
  // unk piece, byte_fallback and all 256 <0xNN> pieces. Else nullopt.
  std::optional<size_t> MaxBytesPerToken() const override;

 private:
  UnigramModel() = default;
  std::vector<std::pair<std::string, double>> pieces_;
  StringMap<int32_t> vocab_;
  std::optional<int32_t> unk_id_;
  bool byte_fallback_ = false;
  double min_score_ = 0;
  size_t max_piece_bytes_ = 0;
};

}  // namespace loom
