// LogitEdit: one token's edits of one logits row, the steps the host sampler (sample/sampler.cc,
// Sampler::SampleRow) applies before its greedy choice or its temperature, for that token, in
// SampleRow's order: logit_bias, the repetition penalty, the presence / frequency penalties,
// min_tokens masking. The engine builds them (BuildLogitEdits in sample/sampler.h) so a backend
// can edit the rows where the logits are (Backend::EditLogits) and then take the argmax or the
// draw there, instead of copying the rows to the host. A plain struct the device reads.
#pragma once

#include <cstdint>

#include "base/host_device.h"

namespace loom {

struct LogitEdit {
  enum Op : uint32_t {
    kBias = 1,        // l += bias
    kRepetition = 2,  // l = l > 0 ? l / repetition : l * repetition
    kSubtract = 4,    // l -= subtract (frequency * count + presence)
    kMask = 8,        // l = -inf
  };
  int32_t row = 0;  // row of the logits tensor (the runner sets it)
  int32_t token = 0;
  uint32_t ops = 0;  // Op bits, applied in the order above
  float bias = 0.0f, repetition = 1.0f, subtract = 0.0f;
};

// The edited logit: the same float operations as SampleRow's steps (the host's and the device's
// code; IEEE division, no contraction to get in the way: each step is one operation).
LOOM_HOST_DEVICE float ApplyLogitEdit(const LogitEdit& e, float l) {
  if (e.ops & LogitEdit::kBias) l += e.bias;
  if (e.ops & LogitEdit::kRepetition) l = l > 0.0f ? l / e.repetition : l * e.repetition;
  if (e.ops & LogitEdit::kSubtract) l -= e.subtract;
  if (e.ops & LogitEdit::kMask) l = -__builtin_huge_valf();
  return l;
}

}  // namespace loom
