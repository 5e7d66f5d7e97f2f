#include "ops/attention.h"

#include <algorithm>
#include <cmath>

namespace guild {

namespace {

// 1 / the softmax denominator of n scores (replaced by exp(s - max)), with
// the head's sink logit in it when there is one.
float softmax_inv(const CpuKernelTable& k, const float* sinks, int head, int64_t n, float* s) {
  if (sinks == nullptr) return 1.0f / k.softmax_exp(n, s);
  // softmax_exp subtracts the row maximum: the sink's term needs the same one.
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) m = std::max(m, s[j]);
  const float sum = k.softmax_exp(n, s);
  return 1.0f / (sum + std::exp(sinks[head] - m));
}

// One query row per task (scores: rows_per_thread × n_ctx floats per thread,
// only the first row used).
void attention_rows(ThreadPool& pool, const CpuKernelTable& k, const AttentionShape& s, const KvCache& kv, int layer,
                    const float* q, int n_tokens, int pos0, float* out, float* scores, int rows_per_thread) {
  const int group = s.n_head / s.n_head_kv;
  const int64_t q_stride = static_cast<int64_t>(s.n_head) * s.head_dim_k;
  const int64_t o_stride = static_cast<int64_t>(s.n_head) * s.head_dim_v;
  const int64_t n_ctx = kv.n_ctx();
  const bool f16 = kv.type() == KvType::F16;
  pool.parallel_for(static_cast<int64_t>(n_tokens) * s.n_head, [&](int64_t task, int thread) {
    const int i = static_cast<int>(task / s.n_head);
    const int h = static_cast<int>(task % s.n_head);
    const int hk = h / group;
    const int pos = pos0 + i;
    const int first = s.sliding_window > 0 ? std::max(0, pos - s.sliding_window + 1) : 0;
    const int n_keys = pos - first + 1;
    const float* qr[1] = {q + i * q_stride + static_cast<int64_t>(h) * s.head_dim_k};
    float* o = out + i * o_stride + static_cast<int64_t>(h) * s.head_dim_v;
    float* orow[1] = {o};
    float* sr[1] = {scores + static_cast<int64_t>(thread) * rows_per_thread * n_ctx};
    if (f16)
      k.attn_scores_f16(n_keys, s.head_dim_k, static_cast<const uint16_t*>(kv.k_row(layer, first)) + hk * s.head_dim_k,
                        kv.k_dim(), qr, 1, s.scale, sr);
    else
      k.attn_scores_f32(n_keys, s.head_dim_k, static_cast<const float*>(kv.k_row(layer, first)) + hk * s.head_dim_k,
                        kv.k_dim(), qr, 1, s.scale, sr);
    const float inv = softmax_inv(k, s.sinks, h, n_keys, sr[0]);
    if (f16)
      k.attn_pv_f16(n_keys, s.head_dim_v, static_cast<const uint16_t*>(kv.v_row(layer, first)) + hk * s.head_dim_v,
                    kv.v_dim(), sr, 1, orow);
    else
      k.attn_pv_f32(n_keys, s.head_dim_v, static_cast<const float*>(kv.v_row(layer, first)) + hk * s.head_dim_v,
                    kv.v_dim(), sr, 1, orow);
    for (int d = 0; d < s.head_dim_v; ++d) o[d] *= inv;
  });
}

}  // namespace

