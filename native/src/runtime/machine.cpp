#include "runtime/machine.h"

#include <sched.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace guild {
namespace {

std::vector<int> parse_cpu_list(const std::string& text) {
  // "0-3,8,10-11"
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) continue;
    const auto dash = part.find('-');
    try {
      const int a = std::stoi(part.substr(0, dash));
      const int b = dash == std::string::npos ? a : std::stoi(part.substr(dash + 1));
      for (int c = a; c <= b && c - a < 65536; ++c) cpus.push_back(c);
    } catch (...) {
      return {};
    }
  }
  return cpus;
}

uint64_t meminfo_kb(const std::string& key) {
  std::ifstream f("/proc/meminfo");
  std::string k;
  uint64_t v = 0;
  std::string unit;
  while (f >> k >> v >> unit)
    if (k == key + ":") return v;
  return 0;
}

// Room left under the cgroup v2 memory limits of this process (its own
// group and every parent: the tightest wins), or UINT64_MAX without one.
uint64_t cgroup_room_bytes() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, rel;
  while (std::getline(self, line))
    if (line.rfind("0::", 0) == 0) rel = line.substr(3);
  if (rel.empty()) return UINT64_MAX;
  uint64_t room = UINT64_MAX;
  std::filesystem::path dir = std::filesystem::path("/sys/fs/cgroup") / std::filesystem::path(rel).relative_path();
  for (int depth = 0; depth < 64; ++depth) {
    std::ifstream max_f(dir / "memory.max"), cur_f(dir / "memory.current");
    std::string max_text;
    uint64_t current = 0;
    if (max_f >> max_text && max_text != "max" && cur_f >> current) {
      try {
        const uint64_t limit = std::stoull(max_text);
        room = std::min(room, limit > current ? limit - current : 0);
      } catch (...) {
      }
    }
    if (!dir.has_relative_path() || dir == "/sys/fs/cgroup") break;
    dir = dir.parent_path();
  }
  return room;
}

}  // namespace

uint64_t available_memory_bytes() {
  uint64_t avail = meminfo_kb("MemAvailable") * 1024;
  if (avail == 0) {
    struct sysinfo si {};
    if (sysinfo(&si) == 0) avail = (static_cast<uint64_t>(si.freeram) + si.bufferram) * si.mem_unit;
  }
  return std::min(avail, cgroup_room_bytes());
}

uint64_t memory_for_allocations() {
  const uint64_t avail = available_memory_bytes();
  const uint64_t headroom = std::max<uint64_t>(uint64_t{512} << 20, avail / 10);
  return avail > headroom ? avail - headroom : 0;
}

