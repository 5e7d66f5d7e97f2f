#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace guild {

namespace {
// The calling thread's CPUs before pin_current_thread first pinned it.
thread_local bool t_saved_affinity = false;
#if defined(__linux__)
thread_local cpu_set_t t_affinity_before;
#endif
}  // namespace

std::vector<int> affinity_before_pinning() {
  std::vector<int> cpus;
#if defined(__linux__)
  cpu_set_t set;
  if (t_saved_affinity) set = t_affinity_before;
  else if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
#endif
  return cpus;
}

bool pin_current_thread(int cpu) {
#if defined(__linux__)
  if (!t_saved_affinity && sched_getaffinity(0, sizeof(t_affinity_before), &t_affinity_before) == 0)
    t_saved_affinity = true;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
#else
  (void)cpu;
  return false;
#endif
}

void PoolNuma::sort_tables() {
  std::sort(tables.begin(), tables.end(), [](const Table& a, const Table& b) {
    return std::less<const void*>()(a.key, b.key);
  });
}

const PoolNuma::Table* PoolNuma::find(const void* key) const {
  auto it = std::lower_bound(tables.begin(), tables.end(), key, [](const Table& t, const void* k) {
    return std::less<const void*>()(t.key, k);
  });
  return it != tables.end() && it->key == key ? &*it : nullptr;
}

bool ThreadPool::set_numa(std::shared_ptr<const PoolNuma> numa) {
  // A view that does not describe this pool is not installed.
  bool valid = numa && numa->n_nodes >= 2 && numa->n_nodes <= PoolNuma::kMaxNodes &&
               static_cast<int>(numa->thread_node.size()) >= n_threads_;
  for (int t = 0; valid && t < n_threads_; ++t)
    valid = numa->thread_node[t] >= 0 && numa->thread_node[t] < numa->n_nodes;
  if (valid)
    for (const PoolNuma::Table& t : numa->tables)
      for (uint8_t n : t.node) valid = valid && n < numa->n_nodes;
  if (!valid) {
    numa_.reset();
    return false;
  }
  if (!node_claims_) node_claims_ = std::make_unique<NodeClaim[]>(PoolNuma::kMaxNodes);
  numa_ = std::move(numa);
  return true;
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
  // The mode is that of loop `gen` or of a newer one; a newer one's claim
  // words carry another generation, so a claim for `gen` then fails.
  const int mode = loop_mode_.load(std::memory_order_relaxed);
  if (mode != 0) {
    work_nodes(thread, gen, mode == 2);
    return;
  }
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
  if (loop_mode_.load(std::memory_order_relaxed) != 0) loop_mode_.store(0, std::memory_order_relaxed);
  n_tasks_.store(n_tasks, std::memory_order_relaxed);
  done_tasks_.store(0, std::memory_order_relaxed);
  claim_.store(tag, std::memory_order_release);
  publish_and_join(gen, n_tasks);
}

void ThreadPool::publish_and_join(uint64_t gen, int64_t n_tasks) {
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

int64_t ThreadPool::claim_node(int node, uint32_t gen) {
  NodeClaim& c = node_claims_[node];
  uint64_t word = c.word.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(word >> 32) != gen) return -1;
    const int64_t task = static_cast<int64_t>(word & 0xFFFFFFFFu);
    if (task >= c.end.load(std::memory_order_relaxed)) return -1;
    if (c.word.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire)) return task;
  }
}

void ThreadPool::work_nodes(int thread, uint32_t gen, bool strict) {
  const PoolNuma* numa = numa_.get();
  const int n_nodes = numa->n_nodes;
  const int home = numa->thread_node[thread];
  // Own node first; then (not strict) the others, from the next one on.
  for (int i = 0; i < (strict ? 1 : n_nodes); ++i) {
    const int node = home + i < n_nodes ? home + i : home + i - n_nodes;
    for (;;) {
      const int64_t task = claim_node(node, gen);
      if (task < 0) break;
      fn_(ctx_, task, thread);
      done_tasks_.fetch_add(1, std::memory_order_acq_rel);
    }
  }
}

void ThreadPool::run_nodes(const int64_t* node_begin, bool strict, TaskFn fn, void* ctx) {
  const int n_nodes = numa_->n_nodes;
  const int64_t n_tasks = node_begin[n_nodes];
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  const uint64_t tag = (gen & 0xFFFFFFFFu) << 32;
  // As in run(): close every claim word of the previous loop first (plain
  // claims of this generation stay closed), then set up, then open.
  claim_.store(tag | 0xFFFFFFFFu, std::memory_order_seq_cst);
  for (int j = 0; j < n_nodes; ++j) node_claims_[j].word.store(tag | 0xFFFFFFFFu, std::memory_order_seq_cst);
  fn_ = fn;
  ctx_ = ctx;
  loop_mode_.store(strict ? 2 : 1, std::memory_order_relaxed);
  n_tasks_.store(n_tasks, std::memory_order_relaxed);
  done_tasks_.store(0, std::memory_order_relaxed);
  for (int j = 0; j < n_nodes; ++j) node_claims_[j].end.store(node_begin[j + 1], std::memory_order_relaxed);
  for (int j = 0; j < n_nodes; ++j) node_claims_[j].word.store(tag | static_cast<uint64_t>(node_begin[j]), std::memory_order_release);
  publish_and_join(gen, n_tasks);
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
    auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    uint64_t now = seen;
    unsigned polls = 0;
    while ((now = generation_.load(std::memory_order_acquire)) == seen) {
      if ((++polls & 63) == 0 && std::chrono::steady_clock::now() > spin_until) {
        if (hold_.load(std::memory_order_relaxed) && !stop_.load(std::memory_order_relaxed)) {
          spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);  // held: keep spinning
          continue;
        }
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
