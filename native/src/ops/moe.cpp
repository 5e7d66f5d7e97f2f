#include "ops/moe.h"

#include <algorithm>
#include <cmath>

#include "ops/matmul.h"

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
  active.reserve(static_cast<size_t>(n_expert_));
}

void route_softmax_topk(const float* logits, int n_tokens, int n_expert, int k, ExpertRouting* r) {
  r->n_tokens = n_tokens;
  r->k = k;
  r->n_expert = n_expert;
  route_softmax_topk_rows(logits, 0, n_tokens, r);
  group_slots_by_expert(r);
}

void route_softmax_topk_rows(const float* logits, int t0, int t1, ExpertRouting* r) {
  const int n_expert = r->n_expert, k = r->k;
  for (int t = t0; t < t1; ++t) {
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
}

void route_topk_softmax_rows(const float* logits, int t0, int t1, ExpertRouting* r) {
  const int n_expert = r->n_expert, k = r->k;
  for (int t = t0; t < t1; ++t) {
    const float* l = logits + static_cast<int64_t>(t) * n_expert;
    int32_t* ids = r->ids.data() + static_cast<int64_t>(t) * k;
    float* w = r->weights.data() + static_cast<int64_t>(t) * k;
    for (int j = 0; j < k; ++j) {  // partial selection sort, k is small
      int best = -1;
      for (int e = 0; e < n_expert; ++e) {
        bool taken = false;
        for (int jj = 0; jj < j; ++jj) taken = taken || ids[jj] == e;
        if (!taken && (best < 0 || l[e] > l[best])) best = e;
      }
      ids[j] = best;
    }
    // ids[0] holds the largest logit: the softmax's maximum.
    const float max_l = l[ids[0]];
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += (w[j] = std::exp(l[ids[j]] - max_l));
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int j = 0; j < k; ++j) w[j] *= inv_sum;
  }
}

void route_sigmoid_topk_rows(const float* logits, const float* bias, bool renorm, float scale, int t0, int t1,
                             ExpertRouting* r) {
  const int n_expert = r->n_expert, k = r->k;
  for (int t = t0; t < t1; ++t) {
    const float* l = logits + static_cast<int64_t>(t) * n_expert;
    int32_t* ids = r->ids.data() + static_cast<int64_t>(t) * k;
    float* w = r->weights.data() + static_cast<int64_t>(t) * k;
    auto prob = [&](int e) { return 1.0f / (1.0f + std::exp(-l[e])); };
    auto choice = [&](int e) { return bias ? prob(e) + bias[e] : prob(e); };
    for (int j = 0; j < k; ++j) {  // partial selection sort, k is small
      int best = -1;
      float best_v = 0.0f;
      for (int e = 0; e < n_expert; ++e) {
        bool taken = false;
        for (int jj = 0; jj < j; ++jj) taken = taken || ids[jj] == e;
        if (taken) continue;
        const float v = choice(e);
        if (best < 0 || v > best_v) { best = e; best_v = v; }
      }
      ids[j] = best;
      w[j] = prob(best);
    }
    if (renorm) {
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) sum += w[j];
      for (int j = 0; j < k; ++j) w[j] /= sum;
    }
    if (scale != 1.0f)
      for (int j = 0; j < k; ++j) w[j] *= scale;
  }
}

int group_slots_by_expert(ExpertRouting* r, const int32_t* cached) {
  const int n_slots = r->n_tokens * r->k;
  // A negative id: the choice is computed elsewhere (the GPU took it).
  auto kept = [&](int s) { return r->ids[s] >= 0 && (cached == nullptr || cached[r->ids[s]] < 0); };
  std::fill(r->offset.begin(), r->offset.end(), 0);
  int n_kept = 0;
  for (int s = 0; s < n_slots; ++s)
    if (kept(s)) {
      ++r->offset[r->ids[s] + 1];
      ++n_kept;
    }
  for (int e = 0; e < r->n_expert; ++e) r->offset[e + 1] += r->offset[e];
  // Stable fill: slots of one expert stay in token order.
  std::copy(r->offset.begin(), r->offset.end() - 1, r->cursor.begin());
  for (int s = 0; s < n_slots; ++s)
    if (kept(s)) r->slots_by_expert[r->cursor[r->ids[s]]++] = s;
  return n_kept;
}

