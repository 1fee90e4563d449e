#include "tokenizer/unigram_model.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "tokenizer/unicode.h"

namespace loom {

StatusOr<std::unique_ptr<UnigramModel>> UnigramModel::Create(
    std::vector<std::pair<std::string, double>> pieces, std::optional<int32_t> unk_id,
    bool byte_fallback) {
  std::unique_ptr<UnigramModel> m(new UnigramModel());
  if (unk_id && (*unk_id < 0 || static_cast<size_t>(*unk_id) >= pieces.size())) {
    return InvalidArgumentError("Unigram unk_id " + std::to_string(*unk_id) +
                                " is outside the vocabulary");
  }
  m->pieces_ = std::move(pieces);
  m->unk_id_ = unk_id;
  m->byte_fallback_ = byte_fallback;
  m->min_score_ = std::numeric_limits<double>::max();
  for (size_t i = 0; i < m->pieces_.size(); ++i) {
    m->vocab_.emplace(m->pieces_[i].first, static_cast<int32_t>(i));
    m->min_score_ = std::min(m->min_score_, m->pieces_[i].second);
    m->max_piece_bytes_ = std::max(m->max_piece_bytes_, m->pieces_[i].first.size());
  }
  return m;
}

StatusOr<std::unique_ptr<UnigramModel>> UnigramModel::FromJson(const nlohmann::json& j) {
  std::vector<std::pair<std::string, double>> pieces;
  for (const auto& p : j.at("vocab")) {
    pieces.emplace_back(p.at(0).get<std::string>(), p.at(1).get<double>());
  }
  std::optional<int32_t> unk;
  if (j.contains("unk_id") && j["unk_id"].is_number_integer()) unk = j["unk_id"].get<int32_t>();
  return Create(std::move(pieces), unk, j.value("byte_fallback", false));
}

std::optional<int32_t> UnigramModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* UnigramModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return nullptr;
  return &pieces_[id].first;
}

std::optional<size_t> UnigramModel::MaxBytesPerToken() const {
  // Without an unk piece an unreachable word is dropped; without byte fallback an unknown run
  // becomes one <unk>. With both, every id is a piece whose string is the text it covers, or a
  // byte token for one byte.
  if (!unk_id_ || !byte_fallback_) return std::nullopt;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    if (vocab_.find(std::string_view(name)) == vocab_.end()) return std::nullopt;
  }
  return std::max<size_t>(max_piece_bytes_, 1);
}

void UnigramModel::Tokenize(std::string_view s, std::vector<int32_t>* ids) const {
  if (s.empty()) return;
  constexpr double kUnkPenalty = 10.0;
  const double unk_score = min_score_ - kUnkPenalty;
  struct Node {
    int32_t id = -1;
    double score = 0;
    int64_t starts_at = -1;
  };
  std::vector<Node> best(s.size() + 1);
  size_t start = 0;
  while (start < s.size()) {
    const double base = best[start].score;
    const size_t mblen = std::min(unicode::SequenceLengthFromLead(s[start]), s.size() - start);
    bool has_single = false;
    const size_t max_len = std::min(max_piece_bytes_, s.size() - start);
    for (size_t len = 1; len <= max_len; ++len) {
      auto it = vocab_.find(s.substr(start, len));
      if (it == vocab_.end()) continue;
      Node& t = best[start + len];
      const double cand = base + pieces_[it->second].second;
      if (t.starts_at < 0 || cand > t.score) t = {it->second, cand, static_cast<int64_t>(start)};
      if (len == mblen) has_single = true;
    }
    if (!has_single && unk_id_) {
      Node& t = best[start + mblen];
      const double cand = base + unk_score;
      if (t.starts_at < 0 || cand > t.score) t = {*unk_id_, cand, static_cast<int64_t>(start)};
    }
    start += mblen;
  }
  // Backtrack into (start, end, id) pieces, fusing runs of unk.
  std::vector<std::pair<size_t, size_t>> spans;
  std::vector<int32_t> span_ids;
  size_t end = s.size();
  while (end > 0) {
    const Node& n = best[end];
    if (n.starts_at < 0) return;  // unreachable without an unk piece: drop like HF's error path
    const size_t b = static_cast<size_t>(n.starts_at);
    if (unk_id_ && n.id == *unk_id_ && !span_ids.empty() && span_ids.back() == *unk_id_) {
      spans.back().first = b;
    } else {
      spans.emplace_back(b, end);
      span_ids.push_back(n.id);
    }
    end = b;
  }
  for (size_t k = spans.size(); k-- > 0;) {
    const std::string_view piece = s.substr(spans[k].first, spans[k].second - spans[k].first);
    auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      std::vector<int32_t> bytes;
      for (unsigned char c : piece) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", c);
        auto b = vocab_.find(std::string_view(name));
        if (b == vocab_.end()) {
          all = false;
          break;
        }
        bytes.push_back(b->second);
      }
      if (all) {
        ids->insert(ids->end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (unk_id_) ids->push_back(*unk_id_);
  }
}

}  // namespace loom
