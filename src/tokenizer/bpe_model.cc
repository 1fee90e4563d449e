#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <queue>

#include "tokenizer/metaspace.h"
#include "tokenizer/unicode.h"

namespace loom {
namespace {

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

struct MergeCandidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  // std::priority_queue is a max-heap: "less" means lower priority (higher rank, later pos).
  bool operator<(const MergeCandidate& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

}  // namespace

Status BpeModel::Init(StringMap<int32_t> vocab, BpeOptions options) {
  options_ = std::move(options);
  vocab_ = std::move(vocab);
  int32_t max_id = -1;
  for (const auto& [tok, id] : vocab_) {
    if (id < 0) return InvalidArgumentError("negative id for token '" + tok + "'");
    max_id = std::max(max_id, id);
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [tok, id] : vocab_) id_to_token_[id] = tok;
  byte_ids_.fill(-1);
  if (options_.byte_level) {
    std::string raw;
    for (const auto& [tok, id] : vocab_) {
      if (unicode::ByteLevelToBytes(tok, &raw)) raw_vocab_.emplace(raw, id);
    }
    for (int b = 0; b < 256; ++b) {
      auto it = raw_vocab_.find(std::string_view(reinterpret_cast<const char*>(&b), 1));
      if (it != raw_vocab_.end()) byte_ids_[b] = it->second;
    }
  } else if (options_.byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      auto it = vocab_.find(std::string_view(name));
      if (it != vocab_.end()) byte_ids_[b] = it->second;
    }
  }
  if (options_.unk_token) {
    auto it = vocab_.find(*options_.unk_token);
    if (it == vocab_.end()) {
      return InvalidArgumentError("BPE unk_token '" + *options_.unk_token +
                                  "' is not in the vocabulary");
    }
    unk_id_ = it->second;
  }
  return OkStatus();
}

Status BpeModel::AddMerge(std::string_view left, std::string_view right, int32_t rank) {
  auto l = vocab_.find(left), r = vocab_.find(right);
  if (l == vocab_.end() || r == vocab_.end()) {
    return InvalidArgumentError("BPE merge '" + std::string(left) + " " + std::string(right) +
                                "' uses a token that is not in the vocabulary");
  }
  std::string merged(left);
  const std::string_view prefix = options_.continuing_subword_prefix;
  std::string_view rhs = right;
  if (!prefix.empty() && rhs.substr(0, prefix.size()) == prefix) rhs.remove_prefix(prefix.size());
  merged += rhs;
  auto m = vocab_.find(merged);
  if (m == vocab_.end()) {
    return InvalidArgumentError("BPE merge '" + std::string(left) + " " + std::string(right) +
                                "' produces '" + merged + "', which is not in the vocabulary");
  }
  merges_.try_emplace(PairKey(l->second, r->second), rank, m->second);
  return OkStatus();
}

void BpeModel::ComputeSplitPoints() {
  if (options_.byte_level || !options_.continuing_subword_prefix.empty() ||
      !options_.end_of_word_suffix.empty()) {
    return;
  }
  // Only SentencePiece-style vocabularies (words start with U+2581) benefit.
  size_t with_marker = 0;
  for (const auto& [tok, id] : vocab_) {
    if (tok.compare(0, kMetaspace.size(), kMetaspace) == 0) ++with_marker;
  }
  if (with_marker < vocab_.size() / 10) return;
  for (const auto& [tok, id] : vocab_) CollectStickyBeforeMetaspace(tok, &sticky_before_marker_);
  split_metaspace_ = true;
}

StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(
    StringMap<int32_t> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
    BpeOptions options) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  RETURN_IF_ERROR(m->Init(std::move(vocab), std::move(options)));
  m->merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    RETURN_IF_ERROR(m->AddMerge(merges[i].first, merges[i].second, static_cast<int32_t>(i)));
  }
  m->ComputeSplitPoints();
  return m;
}

StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const nlohmann::json& j, bool byte_level) {
  BpeOptions opt;
  opt.byte_level = byte_level;
  opt.byte_fallback = j.value("byte_fallback", false);
  opt.ignore_merges = j.value("ignore_merges", false);
  opt.fuse_unk = j.value("fuse_unk", false);
  if (j.contains("unk_token") && j["unk_token"].is_string()) {
    opt.unk_token = j["unk_token"].get<std::string>();
  }
  if (j.contains("continuing_subword_prefix") && j["continuing_subword_prefix"].is_string()) {
    opt.continuing_subword_prefix = j["continuing_subword_prefix"].get<std::string>();
  }
  if (j.contains("end_of_word_suffix") && j["end_of_word_suffix"].is_string()) {
    opt.end_of_word_suffix = j["end_of_word_suffix"].get<std::string>();
  }
  if (j.contains("dropout") && j["dropout"].is_number() && j["dropout"].get<double>() > 0) {
    return UnimplementedError("BPE dropout is not supported (inference only)");
  }
  StringMap<int32_t> vocab;
  const auto& v = j.at("vocab");
  vocab.reserve(v.size());
  for (auto it = v.begin(); it != v.end(); ++it) vocab.emplace(it.key(), it.value().get<int32_t>());
  std::unique_ptr<BpeModel> m(new BpeModel());
  RETURN_IF_ERROR(m->Init(std::move(vocab), std::move(opt)));
  const auto& merges = j.at("merges");
  m->merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const auto& merge : merges) {
    if (merge.is_string()) {
      const std::string_view s = merge.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string_view::npos) {
        return InvalidArgumentError("malformed BPE merge '" + std::string(s) +
                                    "' (expected 'a b')");
      }
      if (s.find(' ', sp + 1) == std::string_view::npos) {
        RETURN_IF_ERROR(m->AddMerge(s.substr(0, sp), s.substr(sp + 1), rank++));
        continue;
      }
      // Tokens that contain spaces make "a b" ambiguous (some re-serialized SentencePiece
      // files): use the only split whose parts are both tokens; skip the merge otherwise
      // (HF's JS library cannot use it either; spaces never reach such models).
      int valid = 0;
      size_t at = 0;
      for (size_t k = s.find(' '); k != std::string_view::npos; k = s.find(' ', k + 1)) {
        if (m->vocab_.count(s.substr(0, k)) && m->vocab_.count(s.substr(k + 1))) {
          ++valid;
          at = k;
        }
      }
      if (valid == 1) RETURN_IF_ERROR(m->AddMerge(s.substr(0, at), s.substr(at + 1), rank));
      ++rank;
    } else {
      RETURN_IF_ERROR(m->AddMerge(merge.at(0).get_ref<const std::string&>(),
                                  merge.at(1).get_ref<const std::string&>(), rank++));
    }
  }
  m->ComputeSplitPoints();
  return m;
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return nullptr;
  const std::string& t = id_to_token_[id];
  if (t.empty()) return nullptr;
  return &t;
}

std::optional<size_t> BpeModel::MaxBytesPerToken() const {
  // Every character must become tokens of the vocabulary: a missing byte token means an unknown
  // character is dropped or becomes <unk> (fused runs: unbounded). Without affixes a merged
  // token's string is its two parts' strings joined, so by induction each token stands for at
  // most its own string's bytes (raw bytes for byte-level; <0xNN> stands for one byte).
  for (int32_t id : byte_ids_) {
    if (id < 0) return std::nullopt;
  }
  if (!options_.continuing_subword_prefix.empty() || !options_.end_of_word_suffix.empty()) {
    return std::nullopt;
  }
  size_t longest = 1;
  for (const auto& [tok, id] : options_.byte_level ? raw_vocab_ : vocab_) {
    longest = std::max(longest, tok.size());
  }
  return longest;
}

