// ThreadPool: every task runs exactly once, loops back to back and pools
// created/destroyed rapidly never lose a wake-up (a lost one hangs: ctest's
// timeout catches it).
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "check.h"
#include "core/thread_pool.h"

using guild::ThreadPool;

TEST(every_task_runs_once) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(1000);
    for (auto& h : hits) h = 0;
    pool.parallel_for(1000, [&](int64_t t, int thread) {
      hits[t]++;
      CHECK(thread >= 0 && thread < threads);
    });
    int bad = 0;
    for (auto& h : hits) bad += h.load() != 1;
    CHECK(bad == 0);
  }
}

TEST(many_short_loops_back_to_back) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int loop = 0; loop < 20000; ++loop) pool.parallel_for(2 + loop % 5, [&](int64_t t, int) { sum += t; });
  int64_t want = 0;
  for (int loop = 0; loop < 20000; ++loop) { const int n = 2 + loop % 5; want += n * (n - 1) / 2; }
  CHECK(sum.load() == want);
}

TEST(pools_created_and_destroyed_immediately) {
  // The first loop (or the destructor) can be published before a worker has
  // started running: it must still be seen.
  for (int i = 0; i < 300; ++i) {
    ThreadPool pool(2 + i % 3);
    if (i % 2) {
      std::atomic<int> n{0};
      pool.parallel_for(8, [&](int64_t, int) { n++; });
      CHECK(n.load() == 8);
    }
  }
}

TEST(held_pool_runs_loops_spaced_past_the_spin_window_and_destroys_while_held) {
  // Loops 0.5 ms apart (past the 200 µs spin) with the pool held: every task
  // still runs once; releasing lets workers sleep, and the next loop wakes
  // them; a pool destroyed while held does not hang.
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  pool.set_hold(true);
  CHECK(pool.held());
  for (int loop = 0; loop < 20; ++loop) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(500);
    while (std::chrono::steady_clock::now() < until) {
    }
    pool.parallel_for(6, [&](int64_t t, int) { sum += t; });
  }
  pool.set_hold(false);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers go to sleep
  pool.parallel_for(6, [&](int64_t t, int) { sum += t; });
  CHECK(sum.load() == 21 * 15);
  {
    ThreadPool held(4);
    held.set_hold(true);
    held.parallel_for(4, [](int64_t, int) {});
  }
}
