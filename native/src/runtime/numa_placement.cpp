#include "runtime/numa_placement.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>

#include "artifact/gguf.h"

namespace guild {
namespace {

constexpr uint64_t kPieceBytes = uint64_t{4} << 20;  // first-touch task size
constexpr size_t kMaxPiecePages = kPieceBytes / 4096 + 2;

// blk.<n>.…: the layer number, or -1.
int layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int layer = 0;
  size_t i = 4;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) {
    layer = layer * 10 + (name[i] - '0');
    if (layer > 1000000) return -1;
  }
  return i > 4 && i < name.size() && name[i] == '.' ? layer : -1;
}

// The OS node that holds the page at `addr` (move_pages with no target
// nodes only reports), or -1 where the kernel cannot say.
int node_of_page(const void* addr) {
#if defined(__linux__) && defined(SYS_move_pages)
  void* pages[1] = {const_cast<void*>(addr)};
  int status[1] = {-1};
  if (syscall(SYS_move_pages, 0, 1UL, pages, nullptr, status, 0) == 0 && status[0] >= 0) return status[0];
#else
  (void)addr;
#endif
  return -1;
}

std::string mib(uint64_t bytes) {
  return std::to_string((bytes + (uint64_t{1} << 19)) >> 20) + " MiB";
}

}  // namespace

uint64_t ExpertLayerTensors::bytes_per_expert() const {
  uint64_t b = 0;
  for (uint64_t x : expert_bytes) b += x;
  return b;
}

std::vector<ExpertLayerTensors> find_expert_tensors(const gguf::ModelFiles& files, int64_t n_expert) {
  std::map<int, ExpertLayerTensors> by_layer;
  if (n_expert <= 0) return {};
  for (const gguf::TensorInfo& t : files.tensors()) {
    const int layer = layer_of(t.name);
    if (layer < 0 || t.name.find("_exps") == std::string_view::npos) continue;
    if (t.n_dims != 3 || t.ne[2] != n_expert || t.data == nullptr) continue;
    if (t.nbytes == 0 || t.nbytes % static_cast<uint64_t>(n_expert) != 0) continue;
    ExpertLayerTensors& L = by_layer[layer];
    L.layer = layer;
    L.data.push_back(t.data);
    L.expert_bytes.push_back(t.nbytes / static_cast<uint64_t>(n_expert));
  }
  std::vector<ExpertLayerTensors> out;
  out.reserve(by_layer.size());
  for (auto& [layer, L] : by_layer) out.push_back(std::move(L));
  return out;
}

