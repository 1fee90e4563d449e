// Content hashes of full KV blocks: the key of the prefix cache.
//
// A full block is identified by a hash chained over everything that determines its KV:
//
//   root   = H("loom-kv-root", model_fingerprint, kv_dtype, tokenizer_hash)
//   h[0]   = H(root, tokens[0 .. B),   extra_keys)
//   h[i]   = H(h[i-1], tokens[i*B .. (i+1)*B), extra_keys)
//
// so equal hashes mean equal token prefixes (up to XXH3-128 collisions) under the same model,
// KV dtype, tokenizer and extra keys (adapter id, multimodal content hashes, cache salt). Every
// field is length-prefixed so no two different inputs serialize to the same bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/ids.h"

namespace loom {

struct BlockHash {
  uint64_t low = 0;
  uint64_t high = 0;
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
  // 32 lowercase hex digits (high then low), e.g. for logs and SSD-tier file names.
  std::string ToHex() const;
  // The inverse of ToHex: nullopt unless `hex` is exactly 32 lowercase hex digits.
  static std::optional<BlockHash> FromHex(std::string_view hex);
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const noexcept {
    return h.low ^ (h.high * 0x9E3779B97F4A7C15ull);
  }
};

// The seed of every hash chain. Changing any argument changes every block hash, so blocks written
// by another model, KV dtype or tokenizer are never reused.
BlockHash RootBlockHash(std::string_view model_fingerprint, std::string_view kv_dtype,
                        std::string_view tokenizer_hash);

// Hash of one full block given its parent's hash (the root for block 0), its token ids (exactly
// block_size of them) and the request's extra keys (empty when none).
BlockHash HashBlock(const BlockHash& parent, std::span<const TokenId> tokens,
                    std::string_view extra_keys);

}  // namespace loom
