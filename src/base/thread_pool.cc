#include "base/thread_pool.h"

#include <algorithm>
#include <atomic>

#include "base/check.h"

namespace loom {

ThreadPool::ThreadPool(size_t num_threads) {
  CHECK_GE(num_threads, size_t{1});
  workers_.reserve(num_threads);
  for (size_t i = 0; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    CHECK(!stopping_) << "Submit after shutdown";
    tasks_.push(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop();
    }
    task();
  }
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  ParallelFor(n, workers_.size() + 1, [&fn](size_t i, size_t /*worker*/) { fn(i); });
}

void ThreadPool::ParallelFor(size_t n, size_t max_workers,
                             const std::function<void(size_t, size_t)>& fn) {
  CHECK_GE(max_workers, size_t{1});
  if (n == 0) return;
  // Every participant (helpers + caller) must finish before the locals below go out of scope, so
  // we count participants, not items.
  std::atomic<size_t> next{0};
  const size_t helpers = std::min({workers_.size(), max_workers - 1, n - 1});
  size_t finished = 0;
  std::mutex done_mu;
  std::condition_variable done_cv;
  auto run_items = [&](size_t worker) {
    for (size_t i; (i = next.fetch_add(1)) < n;) fn(i, worker);
  };
  for (size_t h = 0; h < helpers; ++h) {
    Submit([&, worker = h + 1] {
      run_items(worker);
      std::lock_guard<std::mutex> lock(done_mu);
      if (++finished == helpers) done_cv.notify_all();
    });
  }
  run_items(0);
  std::unique_lock<std::mutex> lock(done_mu);
  done_cv.wait(lock, [&] { return finished == helpers; });
}

}  // namespace loom
