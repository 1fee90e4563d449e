#include "server/stream_detokenizer.h"

#include <algorithm>

namespace loom {
namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

bool EndsWithReplacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, kReplacementChar) == 0;
}

}  // namespace

StreamDetokenizer::StreamDetokenizer(const TextCodec* codec, std::vector<TokenId> context,
                                     bool skip_special_tokens)
    : codec_(codec), skip_special_tokens_(skip_special_tokens), ids_(std::move(context)) {
  // A few ids of left context are enough for every decoder we know (vLLM uses 5).
  constexpr size_t kMaxContext = 5;
  if (ids_.size() > kMaxContext) ids_.erase(ids_.begin(), ids_.end() - kMaxContext);
  prefix_offset_ = 0;
  read_offset_ = ids_.size();
}

std::string StreamDetokenizer::DecodeRange(size_t begin, size_t end) const {
  return codec_->Decode(std::span<const TokenId>(ids_.data() + begin, end - begin),
                        skip_special_tokens_);
}

std::string StreamDetokenizer::Add(TokenId token) {
  ids_.push_back(token);
  std::string prefix_text = DecodeRange(prefix_offset_, read_offset_);
  std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  if (new_text.size() > prefix_text.size() && !EndsWithReplacement(new_text) &&
      new_text.compare(0, prefix_text.size(), prefix_text) == 0) {
    std::string delta = new_text.substr(prefix_text.size());
    prefix_offset_ = read_offset_;
    read_offset_ = ids_.size();
    return delta;
  }
  return "";
}

std::string StreamDetokenizer::Flush() {
  if (read_offset_ >= ids_.size()) return "";
  std::string prefix_text = DecodeRange(prefix_offset_, read_offset_);
  std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  prefix_offset_ = read_offset_ = ids_.size();
  if (new_text.size() <= prefix_text.size()) return "";
  return new_text.substr(std::min(prefix_text.size(), new_text.size()));
}

}  // namespace loom
