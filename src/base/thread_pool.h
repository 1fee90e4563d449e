// ThreadPool: a fixed set of worker threads running queued closures. Used for host-side work
// that is not a data-parallel kernel (those use OpenMP in backend/cpu).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace loom {

class ThreadPool {
 public:
  // Starts `num_threads` (>= 1) workers.
  explicit ThreadPool(size_t num_threads);
  // Finishes every queued task, then joins the workers.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task`; thread-safe.
  void Submit(std::function<void()> task);
  // Runs fn(i) for i in [0, n) across the workers and the calling thread; returns when all done.
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn);
  size_t size() const { return workers_.size(); }

 private:
  void WorkerLoop();

  std::vector<std::thread> workers_;
  std::queue<std::function<void()>> tasks_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace loom
