// What one session of a model will allocate, computed before anything is:
// the KV cache for its context, the decoder scratch (incl. the per-thread
// attention scores), the logits rows and the token history. Load stage 13
// records it for the default context and refuses a model whose default
// session cannot fit; GuildSession::create refuses any context that cannot
// (docs/EXECUTION_LIFECYCLE.md §2). Hyper-parameters are bounded at load
// (models/hparam_limits.h), so none of these products can overflow.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "core/json.h"
#include "models/hparams.h"
#include "runtime/kv_cache.h"

namespace guild {

struct SessionMemory {
  int n_ctx = 0;
  int max_tokens = 0;       // rows of one forward pass (prefill batch or window)
  uint64_t kv = 0;          // KV cache (0 on the GPU: one device cache per model)
  uint64_t scratch = 0;     // decoder buffers shared by the threads
  uint64_t per_thread = 0;  // attention score rows, one slice per pool thread (all threads)
  uint64_t logits = 0;      // last row + the speculative window's rows
  uint64_t history = 0;     // the token history
  uint64_t drafter = 0;     // the MTP drafter: its block's KV + h rows (models with a nextn block, CPU)
  uint64_t total() const { return kv + scratch + per_thread + logits + history + drafter; }

  json::Value to_json() const;
  // "KV 8 MiB + scratch 3 MiB + per-thread 1 MiB + logits 170 KiB + history 16 KiB = 12 MiB"
  std::string summary() const;
};

// The prefill batch (tokens per forward pass) of a session of n_ctx tokens
// (max_batch > 0: at most that).
int session_max_batch(int n_ctx, int max_batch = 0);
// Rows the session's scratch holds: the batch, or a speculative window.
int session_scratch_tokens(int n_ctx, int max_batch = 0);

// on_gpu: the KV cache and the activations live on the device, not here.
// Positions before the end a sliding-window layer keeps beyond its window
// and a pass: how far a rollback or a reused prefix may cut back without
// the prompt being run again (runtime/kv_cache.h).
inline constexpr int kSlidingHistory = 2048;

// How a session is laid out beyond its context: the layers' sliding windows
// (0 or absent: full attention; such a layer's KV holds
// KvCache::sliding_rows rows), and, for tests, a smaller prefill batch and
// sliding history than the defaults.
struct SessionShape {
  std::span<const int> windows;
  int max_batch = 0;  // 0: session_max_batch(n_ctx)
  int sliding_history = kSlidingHistory;
};

SessionMemory estimate_session_memory(const ModelHparams& hp, int n_ctx, int n_threads, KvType kv_type, bool on_gpu,
                                      const SessionShape& shape = {});

// False with a one-line message when `need` exceeds `limit` bytes (what may
// still be allocated: runtime/machine.h memory_for_allocations()).
bool session_memory_fits(const SessionMemory& need, uint64_t limit, std::string* error);

// "12 MiB", "3.5 GiB", "512 B".
std::string byte_size_text(uint64_t bytes);

}  // namespace guild