MachineInfo detect_machine() {
  MachineInfo m;
  const CpuFeatures& f = cpu_features();
  m.cpu_brand = f.brand;
  m.logical_usable = f.logical_usable;
  m.physical_usable = f.physical_usable;
  const std::string desc = cpu_features_description();
  const auto semi = desc.rfind(';');
  m.cpu_features = semi == std::string::npos ? desc : desc.substr(semi + 2);

  // The thread's CPUs before a previous load pinned it (stage 6 pins the
  // loading thread as worker 0).
  const std::vector<int> usable = affinity_before_pinning();
  // One CPU per (package, core) first, then hyper-thread siblings.
  std::set<std::pair<int, int>> seen;
  std::vector<int> siblings;
  for (int c : usable) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    std::ifstream core_f(base + "core_id"), pkg_f(base + "physical_package_id");
    int core = c, pkg = 0;
    core_f >> core;
    pkg_f >> pkg;
    if (seen.insert({pkg, core}).second) m.worker_cpus.push_back(c);
    else siblings.push_back(c);
  }
  m.worker_primary = static_cast<int>(m.worker_cpus.size());
  m.worker_cpus.insert(m.worker_cpus.end(), siblings.begin(), siblings.end());

  std::error_code ec;
  const std::set<int> usable_set(usable.begin(), usable.end());
  for (const auto& e : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() <= 4) continue;
    NumaNode node;
    try { node.id = std::stoi(name.substr(4)); } catch (...) { continue; }
    std::ifstream lf(e.path() / "cpulist");
    std::string list;
    std::getline(lf, list);
    for (int c : parse_cpu_list(list))
      if (usable_set.count(c)) node.cpus.push_back(c);
    if (!node.cpus.empty()) m.numa_nodes.push_back(std::move(node));
  }
  std::sort(m.numa_nodes.begin(), m.numa_nodes.end(), [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  m.numa_source = "sysfs";
  if (m.numa_nodes.empty()) {
    m.numa_nodes.push_back({0, usable});
    m.numa_source = "assumed (no sysfs node list)";
  }
  interleave_worker_cpus_by_node(m);
  if (const char* fake = std::getenv("GUILD_NUMA_FAKE_NODES"); fake && *fake) {
    int n = 0;
    try { n = std::stoi(fake); } catch (...) { n = 0; }
    if (n >= 1) split_numa_nodes_for_testing(m, n);
  }

  m.ram_total = meminfo_kb("MemTotal") * 1024;
  m.ram_available = meminfo_kb("MemAvailable") * 1024;
  if (m.ram_total == 0) {
    struct sysinfo si {};
    if (sysinfo(&si) == 0) m.ram_total = static_cast<uint64_t>(si.totalram) * si.mem_unit;
  }
  m.gpu_note = "this build has no CUDA backend";
  return m;
}

int MachineInfo::node_index_of_cpu(int cpu) const {
  for (size_t i = 0; i < numa_nodes.size(); ++i)
    for (int c : numa_nodes[i].cpus)
      if (c == cpu) return static_cast<int>(i);
  return -1;
}

void interleave_worker_cpus_by_node(MachineInfo& m) {
  if (m.numa_nodes.size() < 2) return;
  const int n_nodes = static_cast<int>(m.numa_nodes.size());
  const size_t split = std::min(m.worker_cpus.size(), static_cast<size_t>(std::max(0, m.worker_primary)));
  std::vector<int> out;
  out.reserve(m.worker_cpus.size());
  auto interleave = [&](size_t begin, size_t end) {
    // Buckets by node (CPUs of no node last), each in its existing order.
    std::vector<std::vector<int>> bucket(n_nodes + 1);
    for (size_t i = begin; i < end; ++i) {
      const int node = m.node_index_of_cpu(m.worker_cpus[i]);
      bucket[node < 0 ? n_nodes : node].push_back(m.worker_cpus[i]);
    }
    for (size_t round = 0, taken = 0; taken < end - begin; ++round)
      for (auto& b : bucket)
        if (round < b.size()) {
          out.push_back(b[round]);
          ++taken;
        }
  };
  interleave(0, split);
  interleave(split, m.worker_cpus.size());
  m.worker_cpus = std::move(out);
}

void split_numa_nodes_for_testing(MachineInfo& m, int n) {
  std::vector<int> cpus;
  for (const NumaNode& node : m.numa_nodes) cpus.insert(cpus.end(), node.cpus.begin(), node.cpus.end());
  if (cpus.empty()) cpus = m.worker_cpus;
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  if (cpus.empty()) return;
  n = std::clamp(n, 1, static_cast<int>(cpus.size()));
  m.numa_nodes.clear();
  const size_t per = cpus.size() / n, extra = cpus.size() % n;
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    const size_t take = per + (static_cast<size_t>(i) < extra ? 1 : 0);
    m.numa_nodes.push_back({i, std::vector<int>(cpus.begin() + at, cpus.begin() + at + take)});
    at += take;
  }
  m.numa_source = "fake: " + std::to_string(n) + " nodes for testing (GUILD_NUMA_FAKE_NODES); memory is not really placed";
  interleave_worker_cpus_by_node(m);
}

json::Value MachineInfo::to_json() const {
  json::Value v = json::Value::object();
  v.set("cpu", cpu_brand);
  v.set("cpu_features", cpu_features);
  v.set("logical_cores", logical_usable);
  v.set("physical_cores", physical_usable);
  v.set("numa_nodes", static_cast<long long>(numa_nodes.size()));
  json::Value nodes = json::Value::array();
  for (const NumaNode& n : numa_nodes) {
    json::Value nv = json::Value::object();
    nv.set("id", n.id);
    json::Value c = json::Value::array();
    for (int cpu : n.cpus) c.push_back(cpu);
    nv.set("cpus", std::move(c));
    nodes.push_back(std::move(nv));
  }
  v.set("numa", std::move(nodes));
  v.set("numa_source", numa_source);
  v.set("ram_total_bytes", static_cast<unsigned long long>(ram_total));
  v.set("ram_available_bytes", static_cast<unsigned long long>(ram_available));
  json::Value g = json::Value::array();
  for (const auto& name : gpus) g.push_back(name);
  v.set("gpus", std::move(g));
  if (gpus.empty()) v.set("gpu_note", gpu_note);
  return v;
}

}  // namespace guild
