#include "kv/block_hash.h"

#include <xxhash.h>

#include <cstdio>

#include "base/check.h"

namespace loom {
namespace {

// RAII owner of an XXH3 streaming state.
class Xxh3State {
 public:
  Xxh3State() : state_(XXH3_createState()) {
    CHECK(state_ != nullptr) << "XXH3_createState failed";
    CHECK(XXH3_128bits_reset(state_) == XXH_OK);
  }
  ~Xxh3State() { XXH3_freeState(state_); }
  Xxh3State(const Xxh3State&) = delete;
  Xxh3State& operator=(const Xxh3State&) = delete;

  void Update(const void* data, size_t size) {
    CHECK(XXH3_128bits_update(state_, data, size) == XXH_OK);
  }
  void UpdateU64(uint64_t v) { Update(&v, sizeof(v)); }
  // Length-prefixed, so "ab"+"c" and "a"+"bc" differ.
  void UpdateString(std::string_view s) {
    UpdateU64(s.size());
    Update(s.data(), s.size());
  }
  BlockHash Digest() const {
    XXH128_hash_t h = XXH3_128bits_digest(state_);
    return BlockHash{h.low64, h.high64};
  }

 private:
  XXH3_state_t* state_;
};

}  // namespace

std::string BlockHash::ToHex() const {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return std::string(buf, 32);
}

std::optional<BlockHash> BlockHash::FromHex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  uint64_t parts[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    const char c = hex[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    parts[i / 16] = (parts[i / 16] << 4) | static_cast<uint64_t>(d);
  }
  return BlockHash{parts[1], parts[0]};
}

BlockHash RootBlockHash(std::string_view model_fingerprint, std::string_view kv_dtype,
                        std::string_view tokenizer_hash) {
  Xxh3State s;
  s.UpdateString("loom-kv-root-v1");
  s.UpdateString(model_fingerprint);
  s.UpdateString(kv_dtype);
  s.UpdateString(tokenizer_hash);
  return s.Digest();
}

BlockHash HashBlock(const BlockHash& parent, std::span<const TokenId> tokens,
                    std::string_view extra_keys) {
  Xxh3State s;
  s.UpdateU64(parent.low);
  s.UpdateU64(parent.high);
  s.UpdateU64(tokens.size());
  // Token ids are hashed as little-endian int32 (the host order on every supported platform).
  s.Update(tokens.data(), tokens.size_bytes());
  s.UpdateString(extra_keys);
  return s.Digest();
}

}  // namespace loom