void attention(ThreadPool& pool, const CpuKernelTable& k, const AttentionShape& s, const KvCache& kv, int layer,
               const float* q, int n_tokens, int pos0, float* out, float* scores, int tile_rows) {
  const int group = s.n_head / s.n_head_kv;
  if (group > tile_rows || group > kAttnTileRows) {
    attention_rows(pool, k, s, kv, layer, q, n_tokens, pos0, out, scores, std::max(1, tile_rows));
    return;
  }
  const int64_t q_stride = static_cast<int64_t>(s.n_head) * s.head_dim_k;
  const int64_t o_stride = static_cast<int64_t>(s.n_head) * s.head_dim_v;
  const int64_t k_stride = kv.k_dim();
  const int64_t v_stride = kv.v_dim();
  // Tokens per task: whole KV groups of query heads, at most tile_rows rows.
  int tokens_per_task = std::min(tile_rows, kAttnTileRows) / group;
  // Keep every thread busy on short batches.
  const int64_t min_tasks = static_cast<int64_t>(pool.size()) * 2;
  while (tokens_per_task > 1 &&
         static_cast<int64_t>(s.n_head_kv) * ((n_tokens + tokens_per_task - 1) / tokens_per_task) < min_tasks)
    tokens_per_task /= 2;
  const int n_blocks = (n_tokens + tokens_per_task - 1) / tokens_per_task;
  const int64_t n_ctx = kv.n_ctx();
  const bool f16 = kv.type() == KvType::F16;

  pool.parallel_for(static_cast<int64_t>(n_blocks) * s.n_head_kv, [&](int64_t task, int thread) {
    const int hk = static_cast<int>(task % s.n_head_kv);
    const int i0 = static_cast<int>(task / s.n_head_kv) * tokens_per_task;
    const int i1 = std::min(n_tokens, i0 + tokens_per_task);
    const int n_q = (i1 - i0) * group;
    // Key range of the whole tile: [first, last], per row [first_r, pos_r].
    const int last = pos0 + i1 - 1;
    const int first = s.sliding_window > 0 ? std::max(0, pos0 + i0 - s.sliding_window + 1) : 0;
    const int n_keys = last - first + 1;
    const float* q_rows[kAttnTileRows];
    float* s_rows[kAttnTileRows];
    float* o_rows[kAttnTileRows];
    float* sc = scores + static_cast<int64_t>(thread) * tile_rows * n_ctx;
    for (int i = i0; i < i1; ++i)
      for (int g = 0; g < group; ++g) {
        const int row = (i - i0) * group + g;
        const int h = hk * group + g;
        q_rows[row] = q + i * q_stride + static_cast<int64_t>(h) * s.head_dim_k;
        o_rows[row] = out + i * o_stride + static_cast<int64_t>(h) * s.head_dim_v;
        s_rows[row] = sc + static_cast<int64_t>(row) * n_ctx;
      }
    if (f16)
      k.attn_scores_f16(n_keys, s.head_dim_k,
                        static_cast<const uint16_t*>(kv.k_row(layer, first)) + hk * s.head_dim_k, k_stride, q_rows, n_q,
                        s.scale, s_rows);
    else
      k.attn_scores_f32(n_keys, s.head_dim_k, static_cast<const float*>(kv.k_row(layer, first)) + hk * s.head_dim_k,
                        k_stride, q_rows, n_q, s.scale, s_rows);
    float inv[kAttnTileRows];
    for (int row = 0; row < n_q; ++row) {
      const int pos = pos0 + i0 + row / group;
      const int row_first = s.sliding_window > 0 ? std::max(0, pos - s.sliding_window + 1) : 0;
      float* sr = s_rows[row];
      // Softmax over this row's keys; zero weight for the tile's other keys.
      const int lo = row_first - first, hi = pos - first;  // inclusive, relative to `first`
      for (int j = 0; j < lo; ++j) sr[j] = 0.0f;
      inv[row] = softmax_inv(k, s.sinks, hk * group + row % group, hi - lo + 1, sr + lo);
      for (int j = hi + 1; j < n_keys; ++j) sr[j] = 0.0f;
    }
    if (f16)
      k.attn_pv_f16(n_keys, s.head_dim_v, static_cast<const uint16_t*>(kv.v_row(layer, first)) + hk * s.head_dim_v,
                    v_stride, s_rows, n_q, o_rows);
    else
      k.attn_pv_f32(n_keys, s.head_dim_v, static_cast<const float*>(kv.v_row(layer, first)) + hk * s.head_dim_v,
                    v_stride, s_rows, n_q, o_rows);
    for (int row = 0; row < n_q; ++row)
      for (int d = 0; d < s.head_dim_v; ++d) o_rows[row][d] *= inv[row];
  });
}

}  // namespace guild
