// ModelExecutionState: the model-scoped settings kernels and buffers read —
// RoPE, KV precision, context size, the shared-layer map. Each GuildModel owns
// one (shared with its sessions), set in load stage 5 before any weight is
// prepared. ScopedModelExecution makes it the calling thread's current state
// for the duration of a load or a generation, so two differently configured
// models in one process never read each other's settings.
#pragma once
#include <memory>
#include <vector>

#include "ops/rope.h"
#include "runtime/kv_cache.h"

namespace guild {

struct ModelExecutionState {
  RopeParams rope;
  KvType kv_type = KvType::F16;
  int n_ctx = 0;                   // default session context
  // kv_source_layer[l]: the layer whose KV cache layer l reads (itself unless
  // the architecture shares KV between layers).
  std::vector<int> kv_source_layer;
  int kv_resident_tokens = 0;      // KV rows kept resident per session (= n_ctx on the CPU)
};

// The state installed on this thread, or null outside any scope.
const ModelExecutionState* current_execution_state();

class ScopedModelExecution {
 public:
  explicit ScopedModelExecution(const ModelExecutionState* state);
  ~ScopedModelExecution();
  ScopedModelExecution(const ScopedModelExecution&) = delete;
  ScopedModelExecution& operator=(const ScopedModelExecution&) = delete;

 private:
  const ModelExecutionState* previous_;
};

}  // namespace guild
