// WordPieceModel: BERT-style greedy longest-match-first with a "##" continuation prefix; a word
// with an untokenizable part (or longer than max_input_chars_per_word) becomes one [UNK].
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/model.h"

namespace loom {

class WordPieceModel final : public TokenizerModel {
 public:
  // May throw nlohmann::json exceptions (the loader catches them). Errors: unk not in vocab.
  static StatusOr<std::unique_ptr<WordPieceModel>> FromJson(const nlohmann::json& j);

  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const override;
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  const std::string* IdToToken(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  StringMap<int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::string prefix_ = "##";
  size_t max_chars_ = 100;
  int32_t unk_id_ = -1;
};

}  // namespace loom
