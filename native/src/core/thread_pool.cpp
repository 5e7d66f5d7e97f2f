#include "core/thread_pool.h"

#include <sched.h>

#include <chrono>

namespace guild {

bool pin_current_thread(int cpu) {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
#else
  (void)cpu;
  return false;
#endif
}

ThreadPool::ThreadPool(int n_threads, const std::vector<int>& cpus)
    : n_threads_(n_threads < 1 ? 1 : n_threads), cpus_(cpus) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::work(int thread) {
  for (;;) {
    const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) break;
    fn_(ctx_, task, thread);
  }
}

void ThreadPool::run(int64_t n_tasks, TaskFn fn, void* ctx) {
  fn_ = fn;
  ctx_ = ctx;
  n_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  active_workers_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // Publishing under the mutex pairs with the sleeping workers' wait.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  work(0);
  // Wait for every worker to leave the loop before fn/ctx go out of scope.
  while (active_workers_.load(std::memory_order_acquire) != 0) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

void ThreadPool::worker_main(int index) {
  if (!cpus_.empty()) pin_current_thread(cpus_[index % cpus_.size()]);
  // Start from the generation the pool was built with (0), not from a fresh
  // read: a loop or the destructor may publish before this thread runs.
  uint64_t seen = 0;
  for (;;) {
    // Spin for a short while: decode issues loops every few microseconds.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    uint64_t now = seen;
    while ((now = generation_.load(std::memory_order_acquire)) == seen) {
      if (std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        now = generation_.load(std::memory_order_acquire);
        break;
      }
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    seen = now;
    if (stop_.load()) return;
    work(index);
    active_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace guild
