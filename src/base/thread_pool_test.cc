#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace loom {
namespace {

TEST(ThreadPoolTest, ParallelForVisitsEachIndexOnce) {
  ThreadPool pool(3);
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{1000}}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, [&](size_t i) { hits[i].fetch_add(1); });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << i;
  }
}

TEST(ThreadPoolTest, ParallelForGivesEachWorkerItsOwnIndex) {
  ThreadPool pool(3);
  for (size_t max_workers : {size_t{1}, size_t{2}, size_t{4}, size_t{9}}) {
    constexpr size_t kItems = 2000;
    std::vector<std::atomic<int>> hits(kItems);
    std::vector<std::atomic<int>> busy(max_workers);  // items running now, per worker index
    std::atomic<bool> overlap{false}, out_of_range{false};
    pool.ParallelFor(kItems, max_workers, [&](size_t i, size_t worker) {
      if (worker >= std::min(max_workers, pool.size() + 1)) {
        out_of_range = true;
        return;
      }
      if (busy[worker].fetch_add(1) != 0) overlap = true;
      hits[i].fetch_add(1);
      busy[worker].fetch_sub(1);
    });
    EXPECT_FALSE(out_of_range) << max_workers;
    EXPECT_FALSE(overlap) << "two items ran at once on worker index, max_workers " << max_workers;
    for (size_t i = 0; i < kItems; ++i) EXPECT_EQ(hits[i].load(), 1) << i;
  }
  // One worker: everything on the calling thread.
  const std::thread::id self = std::this_thread::get_id();
  bool elsewhere = false;
  pool.ParallelFor(100, 1,
                   [&](size_t, size_t) { elsewhere |= std::this_thread::get_id() != self; });
  EXPECT_FALSE(elsewhere);
}

TEST(ThreadPoolTest, SubmitRunsBeforeDestruction) {
  std::atomic<int> count{0};
  {
    ThreadPool pool(2);
    for (int i = 0; i < 100; ++i) pool.Submit([&] { count.fetch_add(1); });
  }
  EXPECT_EQ(count.load(), 100);
}

}  // namespace
}  // namespace loom
