// What load stage 1 (device_policy) finds: CPU, cores, NUMA nodes, RAM, GPUs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"

namespace guild {

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;  // usable CPUs on this node
};

struct MachineInfo {
  std::string cpu_brand;
  std::string cpu_features;     // space-separated ISA names
  int logical_usable = 1;
  int physical_usable = 1;
  // Usable CPUs ordered one per physical core first, then their siblings:
  // pinning worker i to worker_cpus[i] spreads workers over cores.
  std::vector<int> worker_cpus;
  std::vector<NumaNode> numa_nodes;
  uint64_t ram_total = 0;
  uint64_t ram_available = 0;
  std::vector<std::string> gpus;  // empty in a CPU-only build or without devices
  std::string gpu_note;           // why there is no GPU, when there is none

  json::Value to_json() const;
};

MachineInfo detect_machine();

}  // namespace guild
