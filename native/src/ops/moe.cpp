#include "ops/moe.h"

#include <algorithm>
#include <cmath>

namespace guild {

void ExpertRouting::reserve(int max_tokens, int k_, int n_expert_) {
  ids.resize(static_cast<size_t>(max_tokens) * k_);
  weights.resize(static_cast<size_t>(max_tokens) * k_);
  offset.resize(static_cast<size_t>(n_expert_) + 1);
  cursor.resize(static_cast<size_t>(n_expert_));
  slots_by_expert.resize(static_cast<size_t>(max_tokens) * k_);
  // Upper bound on tasks: every expert split into at most 64 row chunks.
  task_expert.reserve(static_cast<size_t>(n_expert_) * 64 + 64);
  task_row.reserve(static_cast<size_t>(n_expert_) * 64 + 64);
}

void route_softmax_topk(const float* logits, int n_tokens, int n_expert, int k, ExpertRouting* r) {
  r->n_tokens = n_tokens;
  r->k = k;
  r->n_expert = n_expert;
  for (int t = 0; t < n_tokens; ++t) {
    const float* l = logits + static_cast<int64_t>(t) * n_expert;
    float max_l = -INFINITY;
    for (int e = 0; e < n_expert; ++e) max_l = std::max(max_l, l[e]);
    // Probabilities are only needed for the selected experts and the
    // normaliser; the softmax denominator cancels in the renormalisation but
    // is kept so the weights equal llama.cpp's to rounding.
    double sum = 0.0;
    for (int e = 0; e < n_expert; ++e) sum += std::exp(l[e] - max_l);
    const float inv_sum = static_cast<float>(1.0 / sum);
    int32_t* ids = r->ids.data() + static_cast<int64_t>(t) * k;
    float* w = r->weights.data() + static_cast<int64_t>(t) * k;
    // Partial selection sort: k is small (2..8).
    for (int j = 0; j < k; ++j) {
      int best = -1;
      for (int e = 0; e < n_expert; ++e) {
        bool taken = false;
        for (int jj = 0; jj < j; ++jj) taken = taken || ids[jj] == e;
        if (taken) continue;
        if (best < 0 || l[e] > l[best]) best = e;
      }
      ids[j] = best;
      w[j] = std::exp(l[best] - max_l) * inv_sum;
    }
    float wsum = 0.0f;
    for (int j = 0; j < k; ++j) wsum += w[j];
    for (int j = 0; j < k; ++j) w[j] /= wsum;
  }
  group_slots_by_expert(r);
}

void group_slots_by_expert(ExpertRouting* r) {
  const int n_slots = r->n_tokens * r->k;
  std::fill(r->offset.begin(), r->offset.end(), 0);
  for (int s = 0; s < n_slots; ++s) ++r->offset[r->ids[s] + 1];
  for (int e = 0; e < r->n_expert; ++e) r->offset[e + 1] += r->offset[e];
  // Stable fill: slots of one expert stay in token order.
  std::copy(r->offset.begin(), r->offset.end() - 1, r->cursor.begin());
  for (int s = 0; s < n_slots; ++s) r->slots_by_expert[r->cursor[r->ids[s]]++] = s;
}

void expert_matmul(ThreadPool& pool, const ExpertMatrices& w, ExpertRouting& r,
                   const uint8_t* const* act_rows, float* y, int64_t y_stride) {
  const int64_t n_out = w.first.n_out;
  const int n_threads = pool.size();
  // Count active experts to size row chunks so all threads get work.
  int n_active = 0;
  for (int e = 0; e < r.n_expert; ++e) n_active += r.offset[e + 1] > r.offset[e];
  if (n_active == 0) return;
  int64_t chunks_per_expert = std::max<int64_t>(1, (n_threads * 4 + n_active - 1) / n_active);
  chunks_per_expert = std::min<int64_t>(chunks_per_expert, 64);
  int64_t chunk = std::max<int64_t>(1, (n_out + chunks_per_expert - 1) / chunks_per_expert);
  r.task_expert.clear();
  r.task_row.clear();
  for (int e = 0; e < r.n_expert; ++e) {
    if (r.offset[e + 1] == r.offset[e]) continue;
    for (int64_t row = 0; row < n_out; row += chunk) {
      r.task_expert.push_back(e);
      r.task_row.push_back(static_cast<int32_t>(row));
    }
  }
  const VecDotFn dot = w.first.kernels->vec_dot;
  pool.parallel_for(static_cast<int64_t>(r.task_expert.size()), [&](int64_t task, int) {
    const int e = r.task_expert[task];
    const QMatrix m = w.expert(e);
    const int64_t r0 = r.task_row[task];
    const int64_t r1 = std::min(n_out, r0 + chunk);
    for (int32_t i = r.offset[e]; i < r.offset[e + 1]; ++i) {
      const int32_t slot = r.slots_by_expert[i];
      const uint8_t* a = act_rows[slot];
      float* out = y + slot * y_stride;
      for (int64_t row = r0; row < r1; ++row) out[row] = dot(m.n_in, m.row(row), a);
    }
  });
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

}  // namespace guild
