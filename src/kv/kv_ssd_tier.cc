#include "kv/kv_ssd_tier.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "base/logging.h"

namespace loom {

Status KvSsdTierConfig::Validate() const {
  if (dir.empty()) return InvalidArgumentError("--ssd-cache: empty directory");
  if (max_bytes <= 0) return InvalidArgumentError("--ssd-cache-max must be > 0");
  if (max_pending_bytes <= 0) return InvalidArgumentError("ssd tier: spill queue must be > 0");
  if (num_readers < 1 || num_readers > 64) {
    return InvalidArgumentError("ssd tier: readers must be in [1, 64]");
  }
  if (staging_slots < 1 || staging_slots > 64 || staging_chunk_bytes <= 0) {
    return InvalidArgumentError("ssd tier: staging needs 1 to 64 slots of > 0 bytes");
  }
  return format.Validate();
}

KvRestoreJob::KvRestoreJob(KvSsdTier* tier, std::vector<BlockHash> hashes)
    : tier_(tier),
      hashes_(std::move(hashes)),
      block_bytes_(tier->block_bytes()),
      chunk_blocks_(tier->chunk_blocks_),
      num_chunks_(static_cast<int>((hashes_.size() + static_cast<size_t>(chunk_blocks_) - 1) /
                                   static_cast<size_t>(chunk_blocks_))),
      num_slots_(static_cast<int>(tier->slots_.size())),
      remaining_(static_cast<size_t>(num_slots_), 0),
      first_bad_(static_cast<size_t>(num_slots_), 0) {
  ended_ = num_chunks_ == 0;
}

void KvRestoreJob::SubmitLocked(int chunk) {
  const int slot = chunk % num_slots_;
  const int first = chunk * chunk_blocks_;
  const int n = std::min(chunk_blocks_, static_cast<int>(hashes_.size()) - first);
  remaining_[slot] = n;
  first_bad_[slot] = n;
  in_flight_ += n;
  ++next_submit_;
  for (int i = 0; i < n; ++i) {
    tier_->readers_.Submit([self = shared_from_this(), chunk, i] { self->Read(chunk, i); });
  }
}

void KvRestoreJob::Read(int chunk, int i) {
  const int slot = chunk % num_slots_;
  const bool ok =
      tier_->store_
          ->Read(hashes_[static_cast<size_t>(chunk * chunk_blocks_ + i)], tier_->Slot(slot, i))
          .ok();
  std::lock_guard<std::mutex> lock(mu_);
  if (!ok) first_bad_[slot] = std::min(first_bad_[slot], i);
  --remaining_[slot];
  --in_flight_;
  cv_.notify_all();
}

std::optional<KvRestoreJob::Chunk> KvRestoreJob::Next(bool wait) {
  std::unique_lock<std::mutex> lock(mu_);
  // The chunk returned last is copied: its slot takes the next chunk not yet read.
  if (!ended_ && next_consume_ > 0 && next_submit_ < num_chunks_ &&
      next_submit_ < next_consume_ + num_slots_) {
    SubmitLocked(next_submit_);
  }
  if (ended_) return std::nullopt;
  if (next_consume_ >= num_chunks_) {
    ended_ = true;
    return std::nullopt;
  }
  const int slot = next_consume_ % num_slots_;
  if (remaining_[slot] > 0) {
    if (!wait) return std::nullopt;
    cv_.wait(lock, [&] { return remaining_[slot] == 0; });
  }
  Chunk c;
  c.first = next_consume_ * chunk_blocks_;
  c.count = first_bad_[slot];
  const int full = std::min(chunk_blocks_, static_cast<int>(hashes_.size()) - c.first);
  ++next_consume_;
  if (c.count < full) ended_ = true;  // the chain breaks in this chunk
  if (c.count == 0) return std::nullopt;
  c.bytes =
      std::span<const uint8_t>(tier_->Slot(slot, 0).data(),
                               static_cast<size_t>(c.count) * static_cast<size_t>(block_bytes_));
  return c;
}

bool KvRestoreJob::ended() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_ || next_consume_ >= num_chunks_;
}

void KvRestoreJob::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  ended_ = true;
}

void KvRestoreJob::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return in_flight_ == 0; });
}

StatusOr<std::unique_ptr<KvSsdTier>> KvSsdTier::Open(const KvSsdTierConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<KvDiskStore> store,
                   KvDiskStore::Open(config.dir, config.format, config.max_bytes));
  return std::unique_ptr<KvSsdTier>(new KvSsdTier(config, std::move(store)));
}

KvSsdTier::KvSsdTier(const KvSsdTierConfig& config, std::unique_ptr<KvDiskStore> store)
    : config_(config),
      store_(std::move(store)),
      root_(RootBlockHash(config.format.model_fingerprint, config.format.kv_dtype,
                          config.format.tokenizer_hash)),
      readers_(static_cast<size_t>(config.num_readers)) {
  int64_t blocks = std::max<int64_t>(1, config.staging_chunk_bytes / block_bytes());
  if (config.max_chunk_blocks > 0) blocks = std::min(blocks, config.max_chunk_blocks);
  chunk_blocks_ = static_cast<int>(blocks);
  const size_t bytes = static_cast<size_t>(blocks * block_bytes());
  for (int i = 0; i < config.staging_slots; ++i) {
    std::shared_ptr<uint8_t> slot;
    if (config.alloc_staging) {
      slot = config.alloc_staging(bytes);
    } else {
      slot = std::shared_ptr<uint8_t>(new uint8_t[bytes], std::default_delete<uint8_t[]>());
    }
    CHECK(slot != nullptr) << "ssd tier: no staging memory (" << bytes << " bytes)";
    std::memset(slot.get(), 0, bytes);  // touched now: a first restore pays no page faults
    slots_.push_back(std::move(slot));
  }
  writer_ = std::thread([this] { WriterLoop(); });
}

