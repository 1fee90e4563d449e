#include "tokenizer/tokenizer.h"

#include "tokenizer/decoder.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

namespace loom {

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::Finalize() {
  added_.Build(normalizer_.get());
  num_ids_ = model_->vocab_size();
  for (const auto& t : added_.tokens()) num_ids_ = std::max(num_ids_, t.id + 1);
  stream_plan_ =
      StreamPlan::Compile(decoder_.get(), num_ids_, [this](int32_t id) { return TokenString(id); });
  max_bytes_per_token_ = ComputeMaxBytesPerToken();
}

// Encode covers its input with tokens: added tokens (each stands for its content: raw text, or
// the normalized text for a normalized one) and the model's tokens of each normalized section
// (pre-tokenized into words that keep every byte, each token standing for at most the model's
// bound). So no token stands for more than the largest of these.
std::optional<size_t> Tokenizer::ComputeMaxBytesPerToken() const {
  std::optional<size_t> bound = model_->MaxBytesPerToken();
  if (!bound || (pre_tokenizer_ && !pre_tokenizer_->KeepsEveryByte())) return std::nullopt;
  for (const AddedToken& t : added_.tokens()) {
    if (t.lstrip || t.rstrip) return std::nullopt;  // also stands for any run of whitespace
    *bound = std::max(*bound, t.content.size());
    if (t.normalized && normalizer_) {
      std::string normalized = t.content;
      normalizer_->Normalize(&normalized);
      *bound = std::max(*bound, normalized.size());
    }
  }
  return bound;
}

size_t Tokenizer::MinTokenCount(std::string_view text, bool add_special_tokens) const {
  if (!max_bytes_per_token_) return 0;
  const size_t per_token = *max_bytes_per_token_;
  size_t n = add_special_tokens ? prefix_ids_.size() + suffix_ids_.size() : 0;
  if (!normalizer_) {
    // Replacing ill-formed UTF-8 with U+FFFD only lengthens the text.
    return n + (text.size() + per_token - 1) / per_token;
  }
  // A normalizer may shorten text (NFC composes, Replace may shrink), so count what it returns.
  std::string valid;
  if (!unicode::IsValidUtf8(text)) {
    valid = unicode::ToValidUtf8(text);
    text = valid;
  }
  std::vector<AddedVocabulary::Piece> pieces;
  added_.Split(text, /*normalized_set=*/false, &pieces);
  std::string normalized;
  for (const auto& p : pieces) {
    if (p.id >= 0) {
      ++n;
      continue;
    }
    normalized.assign(text.substr(p.begin, p.end - p.begin));
    normalizer_->Normalize(&normalized);
    n += (normalized.size() + per_token - 1) / per_token;
  }
  return n;
}

const std::string* Tokenizer::TokenString(int32_t id) const {
  if (const AddedToken* t = added_.FindById(id)) return &t->content;
  return model_->IdToToken(id);
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  if (auto id = added_.FindByContent(token)) return id;
  return model_->TokenToId(token);
}

std::optional<std::string> Tokenizer::IdToToken(int32_t id) const {
  const std::string* s = TokenString(id);
  if (s == nullptr) return std::nullopt;
  return *s;
}

void Tokenizer::TokenizeSection(std::string_view text, bool first_section,
                                std::vector<int32_t>* ids) const {
  if (text.empty()) return;
  if (!pre_tokenizer_) {
    model_->Tokenize(text, ids);
    return;
  }
  thread_local std::vector<std::string> words;
  words.clear();
  words.emplace_back(text);
  pre_tokenizer_->PreTokenize(&words, first_section);
  // PreTokenize may reenter nothing else, so the thread_local vector is safe to iterate.
  for (const auto& w : words) model_->Tokenize(w, ids);
}

void Tokenizer::EncodeInto(std::string_view text, std::vector<int32_t>* ids) const {
  std::vector<AddedVocabulary::Piece> pieces, sub;
  added_.Split(text, /*normalized_set=*/false, &pieces);
  std::string normalized;
  for (const auto& p : pieces) {
    if (p.id >= 0) {
      ids->push_back(p.id);
      continue;
    }
    normalized.assign(text.substr(p.begin, p.end - p.begin));
    if (normalizer_) normalizer_->Normalize(&normalized);
    const bool first_section = p.begin == 0;
    if (!added_.has_normalized_tokens()) {
      TokenizeSection(normalized, first_section, ids);
      continue;
    }
    added_.Split(normalized, /*normalized_set=*/true, &sub);
    for (const auto& q : sub) {
      if (q.id >= 0) {
        ids->push_back(q.id);
      } else {
        TokenizeSection(std::string_view(normalized).substr(q.begin, q.end - q.begin),
                        first_section && q.begin == 0, ids);
      }
    }
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids.insert(ids.end(), prefix_ids_.begin(), prefix_ids_.end());
  if (unicode::IsValidUtf8(text)) {
    EncodeInto(text, &ids);
  } else {
    EncodeInto(unicode::ToValidUtf8(text), &ids);
  }
  if (add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

StatusOr<std::vector<int32_t>> Tokenizer::EncodeChecked(std::string_view text,
                                                        bool add_special_tokens) const {
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = unicode::ValidSequenceLength(text, i);
    if (n == 0) {
      return InvalidArgumentError("text to tokenize is not valid UTF-8 (byte offset " +
                                  std::to_string(i) + ")");
    }
    i += n;
  }
  return Encode(text, add_special_tokens);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* s = TokenString(id);
    if (s == nullptr) continue;
    if (skip_special_tokens && added_.IsSpecial(id)) continue;
    tokens.push_back(*s);
  }
  if (!decoder_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out += ' ';
      out += tokens[i];
    }
    return unicode::ToValidUtf8(out);
  }
  return unicode::ToValidUtf8(decoder_->Decode(std::move(tokens)));
}

}  // namespace loom
