// The expert placement plan and the online cache policy (runtime/expert_placement.h):
// pure decisions, checked without a GPU.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "check.h"
#include "runtime/expert_placement.h"

using namespace guild;

namespace {

PlacementInput input(int n_layer, int n_expert, uint64_t bytes, uint64_t budget) {
  PlacementInput in;
  in.n_layer = n_layer;
  in.n_expert = n_expert;
  in.expert_bytes.assign(n_layer, bytes);
  in.budget_bytes = budget;
  return in;
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TEST(without_statistics_layers_get_equal_shares) {
  PlacementInput in = input(4, 8, 100, 100 * 12);  // 12 of 32 experts
  in.expert_bytes[2] = 0;                           // a dense layer
  const PlacementPlan p = plan_expert_placement(in);
  CHECK(p.slots[2] == 0);
  CHECK(p.slots[0] == 4 && p.slots[1] == 4 && p.slots[3] == 4);
  CHECK(p.bytes == 1200);
  CHECK(!p.all_cached);
  CHECK(p.experts[0] == (std::vector<int>{0, 1, 2, 3}));
}

TEST(statistics_pick_the_hottest_experts_across_layers) {
  PlacementInput in = input(2, 4, 10, 30);
  // Layer 0: expert 3 very hot, 1 warm. Layer 1: expert 0 hot.
  in.counts = {0, 5, 0, 50, 40, 1, 1, 1};
  const PlacementPlan p = plan_expert_placement(in);
  CHECK(p.slots[0] == 2 && p.slots[1] == 1);
  CHECK(contains(p.experts[0], 3) && contains(p.experts[0], 1) && contains(p.experts[1], 0));
  CHECK(p.experts[0][0] == 3);  // hottest first
  const double hit = (50.0 + 5 + 40) / 98.0;
  CHECK(std::abs(p.expected_hit_rate - hit) < 1e-9);
}

TEST(count_per_byte_prefers_small_experts_and_budget_is_never_exceeded) {
  PlacementInput in = input(2, 2, 10, 25);
  in.expert_bytes[1] = 20;
  in.counts = {10, 9, 12, 11};  // layer 1 counts higher, but its experts cost twice as much
  const PlacementPlan p = plan_expert_placement(in);
  CHECK(p.bytes <= 25);
  CHECK(p.slots[0] == 2 && p.slots[1] == 0);
  in.budget_bytes = 1000;
  const PlacementPlan all = plan_expert_placement(in);
  CHECK(all.all_cached);
  CHECK(all.bytes == 60);
  in.budget_bytes = 0;
  const PlacementPlan none = plan_expert_placement(in);
  CHECK(none.bytes == 0 && none.slots[0] == 0 && none.slots[1] == 0 && none.expected_hit_rate == 0.0);
}

TEST(online_policy_swaps_only_on_sustained_shift_and_is_bounded) {
  ExpertCachePolicy pol;
  pol.init(3, 4, 0.5, 1.5, 2);
  std::vector<std::vector<int>> cache = {{0, 1}, {0, 1}, {0, 1}};
  auto cached = [&](int l, int s) { return cache[l][s]; };
  auto slots = [&](int l) { return static_cast<int>(cache[l].size()); };
  // Routing matches the cache: nothing to do.
  auto sw = pol.update({5, 5, 0, 0, 5, 5, 0, 0, 5, 5, 0, 0}, cached, slots);
  CHECK(sw.empty());
  // Every layer now prefers expert 3 strongly: at most 2 copies per window.
  sw = pol.update({0, 1, 0, 30, 0, 1, 0, 40, 0, 1, 0, 20}, cached, slots);
  CHECK(sw.size() == 2);
  for (const auto& s : sw) {
    CHECK(s.expert == 3);
    CHECK(s.evicted == 0);  // expert 0 decayed to the coldest
    cache[s.layer][s.slot] = s.expert;
  }
  // The largest gains went first: layers 1 and 0.
  CHECK((sw[0].layer == 1 && sw[1].layer == 0));
  // A small blip does not evict a hot expert.
  sw = pol.update({0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 20}, cached, slots);
  for (const auto& s : sw) CHECK(!(s.layer != 2 && s.expert == 2));
}

TEST(prefill_streams_only_when_copying_beats_the_cpu) {
  StreamCosts c;
  c.uncached_per_layer = 64;
  c.k = 8;
  c.miss_rate = 0.5;
  c.cpu_us_1 = 50;       // one token through one expert
  c.cpu_us_batch = 200;  // 32 tokens through one expert: weights read once
  c.t_ref = 32;
  c.copy_us = 100;       // stream a layer: 6.4 ms
  // n = 16: 64 slots on <= 64 experts, 1 token each: 64 x 50 us = 3.2 ms < 6.4 ms: CPU.
  // The CPU cost keeps growing with n (more tokens per expert); streaming is flat.
  const int n = prefill_stream_threshold(c, 512);
  CHECK(n > 16);
  // At the threshold the CPU is slower, one token earlier it is not.
  auto cpu_us = [&](int t) {
    const double slots = t * c.k * c.miss_rate, active = std::min(c.uncached_per_layer, slots);
    return active * (c.cpu_us_1 + (slots / active - 1) * (c.cpu_us_batch - c.cpu_us_1) / (c.t_ref - 1));
  };
  CHECK(cpu_us(n) > 64 * c.copy_us);
  CHECK(cpu_us(n - 1) <= 64 * c.copy_us);
  // Slow copies (bounce buffers): the CPU wins for every step up to 512 tokens.
  c.copy_us = 900;
  CHECK(prefill_stream_threshold(c, 512) == 0);
  // Unknown costs never stream.
  c.cpu_us_batch = 0;
  CHECK(prefill_stream_threshold(c, 512) == 0);
}

// The 16 GiB case of the H200 bench: 5784 of 6144 experts cached, a held-out
// miss rate of 1.2 %, the prompt's 5.6 %. Planned: no lower than even routing.
TEST(prefill_plans_for_at_least_the_even_routing_miss_rate) {
  const double share = 5784.0 / 6144.0;
  CHECK(std::fabs(prefill_miss_rate(0.012, share) - (1.0 - share)) < 1e-12);
  CHECK(prefill_miss_rate(0.6, 0.415) == 0.6);  // a held-out rate above even routing stands
  CHECK(prefill_miss_rate(0.0, 1.0) == 0.0);    // everything cached
  CHECK(prefill_miss_rate(-1.0, 2.0) == 0.0);   // clamped
  CHECK(prefill_miss_rate(0.2, 0.0) == 1.0);    // nothing cached
  // With the planned rate a 512-token step streams its 7.5 uncached experts per
  // layer; with the held-out rate alone it does not (illustrative costs: the
  // CPU at 31 us for one token and 130 us for 32 through an expert, a copy 50 us).
  StreamCosts c;
  c.uncached_per_layer = 7.5;
  c.k = 8;
  c.cpu_us_1 = 31;
  c.cpu_us_batch = 130;
  c.t_ref = 32;
  c.copy_us = 50;
  c.miss_rate = 0.012;
  CHECK(prefill_stream_threshold(c, 512) == 0);
  c.miss_rate = prefill_miss_rate(0.012, share);
  const int n = prefill_stream_threshold(c, 512);
  CHECK(n > 0 && n < 512);
}

TEST(the_gpu_takes_a_share_of_the_cpu_choices_only_where_it_pays) {
  // The H200 figures: 8 choices, 35 us per expert on the CPU, 59 us for the GPU
  // reading one from host memory, 2.3 us per cached expert on the GPU.
  HostSplitCosts c;
  c.k = 8;
  c.cpu_us = 35;
  c.host_us = 59;
  // Every expert on the CPU: m = 8; g = 3 gives max(5 x 35, 3 x 59) = 177 against 280 for none.
  c.miss_rate = 1.0;
  HostSplit s = plan_host_split(c);
  CHECK(s.choices == 3);
  CHECK(std::fabs(s.layer_us - 177.0) < 1e-9);
  CHECK(host_split_layer_us(c, 0) == 280.0);
  // 8 GiB (hit rate 0.42 on the bench's tokens): m = 4.64, the cached pass takes 7.7 us.
  c.miss_rate = 0.58;
  c.cached_us = 2.3 * 8 * 0.42;
  s = plan_host_split(c);
  CHECK(s.choices == 2);
  for (int g = 0; g <= 8; ++g) CHECK(host_split_layer_us(c, g) >= s.layer_us);
  // The calibration text's hit rate (0.62): one choice.
  c.miss_rate = 0.38;
  c.cached_us = 2.3 * 8 * 0.62;
  CHECK(plan_host_split(c).choices == 1);
  // Reading from host memory much slower than the CPU: never.
  c.host_us = 500;
  CHECK(plan_host_split(c).choices == 0);
  // Everything cached, or a cost unknown: never.
  c.host_us = 59;
  c.miss_rate = 0;
  CHECK(plan_host_split(c).choices == 0);
  c.miss_rate = 1;
  c.host_us = -1;
  CHECK(plan_host_split(c).choices == 0);
  // Never more than the CPU's choices (m = 1.6: at most 2).
  c.host_us = 1;
  c.miss_rate = 0.2;
  CHECK(plan_host_split(c).choices == 2);
}

TEST(several_devices_take_disjoint_experts_hottest_first) {
  // 2 layers x 6 experts of 10 bytes; the primary holds 3, the peer 4, the CPU the rest.
  PlacementInput in = input(2, 6, 10, 0);
  in.counts = {60, 50, 40, 30, 20, 10,   // layer 0
               5, 55, 45, 35, 25, 15};   // layer 1
  const std::vector<PlacementPlan> plans = plan_devices_placement(in, {30, 40});
  REQUIRE(plans.size() == 2);
  CHECK(plans[0].bytes == 30 && plans[1].bytes == 40);
  // Primary: the three hottest pairs overall (60, 55, 50).
  CHECK(contains(plans[0].experts[0], 0) && contains(plans[0].experts[0], 1) && contains(plans[0].experts[1], 1));
  // Peer: the next four (45, 40, 35, 30), none of the primary's.
  CHECK(contains(plans[1].experts[1], 2) && contains(plans[1].experts[0], 2) && contains(plans[1].experts[1], 3) &&
        contains(plans[1].experts[0], 3));
  for (int l = 0; l < 2; ++l)
    for (int e : plans[1].experts[l]) CHECK(!contains(plans[0].experts[l], e));
  // Hit rates: each device's share of all 390 routed choices.
  CHECK(std::abs(plans[0].expected_hit_rate - 165.0 / 390.0) < 1e-9);
  CHECK(std::abs(plans[1].expected_hit_rate - 150.0 / 390.0) < 1e-9);
  // One budget: the single-device plan.
  const std::vector<PlacementPlan> one = plan_devices_placement(in, {30});
  REQUIRE(one.size() == 1);
  CHECK(one[0].experts == plans[0].experts);
  // Without statistics: round-robin shares, still disjoint.
  PlacementInput none = input(2, 6, 10, 0);
  const std::vector<PlacementPlan> rr = plan_devices_placement(none, {40, 40});
  CHECK(rr[0].slots[0] == 2 && rr[0].slots[1] == 2 && rr[1].slots[0] == 2 && rr[1].slots[1] == 2);
  for (int l = 0; l < 2; ++l)
    for (int e : rr[1].experts[l]) CHECK(!contains(rr[0].experts[l], e));
  CHECK(std::abs(rr[1].expected_hit_rate - 4.0 / 12.0) < 1e-9);
}
