#include "ops/attention.h"

#include <algorithm>
#include <cmath>

#include "core/fp16.h"

namespace guild {
namespace {

template <typename KvElem>
inline float to_f32(KvElem v);
template <>
inline float to_f32<float>(float v) { return v; }
template <>
inline float to_f32<uint16_t>(uint16_t v) { return fp16_to_f32(v); }

template <typename KvElem>
void attend_one(const AttentionShape& s, const KvCache& kv, int layer, const float* q, int pos,
                float* out, float* scores, int head) {
  const int group = s.n_head / s.n_head_kv;
  const int kv_head = head / group;
  const int first = s.sliding_window > 0 ? std::max(0, pos - s.sliding_window + 1) : 0;
  float max_score = -INFINITY;
  for (int j = first; j <= pos; ++j) {
    const KvElem* k = static_cast<const KvElem*>(kv.k_row(layer, j)) + kv_head * s.head_dim_k;
    float dot = 0.0f;
    for (int d = 0; d < s.head_dim_k; ++d) dot += q[d] * to_f32(k[d]);
    const float score = dot * s.scale;
    scores[j] = score;
    max_score = std::max(max_score, score);
  }
  double sum = 0.0;
  for (int j = first; j <= pos; ++j) {
    const float e = std::exp(scores[j] - max_score);
    scores[j] = e;
    sum += e;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int d = 0; d < s.head_dim_v; ++d) out[d] = 0.0f;
  for (int j = first; j <= pos; ++j) {
    const KvElem* v = static_cast<const KvElem*>(kv.v_row(layer, j)) + kv_head * s.head_dim_v;
    const float p = scores[j] * inv;
    for (int d = 0; d < s.head_dim_v; ++d) out[d] += p * to_f32(v[d]);
  }
}

}  // namespace

void attention(ThreadPool& pool, const AttentionShape& s, const KvCache& kv, int layer,
               const float* q, int n_tokens, int pos0, float* out, float* scores) {
  const int64_t q_stride = static_cast<int64_t>(s.n_head) * s.head_dim_k;
  const int64_t o_stride = static_cast<int64_t>(s.n_head) * s.head_dim_v;
  const int64_t n_tasks = static_cast<int64_t>(n_tokens) * s.n_head;
  pool.parallel_for(n_tasks, [&](int64_t task, int thread) {
    const int i = static_cast<int>(task / s.n_head);
    const int h = static_cast<int>(task % s.n_head);
    const float* qh = q + i * q_stride + static_cast<int64_t>(h) * s.head_dim_k;
    float* oh = out + i * o_stride + static_cast<int64_t>(h) * s.head_dim_v;
    float* sc = scores + static_cast<int64_t>(thread) * kv.n_ctx();
    if (kv.type() == KvType::F16)
      attend_one<uint16_t>(s, kv, layer, qh, pos0 + i, oh, sc, h);
    else
      attend_one<float>(s, kv, layer, qh, pos0 + i, oh, sc, h);
  });
}

}  // namespace guild
