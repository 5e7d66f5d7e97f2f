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

int64_t ThreadPool::claim(uint32_t gen) {
  uint64_t word = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(word >> 32) != gen) return -1;  // a newer loop (or none yet)
    const int64_t task = static_cast<int64_t>(word & 0xFFFFFFFFu);
    if (task >= n_tasks_.load(std::memory_order_relaxed)) return -1;
    if (claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire)) return task;
  }
}

void ThreadPool::work(int thread, uint32_t gen) {
  for (;;) {
    const int64_t task = claim(gen);
    if (task < 0) break;
    fn_(ctx_, task, thread);
    done_tasks_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(int64_t n_tasks, TaskFn fn, void* ctx) {
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  const uint64_t tag = (gen & 0xFFFFFFFFu) << 32;
  // First close the previous loop's claim word (a worker still holding it
  // from before now fails its compare-exchange), then set up the new loop,
  // then open it. fn_/ctx_ are read only after a successful claim of this
  // loop, which the release store below orders after these writes.
  claim_.store(tag | 0xFFFFFFFFu, std::memory_order_seq_cst);
  fn_ = fn;
  ctx_ = ctx;
  n_tasks_.store(n_tasks, std::memory_order_relaxed);
  done_tasks_.store(0, std::memory_order_relaxed);
  claim_.store(tag, std::memory_order_release);
  {
    // Publishing under the mutex pairs with the sleeping workers' wait.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.store(gen, std::memory_order_release);
  }
  wake_.notify_all();
  work(0, static_cast<uint32_t>(gen));
  // Wait for the tasks other threads took; fn/ctx stay valid until then.
  while (done_tasks_.load(std::memory_order_acquire) != n_tasks) {
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
    // (The clock is read once per 64 pauses, not per poll: clock_gettime on
    // every iteration cost more than the polling itself.)
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    uint64_t now = seen;
    unsigned polls = 0;
    while ((now = generation_.load(std::memory_order_acquire)) == seen) {
      if ((++polls & 63) == 0 && std::chrono::steady_clock::now() > spin_until) {
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
    work(index, static_cast<uint32_t>(now));
  }
}

}  // namespace guild
