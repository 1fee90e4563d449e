#include "sample/sampling_params.h"

#include <cmath>
#include <sstream>
#include <string>

namespace loom {
namespace {

template <typename T>
Status RangeError(const char* field, const char* range, T got) {
  std::ostringstream os;
  os << field << " must be " << range << ", got " << got;
  return InvalidArgumentError(os.str());
}

bool InVocab(TokenId id, int vocab_size) { return id >= 0 && id < vocab_size; }

}  // namespace

Status SamplingParams::Validate(int vocab_size) const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
    return RangeError("temperature", ">= 0", temperature);
  }
  if (top_k < -1) return RangeError("top_k", ">= -1 (0 or -1 disables it)", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return RangeError("top_p", "in (0, 1]", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return RangeError("min_p", "in [0, 1]", min_p);
  if (!(xtc_probability >= 0.0f && xtc_probability <= 1.0f)) {
    return RangeError("xtc_probability", "in [0, 1]", xtc_probability);
  }
  if (!(xtc_threshold >= 0.0f && xtc_threshold <= 1.0f)) {
    return RangeError("xtc_threshold", "in [0, 1]", xtc_threshold);
  }
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return RangeError("repetition_penalty", "> 0", repetition_penalty);
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return RangeError("presence_penalty", "in [-2, 2]", presence_penalty);
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return RangeError("frequency_penalty", "in [-2, 2]", frequency_penalty);
  }
  for (const auto& [id, bias] : logit_bias) {
    if (!InVocab(id, vocab_size)) {
      return InvalidArgumentError("logit_bias: token id " + std::to_string(id) +
                                  " is out of the vocabulary [0, " + std::to_string(vocab_size) +
                                  ")");
    }
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      return RangeError("logit_bias values", "in [-100, 100]", bias);
    }
  }
  if (num_logprobs < -1 || num_logprobs > 20) {
    return RangeError("top_logprobs", "in [0, 20]", num_logprobs);
  }
  if (max_tokens < 1) return RangeError("max_tokens", ">= 1", max_tokens);
  if (min_tokens < 0 || min_tokens > max_tokens) {
    return RangeError("min_tokens", "in [0, max_tokens]", min_tokens);
  }
  for (TokenId id : stop_token_ids) {
    if (!InVocab(id, vocab_size)) {
      return InvalidArgumentError("stop_token_ids: token id " + std::to_string(id) +
                                  " is out of the vocabulary [0, " + std::to_string(vocab_size) +
                                  ")");
    }
  }
  return OkStatus();
}

}  // namespace loom
