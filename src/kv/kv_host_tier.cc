#include "kv/kv_host_tier.h"

#include <string>
#include <utility>

#include "base/check.h"
#include "base/logging.h"

namespace loom {

Status KvHostTierConfig::Validate() const {
  if (block_bytes <= 0) return InvalidArgumentError("host tier: block_bytes must be > 0");
  if (capacity_bytes < block_bytes) {
    return InvalidArgumentError("--host-cache must hold at least one KV block (" +
                                std::to_string(block_bytes) + " bytes)");
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<KvHostTier>> KvHostTier::Create(const KvHostTierConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  const int64_t num_slots = config.capacity_bytes / config.block_bytes;
  const auto bytes = static_cast<size_t>(num_slots * config.block_bytes);
  std::shared_ptr<uint8_t> arena;
  if (config.alloc) {
    arena = config.alloc(bytes);
  } else {
    arena = std::shared_ptr<uint8_t>(new uint8_t[bytes], std::default_delete<uint8_t[]>());
  }
  if (arena == nullptr) {
    return ResourceExhaustedError("--host-cache: cannot allocate " + std::to_string(bytes) +
                                  " bytes of host memory");
  }
  return std::unique_ptr<KvHostTier>(new KvHostTier(config.block_bytes, num_slots, arena));
}

KvHostTier::KvHostTier(int64_t block_bytes, int64_t num_slots, std::shared_ptr<uint8_t> arena)
    : block_bytes_(block_bytes), arena_(std::move(arena)), slots_(static_cast<size_t>(num_slots)) {
  free_.reserve(slots_.size());
  for (int64_t i = num_slots - 1; i >= 0; --i) free_.push_back(static_cast<int>(i));
  stats_.capacity_blocks = num_slots;
  stats_.capacity_bytes = num_slots * block_bytes;
}

std::optional<int> KvHostTier::Reserve() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_.empty()) {
    const int slot = free_.back();
    free_.pop_back();
    slots_[static_cast<size_t>(slot)].state = State::kReserved;
    return slot;
  }
  // The least recently used entry nobody holds. Held slots are the ones queued for the SSD writer
  // (recent) or a restore's: few at the old end, so the walk is short.
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    Slot& s = slots_[static_cast<size_t>(*it)];
    if (s.holds > 0) continue;
    const int slot = *it;
    lru_.erase(it);
    index_.erase(s.hash);
    s.state = State::kReserved;
    ++stats_.evictions;
    return slot;
  }
  ++stats_.refused;
  return std::nullopt;
}

bool KvHostTier::Publish(int slot, const BlockHash& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_.at(static_cast<size_t>(slot));
  CHECK(s.state == State::kReserved) << "host tier: publishing slot " << slot << " not reserved";
  if (index_.contains(hash)) {
    s.state = State::kFree;
    free_.push_back(slot);
    return false;
  }
  s.state = State::kPublished;
  s.hash = hash;
  s.lru = lru_.insert(lru_.end(), slot);
  index_.emplace(hash, slot);
  ++stats_.inserts;
  return true;
}

void KvHostTier::Unreserve(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_.at(static_cast<size_t>(slot));
  CHECK(s.state == State::kReserved) << "host tier: giving back slot " << slot << " not reserved";
  s.state = State::kFree;
  free_.push_back(slot);
}

std::optional<int> KvHostTier::Find(const BlockHash& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(hash);
  if (it == index_.end()) return std::nullopt;
  Slot& s = slots_[static_cast<size_t>(it->second)];
  lru_.splice(lru_.end(), lru_, s.lru);
  ++stats_.hits;
  return it->second;
}

bool KvHostTier::Contains(const BlockHash& hash) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.contains(hash);
}

uint8_t* KvHostTier::data(int slot) const {
  CHECK(slot >= 0 && static_cast<size_t>(slot) < slots_.size()) << "host tier: slot " << slot;
  return arena_.get() + static_cast<size_t>(slot) * static_cast<size_t>(block_bytes_);
}

std::shared_ptr<const uint8_t> KvHostTier::Hold(int slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& s = slots_.at(static_cast<size_t>(slot));
    CHECK(s.state == State::kPublished) << "host tier: holding slot " << slot << " not published";
    if (s.holds++ == 0) ++held_;
  }
  // The tier outlives every hold (the engine drops the SSD tier, whose queue holds them, first).
  return std::shared_ptr<const uint8_t>(data(slot), [this, slot](const uint8_t*) { Unhold(slot); });
}

void KvHostTier::Unhold(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_[static_cast<size_t>(slot)];
  CHECK_GT(s.holds, 0) << "host tier: slot " << slot << " unheld twice";
  if (--s.holds == 0) --held_;
}

void KvHostTier::RecordRestore(int blocks) {
  if (blocks <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.restores;
  stats_.restored_blocks += blocks;
}

KvHostTierStats KvHostTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  KvHostTierStats s = stats_;
  s.entries = static_cast<int64_t>(index_.size());
  s.bytes = s.entries * block_bytes_;
  s.held = held_;
  return s;
}

}  // namespace loom
