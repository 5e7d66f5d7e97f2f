// Mixture-of-experts pieces: router gating (which experts each token uses and
// with what weight) and the grouped expert products, where each selected
// expert's weights are read once for all the tokens routed to it.
#pragma once
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "models/weights.h"

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

  void reserve(int max_tokens, int k, int n_expert);
};

// softmax over all experts, top-k (ties go to the lower id), weights renormalised.
void route_softmax_topk(const float* logits, int n_tokens, int n_expert, int k, ExpertRouting* r);

// Groups slots by expert; call after the ids are set.
void group_slots_by_expert(ExpertRouting* r);

// y[slot][row] = dot(W_e row, act_rows[slot]) for every slot routed to expert e.
// act_rows: one prepared activation row per slot (in W's vec_dot_type).
void expert_matmul(ThreadPool& pool, const ExpertMatrices& w, ExpertRouting& r,
                   const uint8_t* const* act_rows, float* y, int64_t y_stride);

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, int64_t n, float* out);

}  // namespace guild
