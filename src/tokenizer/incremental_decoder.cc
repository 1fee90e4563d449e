#include "tokenizer/incremental_decoder.h"

#include "tokenizer/unicode.h"

namespace loom {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer),
      plan_(&tokenizer.stream_plan()),
      skip_special_(skip_special_tokens),
      strip_remaining_(plan_->strip_count) {}

std::string IncrementalDecoder::Add(int32_t id) {
  std::string out;
  AddTo(id, &out);
  return out;
}

void IncrementalDecoder::Emit(std::string_view text, std::string* out) {
  // Strip(c, n, 0) after Fuse removes up to n leading c from the whole text.
  while (strip_remaining_ > 0 && !text.empty()) {
    size_t len;
    if (unicode::DecodeAt(text, 0, &len) != plan_->strip_char) {
      strip_remaining_ = 0;
      break;
    }
    text.remove_prefix(len);
    --strip_remaining_;
  }
  out->append(text);
}

void IncrementalDecoder::EmitByteLevel(std::string* out, bool final) {
  // Emits the longest prefix of pending_ whose lossy decoding cannot change with more bytes.
  const std::string& s = pending_;
  size_t i = 0, run = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = unicode::ValidSequenceLength(s, i);
    if (n > 0) {
      i += n;
      continue;
    }
    const size_t sub = unicode::InvalidSubpartLength(s, i);
    const auto lead = static_cast<uint8_t>(s[i]);
    const bool could_complete = i + sub == s.size() && lead >= 0xC2 && lead <= 0xF4;
    if (could_complete && !final) break;
    out->append(s, run, i - run);
    out->append(unicode::kReplacementUtf8);
    i += sub;
    run = i;
  }
  out->append(s, run, i - run);
  pending_.erase(0, i);
}

void IncrementalDecoder::FlushByteRun(std::string* out) {
  if (pending_.empty()) return;
  if (unicode::IsValidUtf8(pending_)) {
    Emit(pending_, out);
  } else {
    std::string repl;
    for (size_t k = 0; k < pending_.size(); ++k) repl += unicode::kReplacementUtf8;
    Emit(repl, out);
  }
  pending_.clear();
}

void IncrementalDecoder::AddTo(int32_t id, std::string* out) {
  if (id < 0 || id >= tokenizer_->vocab_size()) return;  // Decode ignores unknown ids too
  if (skip_special_ && tokenizer_->IsSpecial(id)) return;
  if (!plan_->supported) {
    ids_.push_back(id);
    const std::string text = tokenizer_->Decode(ids_, skip_special_);
    // Hold while the tail may still change (an incomplete character decodes to U+FFFD).
    if (text.size() >= unicode::kReplacementUtf8.size() &&
        text.compare(text.size() - 3, 3, unicode::kReplacementUtf8) == 0) {
      return;
    }
    if (text.size() > emitted_bytes_) {
      out->append(text, emitted_bytes_, std::string::npos);
      emitted_bytes_ = text.size();
    }
    return;
  }
  const std::string* tok = tokenizer_->TokenString(id);
  if (tok == nullptr) return;
  const bool first = num_tokens_++ == 0;
  std::string first_piece;
  const std::string* piece = &plan_->pieces[id];
  int byte = plan_->byte_value.empty() ? -1 : plan_->byte_value[id];
  if (first && (plan_->first_sensitive || plan_->join_with_space)) {
    plan_->FirstPiece(*tok, &first_piece, &byte);
    piece = &first_piece;
  }
  if (plan_->byte_level) {
    pending_ += *piece;
    EmitByteLevel(out, /*final=*/false);
    return;
  }
  if (byte >= 0) {
    pending_.push_back(static_cast<char>(byte));
    return;
  }
  FlushByteRun(out);
  Emit(*piece, out);
}

std::string IncrementalDecoder::Flush() {
  std::string out;
  if (!plan_->supported) {
    const std::string text = tokenizer_->Decode(ids_, skip_special_);
    if (text.size() > emitted_bytes_) out.assign(text, emitted_bytes_, std::string::npos);
    ids_.clear();
    emitted_bytes_ = 0;
  } else if (plan_->byte_level) {
    EmitByteLevel(&out, /*final=*/true);
  } else {
    FlushByteRun(&out);
  }
  pending_.clear();
  num_tokens_ = 0;
  strip_remaining_ = plan_->strip_count;
  return out;
}

}  // namespace loom
