#include "tokenizer/spm_model.h"

#include <cstdio>
#include <queue>

#include "tokenizer/metaspace.h"
#include "tokenizer/unicode.h"

namespace loom {
namespace {

struct SpmSymbol {
  int32_t prev, next;
  uint32_t offset, size;  // byte range in the word; size 0 = merged away
};

struct SpmBigram {
  int32_t left, right;
  float score;
  uint32_t size;
  // Max-heap: highest score first, then the leftmost pair.
  bool operator<(const SpmBigram& o) const {
    return score < o.score || (score == o.score && left > o.left);
  }
};

}  // namespace

StatusOr<std::unique_ptr<SpmModel>> SpmModel::Create(std::vector<std::string> tokens,
                                                     std::vector<float> scores) {
  if (tokens.size() != scores.size()) {
    return InvalidArgumentError("SentencePiece vocabulary has " + std::to_string(tokens.size()) +
                                " tokens but " + std::to_string(scores.size()) + " scores");
  }
  std::unique_ptr<SpmModel> m(new SpmModel());
  m->tokens_ = std::move(tokens);
  m->scores_ = std::move(scores);
  m->vocab_.reserve(m->tokens_.size());
  for (size_t i = 0; i < m->tokens_.size(); ++i) {
    m->vocab_.emplace(m->tokens_[i], static_cast<int32_t>(i));  // first id wins on duplicates
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = m->vocab_.find(std::string_view(name));
    if (it == m->vocab_.end()) it = m->vocab_.find(std::string(1, static_cast<char>(b)));
    m->byte_ids_[b] = it == m->vocab_.end() ? -1 : it->second;
  }
  for (const auto& tok : m->tokens_) CollectStickyBeforeMetaspace(tok, &m->sticky_before_marker_);
  return m;
}

std::optional<int32_t> SpmModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* SpmModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return nullptr;
  return &tokens_[id];
}

std::optional<size_t> SpmModel::MaxBytesPerToken() const {
  for (int32_t id : byte_ids_) {
    if (id < 0) return std::nullopt;
  }
  size_t longest = 1;  // a byte token stands for one byte, whatever its name
  for (const std::string& t : tokens_) longest = std::max(longest, t.size());
  return longest;
}

void SpmModel::TokenizeWord(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  const bool cacheable = word.size() <= WordCache::kMaxWordBytes;
  if (cacheable && cache_.Lookup(word, ids)) return;
  std::vector<SpmSymbol> symbols;
  size_t offs = 0;
  while (offs < word.size()) {
    const size_t n = std::min(unicode::SequenceLengthFromLead(word[offs]), word.size() - offs);
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, offs + n == word.size() ? -1 : index + 1,
                       static_cast<uint32_t>(offs), static_cast<uint32_t>(n)});
    offs += n;
  }
  std::priority_queue<SpmBigram> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const std::string_view text =
        word.substr(symbols[left].offset, symbols[left].size + symbols[right].size);
    auto it = vocab_.find(text);
    if (it == vocab_.end()) return;
    queue.push({left, right, scores_[it->second], static_cast<uint32_t>(text.size())});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const SpmBigram b = queue.top();
    queue.pop();
    SpmSymbol& l = symbols[b.left];
    SpmSymbol& r = symbols[b.right];
    if (l.size == 0 || r.size == 0 || l.size + r.size != b.size) continue;
    l.size += r.size;
    r.size = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  const size_t first = ids->size();
  // llama.cpp "resegments" symbols that are not pieces along rev_merge; but a merge only ever
  // forms a piece, so only unmerged single characters can miss: they become byte tokens.
  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const std::string_view text = word.substr(symbols[i].offset, symbols[i].size);
    auto it = vocab_.find(text);
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      continue;
    }
    for (unsigned char c : text) {
      if (ByteToken(c) >= 0) ids->push_back(ByteToken(c));
    }
  }
  if (cacheable) cache_.Insert(word, ids->data() + first, ids->size() - first);
}

void SpmModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  SplitAtMetaspace(word, sticky_before_marker_,
                   [&](std::string_view piece) { TokenizeWord(piece, ids); });
}

}  // namespace loom