NumaPlacement plan_numa_placement(const MachineInfo& machine, const std::vector<int>& thread_cpus, int n_threads,
                                  std::vector<ExpertLayerTensors> layers, int64_t n_expert) {
  NumaPlacement p;
  p.machine_nodes = static_cast<int>(machine.numa_nodes.size());
  p.n_expert = n_expert;
  if (p.machine_nodes < 2) {
    p.reason = "1 NUMA node: no placement needed";
    return p;
  }
  if (thread_cpus.empty()) {
    p.reason = "workers are not pinned: no NUMA placement";
    return p;
  }
  n_threads = std::max(1, n_threads);
  // Pool nodes: the machine's nodes holding workers, in the machine's order.
  std::vector<int> machine_node_of_thread(n_threads);
  std::vector<int> workers(machine.numa_nodes.size(), 0);
  for (int t = 0; t < n_threads; ++t) {
    const int cpu = thread_cpus[static_cast<size_t>(t) % thread_cpus.size()];
    const int mi = machine.node_index_of_cpu(cpu);
    if (mi < 0) {
      p.reason = "CPU " + std::to_string(cpu) + " is on no known NUMA node: no placement";
      return p;
    }
    machine_node_of_thread[t] = mi;
    ++workers[mi];
  }
  std::vector<int> pool_node_of(machine.numa_nodes.size(), -1);
  for (size_t mi = 0; mi < machine.numa_nodes.size(); ++mi) {
    if (workers[mi] == 0) continue;
    pool_node_of[mi] = static_cast<int>(p.node_id.size());
    p.node_id.push_back(machine.numa_nodes[mi].id);
    p.node_index.push_back(static_cast<int>(mi));
    p.workers_per_node.push_back(workers[mi]);
  }
  p.thread_node.resize(n_threads);
  for (int t = 0; t < n_threads; ++t) p.thread_node[t] = pool_node_of[machine_node_of_thread[t]];
  const int n_nodes = static_cast<int>(p.node_id.size());
  if (n_nodes < 2) {
    p.reason = "all " + std::to_string(n_threads) + " workers are on NUMA node " + std::to_string(p.node_id.front()) +
               ": no placement";
    return p;
  }
  if (n_nodes > PoolNuma::kMaxNodes) {
    p.reason = "workers on " + std::to_string(n_nodes) + " NUMA nodes (more than " +
               std::to_string(PoolNuma::kMaxNodes) + "): no placement";
    return p;
  }
  if (n_expert <= 0 || layers.empty()) {
    p.reason = "no routed experts to place";
    return p;
  }

  // Balanced by bytes per worker: each expert (layer by layer, expert by
  // expert) goes to the node with the fewest bytes per worker so far.
  p.layers = std::move(layers);
  p.node_experts.assign(n_nodes, 0);
  p.node_bytes.assign(n_nodes, 0);
  p.expert_node.resize(p.layers.size());
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const uint64_t b = p.layers[l].bytes_per_expert();
    p.expert_node[l].resize(static_cast<size_t>(n_expert));
    for (int64_t e = 0; e < n_expert; ++e) {
      int best = 0;
      for (int j = 1; j < n_nodes; ++j) {
        // bytes[j] / workers[j] < bytes[best] / workers[best], without division.
        const unsigned __int128 lhs = static_cast<unsigned __int128>(p.node_bytes[j]) * p.workers_per_node[best];
        const unsigned __int128 rhs = static_cast<unsigned __int128>(p.node_bytes[best]) * p.workers_per_node[j];
        if (lhs < rhs) best = j;
      }
      p.expert_node[l][e] = static_cast<uint8_t>(best);
      p.node_bytes[best] += b;
      ++p.node_experts[best];
    }
  }
  p.placed = true;
  return p;
}

std::shared_ptr<PoolNuma> NumaPlacement::pool_view() const {
  auto v = std::make_shared<PoolNuma>();
  v->n_nodes = static_cast<int>(node_id.size());
  v->node_id = node_id;
  v->thread_node = thread_node;
  for (size_t l = 0; l < layers.size(); ++l)
    for (const uint8_t* key : layers[l].data) v->tables.push_back({key, expert_node[l]});
  v->sort_tables();
  return v;
}

