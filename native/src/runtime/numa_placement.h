// NUMA-aware placement of the routed experts (load stage 6).
//
// On a machine with two or more NUMA nodes holding pool workers, every
// layer's routed experts are assigned to nodes, the pages of each expert are
// first touched (madvise(MADV_WILLNEED), then one byte read per page) by a
// worker pinned on its node, so the page cache pages of the mapped file are
// allocated there, and the pool gets a PoolNuma view whose per-layer tables
// let the MoE scheduler (ops/moe.cpp) run an expert's work on its node's
// workers first. With one node nothing happens and the pool has no view.
//
// Assignment rule ("balanced by bytes per worker"): the experts are taken in
// order (layer, expert id); each goes to the node with the fewest assigned
// expert bytes per worker so far (ties: the lower node). All three matrices
// (gate, up, down — every *_exps tensor) of an expert go to the same node.
// With equal workers per node and equal expert sizes this deals each layer's
// experts out round-robin, so every node holds about n_expert / n_nodes of
// every layer.
//
// First touch cannot move pages already in the page cache (another process
// or an earlier run read the file): those stay on the node that read them.
// mincore() counts them before touching (resident_before_bytes), and after
// touching one page per piece is asked for its node (move_pages with no
// target nodes: a query) to report how much landed where it was meant to.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/thread_pool.h"
#include "runtime/machine.h"

namespace guild {
namespace gguf { class ModelFiles; }

// One layer's routed experts as the container stores them: each 3-D tensor
// named blk.<layer>.*_exps* whose last dimension is n_expert.
struct ExpertLayerTensors {
  int layer = -1;
  std::vector<const uint8_t*> data;    // base address of each tensor (in the mapping)
  std::vector<uint64_t> expert_bytes;  // bytes of one expert in each tensor

  uint64_t bytes_per_expert() const;
};

std::vector<ExpertLayerTensors> find_expert_tensors(const gguf::ModelFiles& files, int64_t n_expert);

struct NumaPlacement {
  int machine_nodes = 1;
  bool placed = false;  // experts assigned to nodes and the pool has a view
  std::string reason;   // why not, when not placed
  // Pool nodes: the machine's nodes that hold at least one worker.
  std::vector<int> node_id;           // OS node id
  std::vector<int> node_index;        // index into MachineInfo::numa_nodes
  std::vector<int> workers_per_node;  // counting the caller (thread 0)
  std::vector<int> thread_node;       // [threads] pool node of thread i
  int64_t n_expert = 0;
  std::vector<ExpertLayerTensors> layers;
  std::vector<std::vector<uint8_t>> expert_node;  // [layer][expert] pool node
  std::vector<int64_t> node_experts;              // experts per pool node (all layers)
  std::vector<uint64_t> node_bytes;               // expert bytes per pool node

  // First touch.
  bool first_touch = false;
  std::string first_touch_note;  // why it did not run, or what it could not do
  uint64_t touched_bytes = 0;
  uint64_t resident_before_bytes = 0;    // already in the page cache: not moved
  uint64_t checked_bytes = 0;            // pieces whose node could be asked
  uint64_t on_assigned_node_bytes = 0;   // of those, on the node they were meant for
  double first_touch_ms = 0.0;

  // The pool's view: thread nodes and one table per expert tensor.
  std::shared_ptr<PoolNuma> pool_view() const;
  // Stage 6's detail fields (numa_nodes, first_touch, workers_per_node, …).
  void describe(json::Value& detail) const;
};

// Thread i of a pool runs on thread_cpus[i % size] (thread 0 is the caller,
// pinned to thread_cpus[0] in stage 6); an empty list means unpinned
// workers, which cannot be placed.
NumaPlacement plan_numa_placement(const MachineInfo& machine, const std::vector<int>& thread_cpus, int n_threads,
                                  std::vector<ExpertLayerTensors> layers, int64_t n_expert);

// Touches every expert's pages from a worker of its node (a strict node loop
// on `pool`, whose view must be installed), unless the experts do not fit in
// ram_available (then nothing is touched and the note says so).
void first_touch_experts(ThreadPool& pool, NumaPlacement& plan, uint64_t ram_available);

// Stage 6 after the pool exists: plan, install the pool's view, first touch.
NumaPlacement place_experts_on_nodes(ThreadPool& pool, const MachineInfo& machine, const gguf::ModelFiles& files,
                                     int64_t n_expert);

}  // namespace guild
