#include "kv/kv_ssd_tier.h"

#include <algorithm>
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
  return format.Validate();
}

KvRestoreJob::KvRestoreJob(std::vector<BlockHash> hashes, int64_t block_bytes)
    : hashes_(std::move(hashes)),
      block_bytes_(block_bytes),
      data_(hashes_.size() * static_cast<size_t>(block_bytes)),
      ok_(hashes_.size(), 0),
      remaining_(hashes_.size()) {
  if (hashes_.empty()) done_.store(true, std::memory_order_release);
}

void KvRestoreJob::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done(); });
}

int KvRestoreJob::num_read() const {
  CHECK(done()) << "KvRestoreJob::num_read before done";
  int n = 0;
  while (n < static_cast<int>(ok_.size()) && ok_[n]) ++n;
  return n;
}

std::span<const uint8_t> KvRestoreJob::block(int i) const {
  CHECK(i >= 0 && i < static_cast<int>(hashes_.size()));
  return std::span<const uint8_t>(data_).subspan(static_cast<size_t>(i) * block_bytes_,
                                                 static_cast<size_t>(block_bytes_));
}

StatusOr<std::unique_ptr<KvSsdTier>> KvSsdTier::Open(const KvSsdTierConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<KvDiskStore> store,
                   KvDiskStore::Open(config.dir, config.format, config.max_bytes));
  return std::unique_ptr<KvSsdTier>(new KvSsdTier(config, std::move(store)));
}

KvSsdTier::KvSsdTier(const KvSsdTierConfig& config, std::unique_ptr<KvDiskStore> store)
    : config_(config), store_(std::move(store)), readers_(static_cast<size_t>(config.num_readers)) {
  writer_ = std::thread([this] { WriterLoop(); });
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

void KvSsdTier::Spill(std::span<const SpillBlock> blocks,
                      std::shared_ptr<const std::vector<uint8_t>> bytes) {
  const auto block_bytes = static_cast<size_t>(this->block_bytes());
  CHECK_EQ(bytes->size(), blocks.size() * block_bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (spill_disabled_ || stop_ ||
          queued_bytes_ + static_cast<int64_t>(block_bytes) > config_.max_pending_bytes) {
        ++dropped_;
        continue;
      }
      if (!queued_.insert(blocks[i].hash).second) continue;  // already queued
      queued_bytes_ += static_cast<int64_t>(block_bytes);
      queue_.push_back({blocks[i].hash, blocks[i].parent, bytes, i * block_bytes});
    }
  }
  cv_.notify_one();
}

void KvSsdTier::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Spilled s = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= block_bytes();
    writing_ = true;
    lock.unlock();
    Status written = store_->Write(
        s.hash, s.parent,
        std::span<const uint8_t>(*s.bytes).subspan(s.offset, static_cast<size_t>(block_bytes())));
    s.bytes.reset();  // the last block of a Spill frees its buffer here, off the lock
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
  auto job = std::make_shared<KvRestoreJob>(std::move(hashes), block_bytes());
  const size_t n = job->hashes_.size();
  for (size_t i = 0; i < n; ++i) {
    readers_.Submit([this, job, i] {
      const auto out = std::span<uint8_t>(job->data_)
                           .subspan(i * static_cast<size_t>(job->block_bytes_),
                                    static_cast<size_t>(job->block_bytes_));
      job->ok_[i] = store_->Read(job->hashes_[i], out).ok();
      if (job->remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(job->mu_);
        job->done_.store(true, std::memory_order_release);
        job->cv_.notify_all();
      }
    });
  }
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