std::span<uint8_t> KvSsdTier::Slot(int slot, int block) const {
  return std::span<uint8_t>(slots_[static_cast<size_t>(slot)].get() +
                                static_cast<size_t>(block) * static_cast<size_t>(block_bytes()),
                            static_cast<size_t>(block_bytes()));
}

KvSsdTier::~KvSsdTier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
}

bool KvSsdTier::Has(const BlockHash& hash) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queued_.contains(hash)) return true;
  }
  return store_->Contains(hash);
}

void KvSsdTier::Spill(std::span<const SpillBlock> blocks) {
  const auto block_bytes = static_cast<size_t>(this->block_bytes());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (spill_disabled_ || stop_ ||
          queued_bytes_ + static_cast<int64_t>(block_bytes) > config_.max_pending_bytes) {
        ++dropped_;
        continue;
      }
      // A block whose parent is neither stored nor queued could never be restored (a chain is
      // read from its head): refused, like the parent was.
      const BlockHash& parent = blocks[i].parent;
      if (!(parent == root_) && !queued_.contains(parent) && !store_->Contains(parent)) {
        ++dropped_;
        continue;
      }
      if (!queued_.insert(blocks[i].hash).second) continue;  // already queued
      queued_bytes_ += static_cast<int64_t>(block_bytes);
      CHECK(blocks[i].bytes != nullptr) << "ssd tier: a spilled block without its bytes";
      queue_.push_back(blocks[i]);
    }
  }
  cv_.notify_one();
}

int64_t KvSsdTier::QueueRoom() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (spill_disabled_ || stop_) return 0;
  return std::max<int64_t>(0, (config_.max_pending_bytes - queued_bytes_) / block_bytes());
}

void KvSsdTier::Refused(int64_t blocks) {
  std::lock_guard<std::mutex> lock(mu_);
  dropped_ += blocks;
}

void KvSsdTier::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    SpillBlock s = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= block_bytes();
    writing_ = true;
    lock.unlock();
    Status written =
        store_->Write(s.hash, s.parent,
                      std::span<const uint8_t>(s.bytes.get(), static_cast<size_t>(block_bytes())));
    s.bytes.reset();  // frees (or unholds) the payload here, off the lock
    lock.lock();
    writing_ = false;
    queued_.erase(s.hash);
    if (!written.ok() && !spill_disabled_) {
      // ENOSPC / EDQUOT, or a directory that stopped working: spilling off, once, loudly. What is
      // stored stays readable.
      if (written.code() == StatusCode::kResourceExhausted || store_->stats().write_errors >= 8) {
        spill_disabled_ = true;
        dropped_ += static_cast<int64_t>(queue_.size());
        queue_.clear();
        queued_.clear();
        queued_bytes_ = 0;
        LOG(WARNING) << "ssd cache: spilling turned off (" << written.message()
                     << "); blocks already on disk are still restored";
      } else {
        LOG(WARNING) << "ssd cache: " << written.message();
      }
    }
    if (queue_.empty()) drained_.notify_all();
  }
}

bool KvSsdTier::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return drained_.wait_for(lock, timeout, [this] { return queue_.empty() && !writing_; });
}

std::shared_ptr<KvRestoreJob> KvSsdTier::StartRestore(std::vector<BlockHash> hashes) {
  if (std::shared_ptr<KvRestoreJob> last = last_job_.lock()) {
    std::lock_guard<std::mutex> lock(last->mu_);
    CHECK(last->in_flight_ == 0 && (last->ended_ || last->next_consume_ >= last->num_chunks_))
        << "ssd tier: the last restore still reads";
  }
  auto job = std::make_shared<KvRestoreJob>(this, std::move(hashes));
  std::lock_guard<std::mutex> lock(job->mu_);
  for (int c = 0; c < std::min(job->num_chunks_, job->num_slots_); ++c) job->SubmitLocked(c);
  last_job_ = job;
  return job;
}

void KvSsdTier::RecordRestore(int blocks) {
  if (blocks <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++restores_;
  restored_blocks_ += blocks;
}

KvSsdTierStats KvSsdTier::stats() const {
  KvSsdTierStats s;
  s.store = store_->stats();
  std::lock_guard<std::mutex> lock(mu_);
  s.pending_spills = static_cast<int64_t>(queue_.size()) + (writing_ ? 1 : 0);
  s.dropped_spills = dropped_;
  s.restores = restores_;
  s.restored_blocks = restored_blocks_;
  s.spill_disabled = spill_disabled_;
  return s;
}

}  // namespace loom
