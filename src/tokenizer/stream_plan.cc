#include "tokenizer/stream_plan.h"

#include "tokenizer/decoder.h"
#include "tokenizer/unicode.h"

namespace loom {
namespace {

int ParseByteToken(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

StreamPlan StreamPlan::Compile(const Decoder* decoder, int32_t num_ids,
                               const std::function<const std::string*(int32_t)>& token_of) {
  StreamPlan plan;
  const std::vector<const Decoder*> steps = FlattenDecoder(decoder);
  if (steps.empty()) {
    plan.join_with_space = true;
  } else if (steps.size() == 1 && steps[0]->kind() == Decoder::Kind::kByteLevel) {
    plan.byte_level = true;
  } else {
    size_t i = 0;
    std::string probe;
    for (; i < steps.size(); ++i) {
      probe.assign(1, 'x');
      if (!steps[i]->MapToken(&probe, false)) break;
      plan.maps.push_back(steps[i]);
      const auto k = steps[i]->kind();
      plan.first_sensitive |= k == Decoder::Kind::kMetaspace || k == Decoder::Kind::kWordPiece;
    }
    if (i < steps.size() && steps[i]->kind() == Decoder::Kind::kByteFallback) {
      plan.byte_fallback = true;
      ++i;
    }
    if (i < steps.size() && steps[i]->kind() == Decoder::Kind::kFuse) {
      ++i;
      if (i < steps.size() && steps[i]->kind() == Decoder::Kind::kStrip) {
        const StripSpec s = GetStripSpec(steps[i]);
        if (s.stop != 0) return StreamPlan();
        plan.strip_char = s.content;
        plan.strip_count = s.start;
        ++i;
      }
    }
    if (i != steps.size()) return StreamPlan();  // not streamable
  }
  plan.supported = true;
  plan.pieces.resize(static_cast<size_t>(num_ids));
  plan.byte_value.assign(static_cast<size_t>(num_ids), -1);
  std::string raw;
  for (int32_t id = 0; id < num_ids; ++id) {
    const std::string* tok = token_of(id);
    if (tok == nullptr) continue;
    if (plan.byte_level) {
      plan.pieces[id] = unicode::ByteLevelToBytes(*tok, &raw) ? raw : *tok;
      continue;
    }
    if (plan.join_with_space) {
      plan.pieces[id].assign(1, ' ');
      plan.pieces[id] += *tok;
      continue;
    }
    std::string piece = *tok;
    for (const Decoder* m : plan.maps) m->MapToken(&piece, false);
    const int b = plan.byte_fallback ? ParseByteToken(piece) : -1;
    if (b >= 0) {
      plan.byte_value[id] = static_cast<int16_t>(b);
    } else {
      plan.pieces[id] = std::move(piece);
    }
  }
  return plan;
}

void StreamPlan::FirstPiece(const std::string& token, std::string* piece, int* byte) const {
  *byte = -1;
  if (byte_level) {
    std::string raw;
    *piece = unicode::ByteLevelToBytes(token, &raw) ? raw : token;
    return;
  }
  *piece = token;  // join_with_space: no separator before the first token
  for (const Decoder* m : maps) m->MapToken(piece, true);
  if (byte_fallback) *byte = ParseByteToken(*piece);
}

}  // namespace loom
