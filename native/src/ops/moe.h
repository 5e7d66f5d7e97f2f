// Mixture-of-experts pieces: router gating (which experts each token uses and
// with what weight) and the grouped expert products, where each selected
// expert's weights are read once for all the tokens routed to it.
#pragma once
#include <cstdint>
#include <vector>

#include "core/kernel_table.h"
#include "core/thread_pool.h"
#include "models/weights.h"
#include "ops/glu.h"

namespace guild {

// Routing of one batch: token t's j-th choice is expert ids[t*k + j] with
// weight weights[t*k + j]; slot t*k + j names that (token, choice) pair.
struct ExpertRouting {
  int n_tokens = 0;
  int k = 0;
  int n_expert = 0;
  std::vector<int32_t> ids;       // [n_tokens * k], descending by gate probability
  std::vector<float> weights;     // [n_tokens * k]
  // Slots grouped by expert: slots_by_expert[offset[e] .. offset[e+1]).
  std::vector<int32_t> offset;    // [n_expert + 1]
  std::vector<int32_t> slots_by_expert;
  std::vector<int32_t> cursor;    // [n_expert] scratch for the grouping
  // Work list for the grouped product: (expert, first row) pairs.
  std::vector<int32_t> task_expert;
  std::vector<int32_t> task_row;
  // Active experts, most tokens first (moe_ffn's per-expert tasks).
  std::vector<int32_t> active;

  void reserve(int max_tokens, int k, int n_expert);
};

// softmax over all experts, top-k (ties go to the lower id), weights renormalised.
void route_softmax_topk(const float* logits, int n_tokens, int n_expert, int k, ExpertRouting* r);
// The same for tokens [t0, t1) only (after r->n_tokens/k/n_expert are set),
// without the grouping: callers split a batch across threads, then call
// group_slots_by_expert once.
void route_softmax_topk_rows(const float* logits, int t0, int t1, ExpertRouting* r);

// top-k of the logits (ties go to the lower id), softmax over those k
// (gpt-oss); tokens [t0, t1) as route_softmax_topk_rows.
void route_topk_softmax_rows(const float* logits, int t0, int t1, ExpertRouting* r);

// Sigmoid gating (glm4moe, deepseek-v3): p_e = sigmoid(logit_e); the k experts
// with the largest p_e + bias[e] (bias may be null; ties to the lower id);
// weights the unbiased p of those k, divided by their sum when renorm, times
// scale. Tokens [t0, t1) as route_softmax_topk_rows.
void route_sigmoid_topk_rows(const float* logits, const float* bias, bool renorm, float scale, int t0, int t1,
                             ExpertRouting* r);

// Groups slots by expert; call after the ids are set. With `cached`
// ([n_expert]; hybrid MoE), slots whose expert has cached[e] >= 0 (the GPU
// computes it) are left out of every group, and so are slots with a negative
// id (a choice the GPU took from the CPU's share). Returns the slots grouped.
int group_slots_by_expert(ExpertRouting* r, const int32_t* cached = nullptr);

// y[slot][row] = dot(W_e row, act_rows[slot]) for every slot routed to expert e.
// act_rows: one prepared activation row per slot (in W's vec_dot_type).
void expert_matmul(ThreadPool& pool, const ExpertMatrices& w, ExpertRouting& r,
                   const uint8_t* const* act_rows, float* y, int64_t y_stride);

// Buffers for moe_ffn, sized for the largest batch (n_slots = tokens * k).
struct MoeBuffers {
  float* gate = nullptr;         // [n_slots][n_ff]
  float* up = nullptr;           // [n_slots][n_ff]
  uint8_t* act_down = nullptr;   // [n_slots][act_row_bytes(down)]
  const uint8_t** slot_rows = nullptr;  // [n_slots]
};

// The experts' gated unit and the optional gate/up biases ([n_expert][n_ff]).
struct ExpertHidden {
  GluParams glu;
  const float* gate_bias = nullptr;
  const float* up_bias = nullptr;
};

// The routed experts of one layer, for every slot s = (token t, choice j)
// routed to expert e:  h = glu(gate_e . x_t + bg_e, up_e . x_t + bu_e),
// y[s] = down_e . h (no down bias: the caller adds it where it combines).
// x_rows[t]: token t's input already in gate/up's vec_dot_type. y rows have
// y_stride floats. With enough active experts every expert is one task (its
// gate, up, SwiGLU, activation quantization and down in one go: one pool
// round trip, each expert's weights read once while hot); otherwise gate+up
// and down are two loops over row chunks of all active experts.
// Where load stage 6 placed the experts on NUMA nodes (the pool has a
// PoolNuma view with a table for gate's tensor), the same tasks are grouped
// by node and each node's threads take their own node's first
// (ThreadPool::parallel_for_nodes): same results, bit for bit. expert_matmul
// does the same with w's table.
void moe_ffn(ThreadPool& pool, const CpuKernelTable& k, const ExpertMatrices& gate, const ExpertMatrices& up,
             const ExpertMatrices& down, ExpertRouting& r, const uint8_t* const* x_rows, const MoeBuffers& buf, float* y,
             int64_t y_stride, const ExpertHidden& hidden = {});

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, int64_t n, float* out);

}  // namespace guild
