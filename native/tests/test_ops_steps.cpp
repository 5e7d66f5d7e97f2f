// The executor steps' numerics beyond the standard decoder, against plain
// double-precision references: attention with sinks and sliding windows (the
// tiled and one-row paths, batch vs one token at a time), top-k-then-softmax
// and sigmoid gating, and the clamped SwiGLU (swiglu-oai).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "check.h"
#include "ops/attention.h"
#include "ops/glu.h"
#include "ops/moe.h"
#include "runtime/kv_cache.h"

using namespace guild;

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// softmax over keys [first, pos] plus the sink, in double.
void reference_attention(const AttentionShape& s, const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v, int n_tokens, std::vector<double>* out) {
  const int group = s.n_head / s.n_head_kv;
  const int kd = s.n_head_kv * s.head_dim_k, vd = s.n_head_kv * s.head_dim_v;
  out->assign(static_cast<size_t>(n_tokens) * s.n_head * s.head_dim_v, 0.0);
  for (int i = 0; i < n_tokens; ++i)
    for (int h = 0; h < s.n_head; ++h) {
      const int hk = h / group;
      const int first = s.sliding_window > 0 ? std::max(0, i - s.sliding_window + 1) : 0;
      std::vector<double> sc;
      double m = s.sinks ? s.sinks[h] : -INFINITY;
      for (int j = first; j <= i; ++j) {
        double d = 0;
        for (int c = 0; c < s.head_dim_k; ++c)
          d += static_cast<double>(q[(static_cast<size_t>(i) * s.n_head + h) * s.head_dim_k + c]) *
               k[static_cast<size_t>(j) * kd + hk * s.head_dim_k + c];
        sc.push_back(d * s.scale);
        m = std::max(m, sc.back());
      }
      double den = s.sinks ? std::exp(s.sinks[h] - m) : 0.0;
      for (double& x : sc) den += (x = std::exp(x - m));
      for (int j = first; j <= i; ++j)
        for (int c = 0; c < s.head_dim_v; ++c)
          (*out)[(static_cast<size_t>(i) * s.n_head + h) * s.head_dim_v + c] +=
              sc[j - first] / den * v[static_cast<size_t>(j) * vd + hk * s.head_dim_v + c];
    }
}

}  // namespace

TEST(attention_with_sinks_and_window_matches_reference) {
  ThreadPool pool(2);
  for (int window : {0, 5}) {
    for (bool with_sinks : {false, true}) {
      for (int n_head : {8, 64}) {  // group 4: the tiled path; group 32 > kAttnTileRows: one query row per task
        AttentionShape s;
        s.n_head = n_head;
        s.n_head_kv = 2;
        s.head_dim_k = s.head_dim_v = 16;
        s.scale = 0.25f;
        s.sliding_window = window;
        const std::vector<float> sinks = randn(static_cast<size_t>(n_head), 7, 2.0f);
        s.sinks = with_sinks ? sinks.data() : nullptr;
        const int n = 23;
        const int kd = s.n_head_kv * s.head_dim_k;
        std::vector<float> q = randn(static_cast<size_t>(n) * n_head * s.head_dim_k, 1);
        std::vector<float> k = randn(static_cast<size_t>(n) * kd, 2), v = randn(static_cast<size_t>(n) * kd, 3);
        KvCache kv;
        REQUIRE(kv.init(1, 64, kd, kd, KvType::F32));
        for (int i = 0; i < n; ++i) kv.store(0, i, k.data() + i * kd, v.data() + i * kd);
        std::vector<double> want;
        reference_attention(s, q, k, v, n, &want);
        const size_t out_n = static_cast<size_t>(n) * n_head * s.head_dim_v;
        std::vector<float> batch(out_n), single(out_n), scores(static_cast<size_t>(pool.size()) * kAttnTileRows * 64);
        attention(pool, cpu_kernels_best(), s, kv, 0, q.data(), n, 0, batch.data(), scores.data(), kAttnTileRows);
        for (int i = 0; i < n; ++i)
          attention(pool, cpu_kernels_best(), s, kv, 0, q.data() + static_cast<size_t>(i) * n_head * s.head_dim_k, 1, i,
                    single.data() + static_cast<size_t>(i) * n_head * s.head_dim_v, scores.data(), kAttnTileRows);
        double worst = 0;
        for (size_t i = 0; i < out_n; ++i) worst = std::max(worst, std::fabs(batch[i] - want[i]));
        CHECK_MSG(worst < 1e-5, "window %d sinks %d heads %d: max |d| %.3g", window, with_sinks, n_head, worst);
        CHECK_MSG(std::equal(batch.begin(), batch.end(), single.begin()),
                  "window %d sinks %d heads %d: batch differs from one token at a time", window, with_sinks, n_head);
      }
    }
  }
}

