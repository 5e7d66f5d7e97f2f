// Sampling: greedy ties, temperature, top-k, top-p, min-p, repetition
// penalty, seeds; and RoPE variants.
#include <cmath>
#include <map>
#include <vector>

#include "check.h"
#include "ops/rope.h"
#include "runtime/sampler.h"

using namespace guild;

namespace {
std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }
}

TEST(greedy_picks_highest_and_ties_go_to_lowest_id) {
  auto l = logits_of({1.0f, 3.0f, 3.0f, 2.0f});
  CHECK(argmax_lowest_id(l.data(), 4) == 1);
  Sampler s(SamplingParams{}, 4);  // temperature 0
  CHECK(s.sample(l.data(), {}) == 1);
  CHECK(s.plain_argmax());
  // NaN never wins, wherever it is (the GPU's argmax_rows does the same); all NaN: 0.
  auto n = logits_of({NAN, -5.0f, NAN, -2.0f});
  CHECK(argmax_lowest_id(n.data(), 4) == 3);
  auto all_nan = logits_of({NAN, NAN});
  CHECK(argmax_lowest_id(all_nan.data(), 2) == 0);
  // A repetition penalty changes the logits first: not a plain argmax.
  SamplingParams pen;
  pen.repeat_penalty = 1.1f;
  CHECK(!Sampler(pen, 4).plain_argmax());
}

TEST(top_k_one_and_tiny_top_p_and_full_min_p_are_greedy) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto l = logits_of({0.5f, 2.0f, 1.9f, -1.0f, 1.95f});
    SamplingParams p;
    p.temperature = 1.5f;
    p.seed = seed;
    p.top_k = 1;
    CHECK(Sampler(p, 5).sample(l.data(), {}) == 1);
    p.top_k = 0;
    p.top_p = 1e-6f;
    CHECK(Sampler(p, 5).sample(l.data(), {}) == 1);
    p.top_p = 1.0f;
    p.min_p = 1.0f;
    CHECK(Sampler(p, 5).sample(l.data(), {}) == 1);
  }
}

TEST(seed_makes_draws_repeatable) {
  auto draw = [](uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = seed;
    Sampler s(p, 6);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) {
      auto l = logits_of({0.1f, 0.2f, 0.3f, 0.0f, -0.1f, 0.25f});
      out.push_back(s.sample(l.data(), {}));
    }
    return out;
  };
  CHECK(draw(7) == draw(7));
  CHECK(draw(7) != draw(8));
}

TEST(temperature_one_follows_the_softmax) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 123;
  Sampler s(p, 3);
  const float base[3] = {0.0f, std::log(2.0f), std::log(5.0f)};  // probabilities 1/8, 2/8, 5/8
  std::map<int, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    float l[3] = {base[0], base[1], base[2]};
    counts[s.sample(l, {})]++;
  }
  CHECK(std::fabs(counts[0] / double(n) - 0.125) < 0.01);
  CHECK(std::fabs(counts[1] / double(n) - 0.25) < 0.01);
  CHECK(std::fabs(counts[2] / double(n) - 0.625) < 0.01);
}

// Speculative sampling against a point-mass draft: whatever the draft (the
// likeliest token, an unlikely one, one top-k cuts away), the result follows
// the row's distribution; greedy is the plain argmax.
TEST(sample_against_draft_keeps_the_distribution) {
  const float base[4] = {0.0f, std::log(2.0f), std::log(5.0f), std::log(2.0f)};  // 1/10, 2/10, 5/10, 2/10
  const double want[4] = {0.1, 0.2, 0.5, 0.2};
  for (int32_t draft : {2, 0, 3}) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = 99 + static_cast<uint64_t>(draft);
    Sampler s(p, 4);
    std::map<int, int> counts;
    const int n = 60000;
    for (int i = 0; i < n; ++i) {
      float l[4] = {base[0], base[1], base[2], base[3]};
      counts[s.sample_against_draft(l, {}, draft)]++;
    }
    for (int t = 0; t < 4; ++t)
      CHECK_MSG(std::fabs(counts[t] / double(n) - want[t]) < 0.01, "draft %d: token %d at %.4f, want %.2f", draft, t,
                counts[t] / double(n), want[t]);
  }
  // top_k 2 leaves tokens 2 and 1/3 (tie: lower id 1): weights 5 and 2 → 5/7, 2/7.
  SamplingParams k2;
  k2.temperature = 1.0f;
  k2.top_k = 2;
  k2.seed = 5;
  Sampler s(k2, 4);
  std::map<int, int> counts;
  const int n = 60000;
  for (int i = 0; i < n; ++i) {
    float l[4] = {base[0], base[1], base[2], base[3]};
    counts[s.sample_against_draft(l, {}, 0)]++;  // a draft outside the candidates is always rejected
  }
  CHECK(counts[0] == 0 && counts[3] == 0);
  CHECK(std::fabs(counts[2] / double(n) - 5.0 / 7.0) < 0.01);
  // Greedy: the argmax, draft or not.
  Sampler g(SamplingParams{}, 4);
  float l[4] = {base[0], base[1], base[2], base[3]};
  CHECK(g.sample_against_draft(l, {}, 1) == 2);
}

