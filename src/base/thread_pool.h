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
  // Runs fn(i, worker) for i in [0, n) on at most `max_workers` (>= 1) threads: the caller
  // (worker 0) and up to max_workers - 1 pool threads (workers 1, 2, ...). Items go to whichever
  // worker is free; one worker runs its items one after another, so fn may use per-worker scratch
  // indexed by `worker` (< min(max_workers, size() + 1)). Returns when all items are done.
  void ParallelFor(size_t n, size_t max_workers,
                   const std::function<void(size_t i, size_t worker)>& fn);
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
