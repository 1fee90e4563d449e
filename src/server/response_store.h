// ResponseStore: the Responses API responses kept in memory for `previous_response_id` and
// GET /v1/responses/{id}: a bounded LRU (--responses-store N entries; 0 keeps none). Each entry
// holds the response object as it was returned and the conversation that led to it, so that a
// follow-up request continues it without resending it. Thread-safe (one mutex; entries are
// immutable and shared, so a reader never copies under the lock).
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>

namespace loom {

struct StoredResponse {
  nlohmann::ordered_json response;  // the response object, as POST (or its stream) returned it
  // The conversation as normalized chat messages (tool_request.h): the earlier responses' one,
  // this request's input, then this response's output. Without `instructions`: OpenAI does not
  // carry them over to a request that names this one as its previous_response_id.
  nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
};

class ResponseStore {
 public:
  explicit ResponseStore(int capacity) : capacity_(capacity) {}

  // Keeps `response` under `id` as the most recently used entry, evicting the least recently
  // used one beyond the capacity. A capacity of 0 keeps nothing.
  void Put(const std::string& id, StoredResponse response);
  // The entry under `id` (and marks it most recently used); null when absent or evicted.
  std::shared_ptr<const StoredResponse> Get(const std::string& id);
  // Drops the entry under `id`; false when there was none.
  bool Erase(const std::string& id);

  int capacity() const { return capacity_; }
  int size() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const StoredResponse>>;
  const int capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace loom
