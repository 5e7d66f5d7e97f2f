#include "runtime/expert_placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace guild {

PlacementPlan plan_expert_placement(const PlacementInput& in) {
  PlacementPlan p;
  p.slots.assign(in.n_layer, 0);
  p.experts.assign(in.n_layer, {});
  const bool have_counts = in.counts.size() == static_cast<size_t>(in.n_layer) * in.n_expert;
  uint64_t all_bytes = 0;
  for (int l = 0; l < in.n_layer; ++l) all_bytes += in.expert_bytes[l] * static_cast<uint64_t>(in.n_expert);

  struct Candidate {
    double value;  // counts per byte (higher first)
    int rank;      // expert's rank within its layer (round-robin fill)
    int layer;
    int expert;
  };
  std::vector<Candidate> cands;
  double total_count = 0;
  std::vector<char> excluded(static_cast<size_t>(in.n_expert));
  for (int l = 0; l < in.n_layer; ++l) {
    if (in.expert_bytes[l] == 0) continue;
    std::fill(excluded.begin(), excluded.end(), 0);
    if (static_cast<size_t>(l) < in.exclude.size())
      for (int e : in.exclude[l])
        if (e >= 0 && e < in.n_expert) excluded[e] = 1;
    std::vector<int> order(in.n_expert);
    std::iota(order.begin(), order.end(), 0);
    auto count = [&](int e) { return have_counts ? in.counts[static_cast<size_t>(l) * in.n_expert + e] : 0u; };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return count(a) > count(b); });
    for (int r = 0; r < in.n_expert; ++r) {
      const int e = order[r];
      total_count += count(e);
      if (excluded[e]) continue;
      cands.push_back({static_cast<double>(count(e)) / static_cast<double>(in.expert_bytes[l]), r, l, e});
    }
  }
  std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.value != b.value) return a.value > b.value;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.layer < b.layer;
  });
  double hit = 0;
  size_t taken = 0;
  for (const Candidate& c : cands) {
    const uint64_t b = in.expert_bytes[c.layer];
    if (p.bytes + b > in.budget_bytes) continue;  // a smaller expert of another layer may still fit
    p.bytes += b;
    p.experts[c.layer].push_back(c.expert);
    ++taken;
    if (have_counts) hit += in.counts[static_cast<size_t>(c.layer) * in.n_expert + c.expert];
  }
  for (int l = 0; l < in.n_layer; ++l) p.slots[l] = static_cast<int>(p.experts[l].size());
  p.all_cached = all_bytes > 0 && p.bytes == all_bytes;
  if (!in.exclude.empty() && !have_counts && !cands.empty()) {
    // Without statistics the share is of all experts, the excluded ones included.
    uint64_t n_all = 0;
    for (int l = 0; l < in.n_layer; ++l) n_all += in.expert_bytes[l] ? static_cast<uint64_t>(in.n_expert) : 0;
    p.expected_hit_rate = static_cast<double>(taken) / static_cast<double>(n_all);
    return p;
  }
  p.expected_hit_rate = total_count > 0 ? hit / total_count
                        : cands.empty()  ? 0.0
                                         : static_cast<double>(taken) / static_cast<double>(cands.size());
  return p;
}

std::vector<PlacementPlan> plan_devices_placement(const PlacementInput& in, const std::vector<uint64_t>& budget_bytes) {
  std::vector<PlacementPlan> plans;
  PlacementInput step = in;
  step.exclude.assign(in.n_layer, {});
  for (int l = 0; l < in.n_layer && static_cast<size_t>(l) < in.exclude.size(); ++l) step.exclude[l] = in.exclude[l];
  for (uint64_t budget : budget_bytes) {
    step.budget_bytes = budget;
    plans.push_back(plan_expert_placement(step));
    for (int l = 0; l < in.n_layer; ++l)
      step.exclude[l].insert(step.exclude[l].end(), plans.back().experts[l].begin(), plans.back().experts[l].end());
  }
  return plans;
}

