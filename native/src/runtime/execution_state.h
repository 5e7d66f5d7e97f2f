// ModelExecutionState: the model-scoped settings kernels and buffers read —
// RoPE, KV precision, context size, the shared-layer map. Each GuildModel owns
// one (shared with its sessions), set in load stage 5 before any weight is
// prepared. It is passed explicitly (sessions hold it; kernels get what they
// need as arguments): no thread-local "current model", so two differently
// configured models in one process never read each other's settings.
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

}  // namespace guild