namespace {

constexpr int kSlotBlock = 64;  // slots per gemm call (pointer arrays on the stack)

// Rows [r0, r1) of expert e's matrix m for every slot routed to e:
// y[slot * y_stride + row] = dot(row, act_rows[slot]).
void expert_rows(const QMatrix& m, const ExpertRouting& r, int e, int64_t r0, int64_t r1,
                 const uint8_t* const* act_rows, float* y, int64_t y_stride) {
  const uint8_t* act[kSlotBlock];
  float* out[kSlotBlock];
  for (int32_t i0 = r.offset[e]; i0 < r.offset[e + 1]; i0 += kSlotBlock) {
    const int nb = std::min<int32_t>(kSlotBlock, r.offset[e + 1] - i0);
    for (int i = 0; i < nb; ++i) {
      const int32_t slot = r.slots_by_expert[i0 + i];
      act[i] = act_rows[slot];
      out[i] = y + slot * y_stride + r0;
    }
    gemm_rows(m, r0, r1, act, out, nb);
  }
}

// (expert, first row) tasks covering every active expert of n_out rows in
// chunks of `chunk` rows; returns the chunk.
int64_t row_chunk(const ExpertRouting& r, int64_t n_out, int n_threads, int n_mats) {
  int n_active = 0;
  for (int e = 0; e < r.n_expert; ++e) n_active += r.offset[e + 1] > r.offset[e];
  int64_t chunks_per_expert = std::max<int64_t>(1, (n_threads * 4 + n_active * n_mats - 1) / (n_active * n_mats));
  chunks_per_expert = std::min<int64_t>(chunks_per_expert, 64);
  int64_t chunk = std::max<int64_t>(1, (n_out + chunks_per_expert - 1) / chunks_per_expert);
  return std::min(n_out, (chunk + 3) & ~int64_t{3});
}

int64_t build_row_tasks(ExpertRouting& r, int64_t n_out, int n_threads, int n_mats) {
  const int64_t chunk = row_chunk(r, n_out, n_threads, n_mats);
  r.task_expert.clear();
  r.task_row.clear();
  for (int e = 0; e < r.n_expert; ++e) {
    if (r.offset[e + 1] == r.offset[e]) continue;
    for (int64_t row = 0; row < n_out; row += chunk) {
      r.task_expert.push_back(e);
      r.task_row.push_back(static_cast<int32_t>(row));
    }
  }
  return chunk;
}

// The node table of the placed experts whose tensor starts at `key` (load
// stage 6 on a machine with several NUMA nodes), or null: one branch per
// layer where the pool has no NUMA view.
const uint8_t* expert_nodes(const ThreadPool& pool, const void* key, int n_expert) {
  const PoolNuma* numa = pool.numa();
  if (numa == nullptr) return nullptr;
  const PoolNuma::Table* t = numa->find(key);
  return t != nullptr && static_cast<int>(t->node.size()) == n_expert ? t->node.data() : nullptr;
}

// The tasks build_row_tasks makes (same chunk, same (expert, row) pairs),
// ordered by the node holding each expert, node 0 first; node_begin[j] =
// first task of node j. Filled by position: no allocation beyond
// build_row_tasks' own bound.
int64_t build_row_tasks_by_node(ExpertRouting& r, int64_t n_out, int n_threads, int n_mats, const uint8_t* node_of,
                                int n_nodes, int64_t* node_begin) {
  const int64_t chunk = row_chunk(r, n_out, n_threads, n_mats);
  const int64_t per_expert = (n_out + chunk - 1) / chunk;
  int64_t at[PoolNuma::kMaxNodes] = {};
  for (int e = 0; e < r.n_expert; ++e)
    if (r.offset[e + 1] > r.offset[e]) at[node_of[e]] += per_expert;
  node_begin[0] = 0;
  for (int j = 0; j < n_nodes; ++j) {
    node_begin[j + 1] = node_begin[j] + at[j];
    at[j] = node_begin[j];
  }
  r.task_expert.resize(static_cast<size_t>(node_begin[n_nodes]));
  r.task_row.resize(static_cast<size_t>(node_begin[n_nodes]));
  for (int e = 0; e < r.n_expert; ++e) {
    if (r.offset[e + 1] == r.offset[e]) continue;
    int64_t& pos = at[node_of[e]];
    for (int64_t row = 0; row < n_out; row += chunk, ++pos) {
      r.task_expert[pos] = e;
      r.task_row[pos] = static_cast<int32_t>(row);
    }
  }
  return chunk;
}

void expert_matmul_nodes(ThreadPool& pool, const ExpertMatrices& w, ExpertRouting& r, const uint8_t* node_of,
                         const uint8_t* const* act_rows, float* y, int64_t y_stride) {
  const int64_t n_out = w.first.n_out;
  int64_t node_begin[PoolNuma::kMaxNodes + 1];
  const int64_t chunk = build_row_tasks_by_node(r, n_out, pool.size(), 1, node_of, pool.numa()->n_nodes, node_begin);
  pool.parallel_for_nodes(node_begin, false, [&](int64_t task, int) {
    const int e = r.task_expert[task];
    const int64_t r0 = r.task_row[task];
    expert_rows(w.expert(e), r, e, r0, std::min(n_out, r0 + chunk), act_rows, y, y_stride);
  });
}

}  // namespace