TEST(top_p_keeps_the_smallest_set_reaching_p) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.7f;  // {5/8} < 0.7 <= {5/8 + 2/8}: tokens 2 and 1 stay
  p.seed = 5;
  Sampler s(p, 3);
  std::map<int, int> counts;
  for (int i = 0; i < 5000; ++i) {
    float l[3] = {0.0f, std::log(2.0f), std::log(5.0f)};
    counts[s.sample(l, {})]++;
  }
  CHECK(counts[0] == 0 && counts[1] > 0 && counts[2] > counts[1]);
}

TEST(repetition_penalty_demotes_recent_tokens) {
  auto l = logits_of({1.0f, 2.0f, 1.8f});
  SamplingParams p;
  p.repeat_penalty = 1.5f;
  const int32_t recent[] = {1, 1, 7};  // 7 is out of range: ignored
  CHECK(Sampler(p, 3).sample(l.data(), recent) == 2);
  CHECK(std::fabs(l[1] - 2.0f / 1.5f) < 1e-6f);  // penalised once, not twice
  auto neg = logits_of({-1.0f, -0.5f});
  const int32_t r2[] = {1};
  Sampler(p, 2).sample(neg.data(), r2);
  CHECK(std::fabs(neg[1] - (-0.75f)) < 1e-6f);  // negative logits are multiplied
}

TEST(rope_yarn_with_factor_one_equals_plain_rope) {
  RopeParams plain;
  plain.n_rot = 64;
  plain.freq_base = 10000.0f;
  RopeParams yarn = plain;
  yarn.ext_factor = 1.0f;
  yarn.n_ctx_orig = 4096;
  std::vector<float> a(64), b(64);
  for (int pos : {0, 1, 17, 1000}) {
    rope_cache(plain, pos, a.data());
    rope_cache(yarn, pos, b.data());
    for (int i = 0; i < 64; ++i) CHECK(std::fabs(a[i] - b[i]) < 1e-6f);
  }
}

TEST(rope_rotates_the_right_pairs) {
  RopeParams p;
  p.n_rot = 4;
  p.freq_base = 10000.0f;
  std::vector<float> cs(4);
  rope_cache(p, 1, cs.data());  // theta0 = 1, theta1 = 1/100
  float x[6] = {1, 0, 0, 0, 5, 6};  // head of 6, only the first 4 rotate
  p.style = RopeStyle::Norm;        // pairs (0,1), (2,3)
  rope_apply(p, cs.data(), x, 1, 6);
  CHECK(std::fabs(x[0] - std::cos(1.0f)) < 1e-6f && std::fabs(x[1] - std::sin(1.0f)) < 1e-6f);
  CHECK(x[4] == 5 && x[5] == 6);
  float y[4] = {1, 0, 0, 0};
  p.style = RopeStyle::Neox;  // pairs (0,2), (1,3)
  rope_apply(p, cs.data(), y, 1, 4);
  CHECK(std::fabs(y[0] - std::cos(1.0f)) < 1e-6f && std::fabs(y[2] - std::sin(1.0f)) < 1e-6f && y[1] == 0);
}