void first_touch_experts(ThreadPool& pool, NumaPlacement& plan, uint64_t ram_available) {
  if (!plan.placed) return;
  const int n_nodes = static_cast<int>(plan.node_id.size());
  uint64_t total = 0;
  for (uint64_t b : plan.node_bytes) total += b;
  if (ram_available > 0 && total > ram_available) {
    plan.first_touch_note = "skipped: the experts (" + mib(total) + ") exceed the available RAM (" +
                            mib(ram_available) + "); pages land where the node-preferring workers first read them";
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t page = static_cast<uint64_t>(std::max(4096L, sysconf(_SC_PAGESIZE)));

  // Pieces of at most kPieceBytes, grouped by node.
  struct Piece {
    const uint8_t* p;
    uint64_t n;
  };
  std::vector<std::vector<Piece>> by_node(n_nodes);
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    const ExpertLayerTensors& L = plan.layers[l];
    for (int64_t e = 0; e < plan.n_expert; ++e) {
      auto& list = by_node[plan.expert_node[l][e]];
      for (size_t t = 0; t < L.data.size(); ++t) {
        const uint8_t* base = L.data[t] + static_cast<uint64_t>(e) * L.expert_bytes[t];
        for (uint64_t off = 0; off < L.expert_bytes[t]; off += kPieceBytes)
          list.push_back({base + off, std::min(kPieceBytes, L.expert_bytes[t] - off)});
      }
    }
  }
  std::vector<Piece> pieces;
  int64_t node_begin[PoolNuma::kMaxNodes + 1] = {0};
  for (int j = 0; j < n_nodes; ++j) {
    pieces.insert(pieces.end(), by_node[j].begin(), by_node[j].end());
    node_begin[j + 1] = static_cast<int64_t>(pieces.size());
  }

  std::atomic<uint64_t> resident{0}, checked{0}, on_node{0}, sink{0};
  const PoolNuma* view = pool.numa();
  pool.parallel_for_nodes(node_begin, /*strict=*/true, [&](int64_t task, int thread) {
    const Piece& pc = pieces[task];
    const uintptr_t a = reinterpret_cast<uintptr_t>(pc.p) & ~static_cast<uintptr_t>(page - 1);
    const uintptr_t end = reinterpret_cast<uintptr_t>(pc.p) + pc.n;
    const size_t len = end - a;
    const size_t n_pages = (len + page - 1) / page;
    unsigned char vec[kMaxPiecePages];
    if (n_pages <= kMaxPiecePages && mincore(reinterpret_cast<void*>(a), len, vec) == 0) {
      uint64_t r = 0;
      for (size_t i = 0; i < n_pages; ++i) r += vec[i] & 1;
      resident.fetch_add(std::min<uint64_t>(pc.n, r * page), std::memory_order_relaxed);
    }
    madvise(reinterpret_cast<void*>(a), len, MADV_WILLNEED);
    uint8_t acc = 0;
    // One byte per page, from the piece's first byte (the page start may lie
    // before the piece, outside what we may read).
    for (uintptr_t q = reinterpret_cast<uintptr_t>(pc.p); q < end; q = (q & ~static_cast<uintptr_t>(page - 1)) + page)
      acc ^= *reinterpret_cast<const volatile uint8_t*>(q);
    sink.fetch_add(acc, std::memory_order_relaxed);
    const int os_node = node_of_page(reinterpret_cast<const void*>(a));
    if (os_node >= 0) {
      checked.fetch_add(pc.n, std::memory_order_relaxed);
      if (view != nullptr && os_node == view->node_id[view->thread_node[thread]])
        on_node.fetch_add(pc.n, std::memory_order_relaxed);
    }
  });
  plan.first_touch = true;
  plan.touched_bytes = total;
  plan.resident_before_bytes = resident.load();
  plan.checked_bytes = checked.load();
  plan.on_assigned_node_bytes = on_node.load();
  plan.first_touch_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (plan.resident_before_bytes > 0)
    plan.first_touch_note = mib(plan.resident_before_bytes) +
                            " of expert pages were already in the page cache: first touch cannot move them (the "
                            "file is mmap'd; they stay on the node that first read them)";
}

NumaPlacement place_experts_on_nodes(ThreadPool& pool, const MachineInfo& machine, const gguf::ModelFiles& files,
                                     int64_t n_expert) {
  std::vector<ExpertLayerTensors> layers;
  if (machine.numa_nodes.size() >= 2) layers = find_expert_tensors(files, n_expert);
  NumaPlacement p = plan_numa_placement(machine, pool.cpus(), pool.size(), std::move(layers), n_expert);
  if (!p.placed) return p;
  if (!pool.set_numa(p.pool_view())) {
    p.placed = false;
    p.reason = "the pool refused the NUMA view: no placement";
    return p;
  }
  first_touch_experts(pool, p, machine.ram_available);
  return p;
}

void NumaPlacement::describe(json::Value& detail) const {
  detail.set("numa_nodes", machine_nodes);
  if (!placed) {
    detail.set("first_touch", reason);
    return;
  }
  detail.set("numa_placement", "per node, balanced by expert bytes per worker");
  json::Value nodes = json::Value::array();
  json::Value wpn = json::Value::array();
  for (size_t j = 0; j < node_id.size(); ++j) {
    json::Value n = json::Value::object();
    n.set("id", node_id[j]);
    n.set("workers", workers_per_node[j]);
    n.set("experts", static_cast<long long>(node_experts[j]));
    n.set("bytes", static_cast<unsigned long long>(node_bytes[j]));
    nodes.push_back(std::move(n));
    wpn.push_back(workers_per_node[j]);
  }
  detail.set("workers_per_node", std::move(wpn));
  detail.set("nodes", std::move(nodes));
  detail.set("first_touch", first_touch ? "ran" : first_touch_note);
  if (first_touch) {
    detail.set("first_touch_ms", first_touch_ms);
    detail.set("touched_bytes", static_cast<unsigned long long>(touched_bytes));
    detail.set("resident_before_bytes", static_cast<unsigned long long>(resident_before_bytes));
    detail.set("checked_bytes", static_cast<unsigned long long>(checked_bytes));
    detail.set("on_assigned_node_bytes", static_cast<unsigned long long>(on_assigned_node_bytes));
    if (!first_touch_note.empty()) detail.set("first_touch_note", first_touch_note);
  }
}

}  // namespace guild
