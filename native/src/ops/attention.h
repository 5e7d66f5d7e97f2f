// Causal grouped-query attention of a batch of query tokens against the KV
// cache of one layer. Query token i sits at position pos0 + i and attends to
// positions [window_start(i), pos0 + i].
#pragma once
#include <cstdint>

#include "core/kernel_table.h"
#include "core/thread_pool.h"
#include "runtime/kv_cache.h"

namespace guild {

struct AttentionShape {
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;
  float scale = 1.0f;      // multiplies q·k
  int sliding_window = 0;  // 0 = full causal attention
  // Per query head, a learned logit in every softmax's denominator (gpt-oss
  // "attention sinks"; unscaled): weights exp(s_j) / (Σ exp(s_i) + exp(sink)).
  const float* sinks = nullptr;
};

// Query rows (token x head of one KV group) handled by one attention task.
inline constexpr int kAttnTileRows = 16;

// q: [n_tokens][n_head * head_dim_k]; out: [n_tokens][n_head * head_dim_v].
// scores: per-thread scratch of pool.size() × tile_rows × kv.n_ctx() floats.
// Tasks are (KV head, block of tokens): the KV group's query heads of up to
// tile_rows / group tokens go through the kernels together, so each cached K
// and V row is converted once per task rather than once per query row. Each
// query row's result is the same whatever the tiling (batch == one token at a
// time, bit for bit).
void attention(ThreadPool& pool, const CpuKernelTable& k, const AttentionShape& s, const KvCache& kv, int layer,
               const float* q, int n_tokens, int pos0, float* out, float* scores, int tile_rows);

// The same with the CPU's best built-in table and one query row per task
// (scores: pool.size() × kv.n_ctx() floats), for kernel tests that link the
// tables (guild_kernels). The runtime has no table of its own (its kernels
// come from packages): runtime code calling this would not link.
inline void attention(ThreadPool& pool, const AttentionShape& s, const KvCache& kv, int layer, const float* q,
                      int n_tokens, int pos0, float* out, float* scores) {
  attention(pool, cpu_kernels_best(), s, kv, layer, q, n_tokens, pos0, out, scores, 1);
}

}  // namespace guild
