#include "tokenizer/wordpiece_model.h"

#include <nlohmann/json.hpp>

#include "tokenizer/unicode.h"

namespace loom {

StatusOr<std::unique_ptr<WordPieceModel>> WordPieceModel::FromJson(const nlohmann::json& j) {
  auto m = std::make_unique<WordPieceModel>();
  int32_t max_id = -1;
  for (auto it = j.at("vocab").begin(); it != j.at("vocab").end(); ++it) {
    const int32_t id = it.value().get<int32_t>();
    m->vocab_.emplace(it.key(), id);
    max_id = std::max(max_id, id);
  }
  m->id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [t, id] : m->vocab_) m->id_to_token_[id] = t;
  m->prefix_ = j.value("continuing_subword_prefix", std::string("##"));
  m->max_chars_ = j.value("max_input_chars_per_word", 100);
  const std::string unk = j.value("unk_token", std::string("[UNK]"));
  auto it = m->vocab_.find(unk);
  if (it == m->vocab_.end()) {
    return InvalidArgumentError("WordPiece unk_token '" + unk + "' is not in the vocabulary");
  }
  m->unk_id_ = it->second;
  return m;
}

std::optional<int32_t> WordPieceModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* WordPieceModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || id_to_token_[id].empty()) {
    return nullptr;
  }
  return &id_to_token_[id];
}

void WordPieceModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  size_t num_chars = 0;
  for (unsigned char c : word) num_chars += (c & 0xC0) != 0x80;
  if (num_chars > max_chars_) {
    ids->push_back(unk_id_);
    return;
  }
  std::vector<int32_t> sub;
  std::string key;
  size_t start = 0;
  while (start < word.size()) {
    size_t end = word.size();
    int32_t found = -1;
    while (start < end) {
      key.clear();
      if (start > 0) key += prefix_;
      key.append(word.substr(start, end - start));
      auto it = vocab_.find(key);
      if (it != vocab_.end()) {
        found = it->second;
        break;
      }
      do {
        --end;
      } while (end > start && (static_cast<uint8_t>(word[end]) & 0xC0) == 0x80);
    }
    if (found < 0) {
      ids->push_back(unk_id_);
      return;
    }
    sub.push_back(found);
    start = end;
  }
  ids->insert(ids->end(), sub.begin(), sub.end());
}

}  // namespace loom
