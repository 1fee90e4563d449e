#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"

namespace loom {
namespace {

bool IsWordChar(char32_t c) { return c == '_' || unicode::IsAlphanumeric(c); }

char32_t LastChar(std::string_view s) {
  size_t k = s.size() - 1;
  while (k > 0 && (static_cast<uint8_t>(s[k]) & 0xC0) == 0x80) --k;
  size_t len;
  return unicode::DecodeAt(s, k, &len);
}

}  // namespace

void AddedVocabulary::Trie::Insert(std::string_view key, int32_t token) {
  if (nodes.empty()) nodes.emplace_back();
  if (key.empty()) return;
  first_byte[static_cast<uint8_t>(key[0])] = true;
  int32_t cur = 0;
  for (unsigned char c : key) {
    auto& ch = nodes[cur].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(c, int32_t{-1}));
    if (it != ch.end() && it->first == c) {
      cur = it->second;
      continue;
    }
    const int32_t next = static_cast<int32_t>(nodes.size());
    ch.insert(it, {c, next});
    nodes.emplace_back();
    cur = next;
  }
  if (nodes[cur].token < 0) nodes[cur].token = token;
}

std::pair<int32_t, size_t> AddedVocabulary::Trie::LongestAt(std::string_view text,
                                                            size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t cur = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto& ch = nodes[cur].children;
    const auto c = static_cast<uint8_t>(text[i]);
    auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(c, int32_t{-1}));
    if (it == ch.end() || it->first != c) break;
    cur = it->second;
    if (nodes[cur].token >= 0) best = {nodes[cur].token, i + 1 - pos};
  }
  return best;
}

void AddedVocabulary::Add(AddedToken token) {
  if (by_content_.count(token.content)) return;
  by_id_.emplace(token.id, tokens_.size());
  by_content_.emplace(token.content, tokens_.size());
  tokens_.push_back(std::move(token));
}

void AddedVocabulary::Build(const Normalizer* normalizer) {
  raw_trie_ = Trie();
  normalized_trie_ = Trie();
  raw_trie_.nodes.emplace_back();
  normalized_trie_.nodes.emplace_back();
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    if (t.normalized && normalizer != nullptr) {
      std::string content = t.content;
      normalizer->Normalize(&content);
      normalized_trie_.Insert(content, static_cast<int32_t>(i));
    } else if (t.normalized) {
      normalized_trie_.Insert(t.content, static_cast<int32_t>(i));
    } else {
      raw_trie_.Insert(t.content, static_cast<int32_t>(i));
    }
  }
}

const AddedToken* AddedVocabulary::FindById(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::FindByContent(std::string_view content) const {
  auto it = by_content_.find(content);
  if (it == by_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

void AddedVocabulary::Split(std::string_view text, bool normalized_set,
                            std::vector<Piece>* pieces) const {
  pieces->clear();
  const Trie& trie = normalized_set ? normalized_trie_ : raw_trie_;
  if (trie.empty()) {
    if (!text.empty()) pieces->push_back({0, text.size(), -1});
    return;
  }
  FindMatches(text, trie, pieces);
}

// Mirrors tokenizers' AddedVocabulary::find_matches (aho-corasick, MatchKind::LeftmostLongest).
void AddedVocabulary::FindMatches(std::string_view text, const Trie& trie,
                                  std::vector<Piece>* pieces) const {
  size_t start_offset = 0;  // end of the previous emitted piece
  size_t pos = 0;           // where the automaton resumes (end of the previous raw match)
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    auto [tok_idx, len] = trie.LongestAt(text, pos);
    if (tok_idx < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[tok_idx];
    size_t start = pos, stop = pos + len;
    pos = stop;
    if (tok.single_word) {
      const bool start_space = start == 0 || !IsWordChar(LastChar(text.substr(0, start)));
      size_t l;
      const bool stop_space = stop == text.size() || !IsWordChar(unicode::DecodeAt(text, stop, &l));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t k = s - 1;
        while (k > 0 && (static_cast<uint8_t>(text[k]) & 0xC0) == 0x80) --k;
        size_t l;
        if (!unicode::IsWhitespace(unicode::DecodeAt(text, k, &l))) break;
        s = k;
      }
      start = std::max(s, start_offset);
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t l;
        if (!unicode::IsWhitespace(unicode::DecodeAt(text, stop, &l))) break;
        stop += l;
      }
    }
    if (start_offset < start) pieces->push_back({start_offset, start, -1});
    pieces->push_back({start, stop, tok.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) pieces->push_back({start_offset, text.size(), -1});
}

}  // namespace loom