void expert_matmul(ThreadPool& pool, const ExpertMatrices& w, ExpertRouting& r,
                   const uint8_t* const* act_rows, float* y, int64_t y_stride) {
  const int64_t n_out = w.first.n_out;
  int n_active = 0;
  for (int e = 0; e < r.n_expert; ++e) n_active += r.offset[e + 1] > r.offset[e];
  if (n_active == 0) return;
  if (const uint8_t* node_of = expert_nodes(pool, w.first.data, r.n_expert)) {
    expert_matmul_nodes(pool, w, r, node_of, act_rows, y, y_stride);
    return;
  }
  const int64_t chunk = build_row_tasks(r, n_out, pool.size(), 1);
  pool.parallel_for(static_cast<int64_t>(r.task_expert.size()), [&](int64_t task, int) {
    const int e = r.task_expert[task];
    const int64_t r0 = r.task_row[task];
    expert_rows(w.expert(e), r, e, r0, std::min(n_out, r0 + chunk), act_rows, y, y_stride);
  });
}

void moe_ffn(ThreadPool& pool, const CpuKernelTable& k, const ExpertMatrices& gate, const ExpertMatrices& up,
             const ExpertMatrices& down, ExpertRouting& r, const uint8_t* const* x_rows, const MoeBuffers& buf, float* y,
             int64_t y_stride, const ExpertHidden& hid) {
  const int64_t n_ff = gate.first.n_out;
  const int64_t n_embd = down.first.n_out;
  const int n_slots = r.n_tokens * r.k;
  const uint8_t** slot_rows = buf.slot_rows;
  for (int slot = 0; slot < n_slots; ++slot) slot_rows[slot] = x_rows[slot / r.k];
  const QuantizeRowFn quantize = k.quantize_act[static_cast<uint32_t>(down.first.kernels->vec_dot_type)];
  const size_t down_act_bytes = act_row_bytes(down.first);
  auto hidden = [&](int32_t slot) {  // biases, the gated unit, then the down projection's activation row
    float* g = buf.gate + static_cast<int64_t>(slot) * n_ff;
    float* u = buf.up + static_cast<int64_t>(slot) * n_ff;
    const int64_t e = r.ids[slot];
    if (const float* bg = hid.gate_bias) for (int64_t i = 0; i < n_ff; ++i) g[i] += bg[e * n_ff + i];
    if (const float* bu = hid.up_bias) for (int64_t i = 0; i < n_ff; ++i) u[i] += bu[e * n_ff + i];
    glu(k, hid.glu, n_ff, g, u, g);
    quantize(g, buf.act_down + slot * down_act_bytes, n_ff);
  };

  r.active.clear();
  for (int e = 0; e < r.n_expert; ++e)
    if (r.offset[e + 1] > r.offset[e]) r.active.push_back(e);
  const int n_active = static_cast<int>(r.active.size());
  if (n_active == 0) return;
  // Experts placed per NUMA node (load stage 6): each node's threads take
  // that node's experts first. The tasks are the same as without placement
  // (same experts, same row chunks), only their order and threads differ, so
  // the outputs are bit-identical.
  const uint8_t* node_of = expert_nodes(pool, gate.first.data, r.n_expert);
  const int n_nodes = node_of ? pool.numa()->n_nodes : 0;
  int64_t node_begin[PoolNuma::kMaxNodes + 1];

  if (n_active >= 2 * pool.size()) {
    // One task per expert, largest first so the tail of the loop is short
    // (with placement: by node, then largest first).
    // (Insertion sort, stable: no allocation, and at most a few hundred experts.)
    auto count = [&](int32_t e) { return r.offset[e + 1] - r.offset[e]; };
    if (node_of == nullptr) {
      for (int i = 1; i < n_active; ++i) {
        const int32_t e = r.active[i];
        int j = i;
        for (; j > 0 && count(r.active[j - 1]) < count(e); --j) r.active[j] = r.active[j - 1];
        r.active[j] = e;
      }
    } else {
      auto before = [&](int32_t a, int32_t b) {
        return node_of[a] != node_of[b] ? node_of[a] < node_of[b] : count(a) > count(b);
      };
      for (int i = 1; i < n_active; ++i) {
        const int32_t e = r.active[i];
        int j = i;
        for (; j > 0 && before(e, r.active[j - 1]); --j) r.active[j] = r.active[j - 1];
        r.active[j] = e;
      }
      int64_t cnt[PoolNuma::kMaxNodes] = {};
      for (int i = 0; i < n_active; ++i) ++cnt[node_of[r.active[i]]];
      node_begin[0] = 0;
      for (int j = 0; j < n_nodes; ++j) node_begin[j + 1] = node_begin[j] + cnt[j];
    }
    auto expert_task = [&](int64_t task, int) {
      const int e = r.active[task];
      expert_rows(gate.expert(e), r, e, 0, n_ff, slot_rows, buf.gate, n_ff);
      expert_rows(up.expert(e), r, e, 0, n_ff, slot_rows, buf.up, n_ff);
      const uint8_t* act[kSlotBlock];
      float* out[kSlotBlock];
      const QMatrix dm = down.expert(e);
      for (int32_t i0 = r.offset[e]; i0 < r.offset[e + 1]; i0 += kSlotBlock) {
        const int nb = std::min<int32_t>(kSlotBlock, r.offset[e + 1] - i0);
        for (int i = 0; i < nb; ++i) {
          const int32_t slot = r.slots_by_expert[i0 + i];
          hidden(slot);
          act[i] = buf.act_down + slot * down_act_bytes;
          out[i] = y + slot * y_stride;
        }
        gemm_rows(dm, 0, n_embd, act, out, nb);
      }
    };
    if (node_of == nullptr) pool.parallel_for(n_active, expert_task);
    else pool.parallel_for_nodes(node_begin, false, expert_task);
    return;
  }

  // Few experts for many threads: row chunks. Gate and up in one loop.
  if (node_of == nullptr) {
    const int64_t chunk = build_row_tasks(r, n_ff, pool.size(), 2);
    const int64_t n_gu = static_cast<int64_t>(r.task_expert.size());
    pool.parallel_for(2 * n_gu, [&](int64_t task, int) {
      const bool is_up = task >= n_gu;
      const int64_t t = is_up ? task - n_gu : task;
      const int e = r.task_expert[t];
      const int64_t r0 = r.task_row[t];
      const ExpertMatrices& m = is_up ? up : gate;
      expert_rows(m.expert(e), r, e, r0, std::min(n_ff, r0 + chunk), slot_rows, is_up ? buf.up : buf.gate, n_ff);
    });
  } else {
    // Row tasks grouped by node; task 2t is row task t's gate, 2t+1 its up.
    const int64_t chunk = build_row_tasks_by_node(r, n_ff, pool.size(), 2, node_of, n_nodes, node_begin);
    for (int j = 0; j <= n_nodes; ++j) node_begin[j] *= 2;
    pool.parallel_for_nodes(node_begin, false, [&](int64_t task, int) {
      const bool is_up = (task & 1) != 0;
      const int64_t t = task >> 1;
      const int e = r.task_expert[t];
      const int64_t r0 = r.task_row[t];
      const ExpertMatrices& m = is_up ? up : gate;
      expert_rows(m.expert(e), r, e, r0, std::min(n_ff, r0 + chunk), slot_rows, is_up ? buf.up : buf.gate, n_ff);
    });
  }
  // SwiGLU of the routed slots only (with a mask, slots of experts computed
  // elsewhere are not), spread over the pool: done serially over every slot
  // this was the largest single cost of a 512-token step.
  constexpr int64_t kHiddenBlock = 32;
  const int64_t n_routed = r.offset[r.n_expert];
  pool.parallel_for((n_routed + kHiddenBlock - 1) / kHiddenBlock, [&](int64_t b, int) {
    const int64_t end = std::min(n_routed, (b + 1) * kHiddenBlock);
    for (int64_t i = b * kHiddenBlock; i < end; ++i) {
      const int32_t slot = r.slots_by_expert[i];
      hidden(slot);
      slot_rows[slot] = buf.act_down + slot * down_act_bytes;
    }
  });
  if (node_of == nullptr) expert_matmul(pool, down, r, slot_rows, y, y_stride);
  else expert_matmul_nodes(pool, down, r, node_of, slot_rows, y, y_stride);
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

}  // namespace guild