TEST(a_large_sink_takes_the_weight) {
  // A sink far above every score leaves almost nothing for the values; the
  // result stays finite (no exp overflow turns into NaN).
  ThreadPool pool(1);
  AttentionShape s;
  s.n_head = 2;
  s.n_head_kv = 1;
  s.head_dim_k = s.head_dim_v = 8;
  const float sinks[2] = {200.0f, -200.0f};
  s.sinks = sinks;
  KvCache kv;
  REQUIRE(kv.init(1, 8, 8, 8, KvType::F16));
  std::vector<float> k = randn(8, 4), v(8, 1.0f), q = randn(16, 5);
  kv.store(0, 0, k.data(), v.data());
  std::vector<float> out(16), scores(64);
  attention(pool, cpu_kernels_best(), s, kv, 0, q.data(), 1, 0, out.data(), scores.data(), kAttnTileRows);
  for (int d = 0; d < 8; ++d) {
    CHECK(std::isfinite(out[d]) && std::fabs(out[d]) < 1e-30f);  // head 0: the sink has it all
    CHECK(std::fabs(out[8 + d] - 1.0f) < 1e-6f);                  // head 1: the sink has nothing
  }
}

TEST(topk_softmax_gating) {
  ExpertRouting r;
  r.reserve(2, 3, 6);
  r.n_tokens = 2;
  r.k = 3;
  r.n_expert = 6;
  const float logits[12] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f,  // tie 1/3: the lower id first
                            -3.0f, -2.0f, -1.0f, 4.0f, 3.5f, -0.5f};
  route_topk_softmax_rows(logits, 0, 2, &r);
  const int want_ids[6] = {1, 3, 4, 3, 4, 5};
  for (int i = 0; i < 6; ++i) CHECK_MSG(r.ids[i] == want_ids[i], "slot %d: expert %d, want %d", i, r.ids[i], want_ids[i]);
  for (int t = 0; t < 2; ++t) {
    double den = 0;
    for (int j = 0; j < 3; ++j) den += std::exp(static_cast<double>(logits[t * 6 + want_ids[t * 3 + j]]));
    for (int j = 0; j < 3; ++j) {
      const double want = std::exp(static_cast<double>(logits[t * 6 + want_ids[t * 3 + j]])) / den;
      CHECK_MSG(std::fabs(r.weights[t * 3 + j] - want) < 1e-6, "token %d choice %d: %g, want %g", t, j,
                r.weights[t * 3 + j], want);
    }
  }
}

TEST(sigmoid_gating_chooses_with_the_bias_and_weighs_without_it) {
  ExpertRouting r;
  r.reserve(1, 2, 4);
  r.n_tokens = 1;
  r.k = 2;
  r.n_expert = 4;
  const float logits[4] = {2.0f, 1.0f, 0.0f, -1.0f};
  const float bias[4] = {0.0f, 0.0f, 0.5f, 0.9f};  // sigmoid + bias: 0.881, 0.731, 1.0, 1.169
  route_sigmoid_topk_rows(logits, bias, /*renorm=*/true, /*scale=*/2.5f, 0, 1, &r);
  CHECK(r.ids[0] == 3 && r.ids[1] == 2);
  const double p3 = 1.0 / (1.0 + std::exp(1.0)), p2 = 0.5;  // the unbiased sigmoids weigh
  CHECK_MSG(std::fabs(r.weights[0] - 2.5 * p3 / (p3 + p2)) < 1e-6, "%g", r.weights[0]);
  CHECK_MSG(std::fabs(r.weights[1] - 2.5 * p2 / (p3 + p2)) < 1e-6, "%g", r.weights[1]);
  route_sigmoid_topk_rows(logits, nullptr, /*renorm=*/false, 1.0f, 0, 1, &r);  // no bias: the two largest logits
  CHECK(r.ids[0] == 0 && r.ids[1] == 1);
  CHECK(std::fabs(r.weights[0] - 1.0 / (1.0 + std::exp(-2.0))) < 1e-6);
}

TEST(swiglu_oai_clamps_gate_above_and_up_both_ways) {
  const GluParams p{Glu::SwigluOai, 1.702f, 7.0f};
  const float gate[5] = {-20.0f, -1.0f, 0.5f, 7.0f, 30.0f};
  const float up[5] = {-30.0f, 0.25f, 3.0f, -6.0f, 9.0f};
  float out[5];
  glu(cpu_kernels_best(), p, 5, gate, up, out);
  for (int i = 0; i < 5; ++i) {
    const double g = std::min(static_cast<double>(gate[i]), 7.0);
    const double u = std::clamp(static_cast<double>(up[i]), -7.0, 7.0);
    const double want = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
    CHECK_MSG(std::fabs(out[i] - want) <= 1e-5 * std::max(1.0, std::fabs(want)), "i %d: %g, want %g", i, out[i], want);
  }
  // Silu is the kernel table's SwiGLU.
  float silu_out[5], table_out[5];
  glu(cpu_kernels_best(), GluParams{}, 5, gate, up, silu_out);
  cpu_kernels_best().swiglu_f32(5, gate, up, table_out);
  CHECK(std::equal(silu_out, silu_out + 5, table_out));
}