void BpeModel::InitialSymbols(std::string_view word, std::vector<int32_t>* symbols) const {
  symbols->clear();
  if (options_.byte_level) {
    for (unsigned char c : word) {
      if (byte_ids_[c] >= 0) {
        symbols->push_back(byte_ids_[c]);
      } else if (unk_id_ >= 0 &&
                 !(options_.fuse_unk && !symbols->empty() && symbols->back() == unk_id_)) {
        symbols->push_back(unk_id_);
      }
    }
    return;
  }
  const bool affixes =
      !options_.continuing_subword_prefix.empty() || !options_.end_of_word_suffix.empty();
  std::string key;
  bool pending_unk = false;
  size_t i = 0;
  while (i < word.size()) {
    const size_t len = std::min(unicode::SequenceLengthFromLead(word[i]), word.size() - i);
    std::string_view ch = word.substr(i, len);
    std::string_view lookup = ch;
    if (affixes) {
      key.clear();
      if (i > 0) key += options_.continuing_subword_prefix;
      key += ch;
      if (i + len == word.size()) key += options_.end_of_word_suffix;
      lookup = key;
    }
    auto it = vocab_.find(lookup);
    if (it != vocab_.end()) {
      if (pending_unk) symbols->push_back(unk_id_);
      pending_unk = false;
      symbols->push_back(it->second);
    } else {
      bool done = false;
      if (options_.byte_fallback) {
        bool all = true;
        for (unsigned char c : lookup) all &= byte_ids_[c] >= 0;
        if (all) {
          if (pending_unk) symbols->push_back(unk_id_);
          pending_unk = false;
          for (unsigned char c : lookup) symbols->push_back(byte_ids_[c]);
          done = true;
        }
      }
      if (!done && unk_id_ >= 0) {
        if (pending_unk && !options_.fuse_unk) symbols->push_back(unk_id_);
        pending_unk = true;
      }
    }
    i += len;
  }
  if (pending_unk) symbols->push_back(unk_id_);
}

void BpeModel::TokenizeWord(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    const auto& map = options_.byte_level ? raw_vocab_ : vocab_;
    auto it = map.find(word);
    if (it != map.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= WordCache::kMaxWordBytes;
  if (cacheable && cache_.Lookup(word, ids)) return;

  thread_local std::vector<int32_t> initial;
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<MergeCandidate> heap_storage;
  InitialSymbols(word, &initial);
  const int32_t n = static_cast<int32_t>(initial.size());
  symbols.resize(n);
  for (int32_t k = 0; k < n; ++k) symbols[k] = {initial[k], k - 1, k + 1 < n ? k + 1 : -1, true};

  heap_storage.clear();
  std::priority_queue<MergeCandidate, std::vector<MergeCandidate>> queue(
      std::less<MergeCandidate>(), std::move(heap_storage));
  for (int32_t k = 0; k + 1 < n; ++k) {
    auto it = merges_.find(PairKey(symbols[k].id, symbols[k + 1].id));
    if (it != merges_.end()) queue.push({it->second.first, k, it->second.second});
  }
  while (!queue.empty()) {
    const MergeCandidate top = queue.top();
    queue.pop();
    Symbol& cur = symbols[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    const Symbol right = symbols[cur.next];
    auto it = merges_.find(PairKey(cur.id, right.id));
    if (it == merges_.end() || it->second.second != top.new_id) continue;  // stale entry
    cur.id = top.new_id;
    symbols[cur.next].alive = false;
    cur.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (cur.prev >= 0) {
      auto p = merges_.find(PairKey(symbols[cur.prev].id, cur.id));
      if (p != merges_.end()) queue.push({p->second.first, cur.prev, p->second.second});
    }
    if (cur.next >= 0) {
      auto q = merges_.find(PairKey(cur.id, symbols[cur.next].id));
      if (q != merges_.end()) queue.push({q->second.first, top.pos, q->second.second});
    }
  }
  const size_t first = ids->size();
  for (int32_t k = n > 0 ? 0 : -1; k >= 0; k = symbols[k].next) ids->push_back(symbols[k].id);
  if (cacheable) cache_.Insert(word, ids->data() + first, ids->size() - first);
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (!split_metaspace_) {
    TokenizeWord(word, ids);
    return;
  }
  // Cut before every U+2581 whose previous character cannot precede it inside a token.
  SplitAtMetaspace(word, sticky_before_marker_,
                   [&](std::string_view piece) { TokenizeWord(piece, ids); });
}

}  // namespace loom