int prefill_stream_threshold(const StreamCosts& c, int max_tokens) {
  if (c.uncached_per_layer <= 0 || c.cpu_us_1 <= 0 || c.cpu_us_batch <= 0 || c.copy_us <= 0 || c.t_ref < 2 || c.k < 1)
    return 0;
  const double slope = std::max(0.0, (c.cpu_us_batch - c.cpu_us_1) / (c.t_ref - 1));
  const double stream_us = c.uncached_per_layer * c.copy_us;
  const double miss = std::clamp(c.miss_rate, 0.0, 1.0);
  for (int n = 2; n <= max_tokens; ++n) {
    const double slots = static_cast<double>(n) * c.k * miss;
    if (slots <= 0) continue;
    const double active = std::max(1.0, std::min(c.uncached_per_layer, slots));
    const double per_expert = c.cpu_us_1 + (slots / active - 1.0) * slope;
    if (active * per_expert > stream_us) return n;
  }
  return 0;
}

double prefill_miss_rate(double held_out_miss, double cached_share) {
  const double even = 1.0 - std::clamp(cached_share, 0.0, 1.0);
  if (!(held_out_miss >= 0.0)) return even;  // unknown (or NaN): even routing
  return std::clamp(std::max(held_out_miss, even), 0.0, 1.0);
}

void ExpertCachePolicy::init(int n_layer, int n_expert, double decay, double margin, int max_copies) {
  n_layer_ = n_layer;
  n_expert_ = n_expert;
  decay_ = decay;
  margin_ = margin;
  max_copies_ = max_copies;
  score_.assign(static_cast<size_t>(n_layer) * n_expert, 0.0);
}

std::vector<ExpertCachePolicy::Swap> ExpertCachePolicy::pick(const std::vector<std::vector<int>>& cached) {
  // Candidates: per layer, the hottest uncached expert against the coldest
  // cached one; the largest gains across layers win, max_copies_ of them.
  struct Gain {
    double gain;
    Swap swap;
  };
  std::vector<Gain> gains;
  std::vector<char> is_cached(n_expert_);
  for (int l = 0; l < n_layer_; ++l) {
    const std::vector<int>& c = cached[l];
    if (c.empty() || static_cast<int>(c.size()) >= n_expert_) continue;
    std::fill(is_cached.begin(), is_cached.end(), 0);
    int cold_slot = -1;
    double cold = 0;
    for (int s = 0; s < static_cast<int>(c.size()); ++s) {
      const double v = c[s] >= 0 ? score(l, c[s]) : -1.0;  // an empty slot is the coldest
      if (c[s] >= 0) is_cached[c[s]] = 1;
      if (cold_slot < 0 || v < cold) { cold_slot = s; cold = v; }
    }
    int hot = -1;
    for (int e = 0; e < n_expert_; ++e)
      if (!is_cached[e] && (hot < 0 || score(l, e) > score(l, hot))) hot = e;
    if (hot < 0) continue;
    const double h = score(l, hot);
    if (h > 0 && (cold < 0 || h > cold * margin_)) gains.push_back({h - std::max(cold, 0.0), {l, cold_slot, hot, c[cold_slot]}});
  }
  std::stable_sort(gains.begin(), gains.end(), [](const Gain& a, const Gain& b) { return a.gain > b.gain; });
  std::vector<Swap> out;
  for (size_t i = 0; i < gains.size() && static_cast<int>(out.size()) < max_copies_; ++i) out.push_back(gains[i].swap);
  return out;
}

double host_split_layer_us(const HostSplitCosts& c, int choices) {
  const int g = std::clamp(choices, 0, std::max(1, c.k));
  const double m = c.k * std::clamp(c.miss_rate, 0.0, 1.0);
  return std::max(std::max(0.0, m - g) * c.cpu_us, c.cached_us + g * c.host_us);
}

HostSplit plan_host_split(const HostSplitCosts& c) {
  HostSplit best;
  best.layer_us = host_split_layer_us(c, 0);
  if (c.cpu_us <= 0 || c.host_us <= 0 || c.k < 1) return best;
  const double m = c.k * std::clamp(c.miss_rate, 0.0, 1.0);
  const int most = std::min(c.k, static_cast<int>(std::ceil(m)));
  for (int g = 1; g <= most; ++g) {
    const double t = host_split_layer_us(c, g);
    if (t < best.layer_us) best = HostSplit{g, t};
  }
  return best;
}

}  // namespace guild
