#include "server/response_store.h"

namespace loom {

void ResponseStore::Put(const std::string& id, StoredResponse response) {
  if (capacity_ <= 0) return;
  auto entry = std::make_shared<const StoredResponse>(std::move(response));
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(id); it != index_.end()) {
    lru_.erase(it->second);
    index_.erase(it);
  }
  lru_.emplace_front(id, std::move(entry));
  index_[id] = lru_.begin();
  while (static_cast<int>(lru_.size()) > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

std::shared_ptr<const StoredResponse> ResponseStore::Get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

bool ResponseStore::Erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

int ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(lru_.size());
}

}  // namespace loom
