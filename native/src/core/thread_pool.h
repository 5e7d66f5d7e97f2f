// A fixed pool of worker threads for data-parallel loops in the token and
// layer loops. parallel_for hands out task indices through one atomic word
// (loop generation + next index: no allocation, no queue), and the calling
// thread works too. A loop is over when all its tasks have finished, not when
// every worker has looked at it: a worker the OS has not scheduled yet (the
// machine may be busy) never delays a loop it took no task of, and a late
// worker cannot take a task of a newer loop by mistake (its claim names the
// generation it woke up for). Workers spin briefly before sleeping, because
// decode issues many short loops back to back.
// On several NUMA nodes (a PoolNuma view, load stage 6) parallel_for_nodes
// gives each node its own claim word: threads take their node's tasks first.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace guild {

// The pool's NUMA view, installed once at load (stage 6) where the machine has
// two or more NUMA nodes with workers on them; a pool without one runs every
// loop exactly as before. Built by runtime/numa_placement.
struct PoolNuma {
  static constexpr int kMaxNodes = 64;
  int n_nodes = 0;               // pool node indices 0 .. n_nodes-1
  std::vector<int> node_id;      // OS node id of each pool node
  std::vector<int> thread_node;  // [pool size] pool node of thread i (the caller is thread 0)
  // Where the items of a placed tensor (a layer's routed experts) live:
  // key = the tensor's base address, node[i] = pool node holding item i.
  struct Table {
    const void* key = nullptr;
    std::vector<uint8_t> node;
  };
  std::vector<Table> tables;  // sorted by key (sort_tables())

  void sort_tables();
  // The table whose key is `key` (binary search), or null.
  const Table* find(const void* key) const;
};

class ThreadPool {
 public:
  // n_threads counts the caller: n_threads - 1 workers are started.
  // cpus: optional CPU ids to pin thread i to cpus[i % size] (caller is thread 0).
  explicit ThreadPool(int n_threads, const std::vector<int>& cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // While held, idle workers keep spinning instead of going to sleep after
  // their short spin: for callers that issue loops at a steady rate slower
  // than the spin window (the hybrid MoE server: one loop burst per layer,
  // every ~0.2-0.3 ms during a decode step), so no loop waits for a wake-up.
  // Release it when the burst ends; sleeping workers are not woken by it.
  void set_hold(bool on) { hold_.store(on, std::memory_order_relaxed); }
  bool held() const { return hold_.load(std::memory_order_relaxed); }

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

  // NUMA view (null: none). Set at load, before any loop uses it, never while
  // a loop runs. Returns false (and installs none) unless n_nodes is in
  // [2, PoolNuma::kMaxNodes], thread_node covers the pool and every table
  // names valid nodes.
  bool set_numa(std::shared_ptr<const PoolNuma> numa);
  const PoolNuma* numa() const { return numa_.get(); }
  const std::vector<int>& cpus() const { return cpus_; }

  // Node-aware loop: tasks [node_begin[j], node_begin[j+1]) belong to pool
  // node j (node_begin has numa()->n_nodes + 1 entries, ascending, from 0).
  // Each thread runs its own node's tasks first; then, unless `strict`, it
  // helps the other nodes (so no node's threads idle while another has
  // work). With `strict` a task runs only on a thread of its node (first-
  // touch placement); every node with tasks must then have a thread. Every
  // task runs exactly once either way. Meant for pools with a NUMA view;
  // without one, node_begin is read as one node ([0, node_begin[1])).
  template <typename Fn>
  void parallel_for_nodes(const int64_t* node_begin, bool strict, Fn&& fn) {
    const int n_nodes = numa_ ? numa_->n_nodes : 0;
    if (n_nodes == 0 || n_threads_ == 1) {
      const int64_t n = node_begin[n_nodes > 0 ? n_nodes : 1];
      if (n_threads_ == 1) {
        for (int64_t t = 0; t < n; ++t) fn(t, 0);
      } else {
        parallel_for(n, fn);
      }
      return;
    }
    if (node_begin[n_nodes] <= 0) return;
    using FnT = std::remove_reference_t<Fn>;
    auto trampoline = [](void* ctx, int64_t task, int thread) {
      (*static_cast<FnT*>(ctx))(task, thread);
    };
    run_nodes(node_begin, strict, trampoline, const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using TaskFn = void (*)(void* ctx, int64_t task, int thread);
  void run(int64_t n_tasks, TaskFn fn, void* ctx);
  void worker_main(int index);
  void work(int thread, uint32_t gen);
  // Opens generation `gen` to the workers, works on it as thread 0, then
  // waits until all n_tasks are done.
  void publish_and_join(uint64_t gen, int64_t n_tasks);
  void run_nodes(const int64_t* node_begin, bool strict, TaskFn fn, void* ctx);
  void work_nodes(int thread, uint32_t gen, bool strict);
  int64_t claim_node(int node, uint32_t gen);

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
  // 0: plain loop (claim_); 1: node loop; 2: strict node loop (node_claims_).
  std::atomic<int> loop_mode_{0};
  std::atomic<int64_t> n_tasks_{0};
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_tasks_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> hold_{false};

  std::mutex mutex_;
  std::condition_variable wake_;

  // Node loops: one claim word per pool node, tagged with the generation like
  // claim_ (next is an absolute task index), and that node's end index.
  struct alignas(64) NodeClaim {
    std::atomic<uint64_t> word{0};
    std::atomic<int64_t> end{0};
  };
  std::shared_ptr<const PoolNuma> numa_;
  std::unique_ptr<NodeClaim[]> node_claims_;
};

// Pins the calling thread to one CPU; false where unsupported or refused.
bool pin_current_thread(int cpu);

// The CPUs the calling thread may run on, as they were before
// pin_current_thread first pinned it (a thread that loaded one model is
// pinned to one CPU; the next load on it must still see the whole machine).
std::vector<int> affinity_before_pinning();

}  // namespace guild
