#include "runtime/machine.h"

#include <sched.h>
#include <sys/sysinfo.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/cpu_features.h"

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

}  // namespace

MachineInfo detect_machine() {
  MachineInfo m;
  const CpuFeatures& f = cpu_features();
  m.cpu_brand = f.brand;
  m.logical_usable = f.logical_usable;
  m.physical_usable = f.physical_usable;
  const std::string desc = cpu_features_description();
  const auto semi = desc.rfind(';');
  m.cpu_features = semi == std::string::npos ? desc : desc.substr(semi + 2);

  cpu_set_t set;
  std::vector<int> usable;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) usable.push_back(c);
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
  if (m.numa_nodes.empty()) m.numa_nodes.push_back({0, usable});

  m.ram_total = meminfo_kb("MemTotal") * 1024;
  m.ram_available = meminfo_kb("MemAvailable") * 1024;
  if (m.ram_total == 0) {
    struct sysinfo si {};
    if (sysinfo(&si) == 0) m.ram_total = static_cast<uint64_t>(si.totalram) * si.mem_unit;
  }
  m.gpu_note = "this build has no CUDA backend";
  return m;
}

json::Value MachineInfo::to_json() const {
  json::Value v = json::Value::object();
  v.set("cpu", cpu_brand);
  v.set("cpu_features", cpu_features);
  v.set("logical_cores", logical_usable);
  v.set("physical_cores", physical_usable);
  v.set("numa_nodes", static_cast<long long>(numa_nodes.size()));
  v.set("ram_total_bytes", static_cast<unsigned long long>(ram_total));
  v.set("ram_available_bytes", static_cast<unsigned long long>(ram_available));
  json::Value g = json::Value::array();
  for (const auto& name : gpus) g.push_back(name);
  v.set("gpus", std::move(g));
  if (gpus.empty()) v.set("gpu_note", gpu_note);
  return v;
}

}  // namespace guild
