// A fixed pool of worker threads for data-parallel loops in the token and
// layer loops. parallel_for hands out task indices through one atomic word
// (loop generation + next index: no allocation, no queue), and the calling
// thread works too. A loop is over when all its tasks have finished, not when
// every worker has looked at it: a worker the OS has not scheduled yet (the
// machine may be busy) never delays a loop it took no task of, and a late
// worker cannot take a task of a newer loop by mistake (its claim names the
// generation it woke up for). Workers spin briefly before sleeping, because
// decode issues many short loops back to back.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace guild {

class ThreadPool {
 public:
  // n_threads counts the caller: n_threads - 1 workers are started.
  // cpus: optional CPU ids to pin thread i to cpus[i % size] (caller is thread 0).
  explicit ThreadPool(int n_threads, const std::vector<int>& cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(task, thread) for task in [0, n_tasks) across the pool and waits.
  // fn must not throw. Not reentrant: one loop at a time per pool.
  template <typename Fn>
  void parallel_for(int64_t n_tasks, Fn&& fn) {
    if (n_tasks <= 0) return;
    if (n_threads_ == 1 || n_tasks == 1) {
      for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
      return;
    }
    using FnT = std::remove_reference_t<Fn>;
    auto trampoline = [](void* ctx, int64_t task, int thread) {
      (*static_cast<FnT*>(ctx))(task, thread);
    };
    run(n_tasks, trampoline, const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using TaskFn = void (*)(void* ctx, int64_t task, int thread);
  void run(int64_t n_tasks, TaskFn fn, void* ctx);
  void worker_main(int index);
  void work(int thread, uint32_t gen);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::vector<int> cpus_;

  // Claims the next task of loop `gen`: its index, or -1 when that loop has
  // no tasks left (or is no longer the current loop).
  int64_t claim(uint32_t gen);

  // The current loop. generation_ changes when a new loop is published;
  // claim_ holds (generation << 32) | next task index of the current loop.
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  std::atomic<int64_t> n_tasks_{0};
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_tasks_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};

  std::mutex mutex_;
  std::condition_variable wake_;
};

// Pins the calling thread to one CPU; false where unsupported or refused.
bool pin_current_thread(int cpu);

}  // namespace guild
