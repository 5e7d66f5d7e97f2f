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
  // pinning worker i to worker_cpus[i] spreads workers over cores. With
  // several NUMA nodes each of the two parts takes the nodes in turn (node
  // 0's first core, node 1's first core, …), so any prefix spreads workers
  // over the nodes as evenly as the cores allow.
  std::vector<int> worker_cpus;
  int worker_primary = 0;  // worker_cpus[0 .. worker_primary) are one per physical core
  // NUMA nodes with usable CPUs, from /sys/devices/system/node/node*/cpulist
  // (no libnuma); one node holding every usable CPU where sysfs has none.
  std::vector<NumaNode> numa_nodes;
  std::string numa_source;  // "sysfs", "assumed (no sysfs node list)", or the testing override
  uint64_t ram_total = 0;
  uint64_t ram_available = 0;
  std::vector<std::string> gpus;  // empty in a CPU-only build or without devices
  std::string gpu_note;           // why there is no GPU, when there is none

  // Index into numa_nodes of the node holding `cpu`, or -1.
  int node_index_of_cpu(int cpu) const;

  json::Value to_json() const;
};

// Memory a new allocation can get now: /proc/meminfo's MemAvailable, capped
// by the room left under this process's cgroup (v2) memory limits.
uint64_t available_memory_bytes();
// What one more large allocation (a session, aligned weight copies) may take:
// available_memory_bytes() less a headroom of max(512 MiB, 10 %) left to the
// rest of the process and the system.
uint64_t memory_for_allocations();

// What this machine has. GUILD_NUMA_FAKE_NODES=N (testing only) splits the
// usable CPUs into N fake nodes (split_numa_nodes_for_testing).
MachineInfo detect_machine();

// Replaces m's nodes by n fake ones over its usable CPUs (contiguous blocks
// in CPU id order, ids 0..n-1; n is capped at the number of CPUs) and
// reorders worker_cpus accordingly. Lets tests and single-node machines run
// the multi-node placement and scheduling paths; memory stays where it is.
void split_numa_nodes_for_testing(MachineInfo& m, int n);

// Sorts worker_cpus' two parts (one per physical core, then siblings) so they
// take the NUMA nodes in turn. Called by detect_machine and the split above.
void interleave_worker_cpus_by_node(MachineInfo& m);

}  // namespace guild
