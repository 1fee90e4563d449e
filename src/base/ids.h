// Identifier types shared by the tokenizer, the KV cache, the scheduler, the runner and the engine.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>

namespace loom {

// A token id of the model's vocabulary, [0, vocab_size).
using TokenId = int32_t;

// Index of a KV block in the pools, [0, num_blocks). A plain int32 because block tables are
// copied verbatim into device page tables (int32 arrays).
using BlockId = int32_t;

// Identifies one request inside the engine. A strong type: mixing it up with a token or block id
// is a bug the compiler should catch.
struct RequestId {
  uint64_t value = 0;
  friend auto operator<=>(const RequestId&, const RequestId&) = default;
  friend std::ostream& operator<<(std::ostream& os, RequestId id) {
    return os << "req#" << id.value;
  }
};

}  // namespace loom

template <>
struct std::hash<loom::RequestId> {
  size_t operator()(loom::RequestId id) const noexcept { return std::hash<uint64_t>()(id.value); }
};
