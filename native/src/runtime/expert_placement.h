// Which routed experts the GPU expert cache holds (docs/CUDA.md, "Hybrid MoE").
// Pure decisions from sizes, a byte budget and routing counts, so they are
// unit-tested without a GPU; the CudaDecoder carries them out.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace guild {

struct PlacementInput {
  int n_layer = 0;
  int n_expert = 0;
  std::vector<uint64_t> expert_bytes;  // [n_layer] bytes of one cached expert (0: dense layer)
  uint64_t budget_bytes = 0;           // device bytes left for expert caches
  std::vector<uint32_t> counts;        // [n_layer][n_expert] routing counts; empty = no statistics yet
  // [n_layer] experts already placed on another device (never chosen again);
  // empty = none.
  std::vector<std::vector<int>> exclude;
};

struct PlacementPlan {
  std::vector<int> slots;                 // [n_layer] cache capacity (= experts cached)
  std::vector<std::vector<int>> experts;  // [n_layer] cached experts, hottest first
  uint64_t bytes = 0;                     // device bytes of all caches
  bool all_cached = false;                // the budget holds every expert
  // Share of the counted routing choices served by cached experts (without
  // statistics: the share of experts cached).
  double expected_hit_rate = 0.0;
};

// Greedy by routing count per byte over all (layer, expert) pairs until the
// budget is spent; ties (and no statistics) fill the layers round-robin by
// expert id, so without statistics every MoE layer gets the same share.
PlacementPlan plan_expert_placement(const PlacementInput& in);

// Several devices (docs/CUDA.md, "Several GPUs"): the primary's plan first
// (budget_bytes[0]), then each peer's from what is left, hottest per byte
// first; whatever no device takes stays with the CPU. One plan per budget;
// expected_hit_rate of plan i is the share served by device i alone.
std::vector<PlacementPlan> plan_devices_placement(const PlacementInput& in, const std::vector<uint64_t>& budget_bytes);

// When a prefill step should stream a layer's uncached experts to the GPU
// instead of computing them on the CPU (docs/CUDA.md, "Prefill"). For a step
// of n tokens, the CPU's work in one layer is a = min(U, n·k·miss) active
// experts of t = n·k·miss / a tokens each, at cost(t) per expert —
// interpolated between the measured one-token cost and the measured cost of a
// batch of t_ref tokens (the CPU reads an expert's weights once per batch, so
// cost grows slowly with t) — against U copies for streaming.
struct StreamCosts {
  double uncached_per_layer = 0;  // U
  int k = 1;                      // routed choices per token
  double miss_rate = 1;           // share of choices whose expert is not cached
  double cpu_us_1 = 0;            // one token through one expert on the CPU
  double cpu_us_batch = 0;        // t_ref tokens through one expert (one call)
  int t_ref = 32;
  double copy_us = 0;             // one expert copied to the GPU
};
// The smallest step (in tokens, >= 2) from which streaming is cheaper, or 0
// when it never is up to max_tokens (or a cost is unknown).
int prefill_stream_threshold(const StreamCosts& c, int max_tokens);
// The miss rate the prefill rule plans for: the held-out estimate, but never
// below what routing spread evenly over the experts would miss (1 - the cached
// share). A prompt unlike the calibration text misses more (the bench's
// random tokens: 5.6 % against a held-out 1.2 % at a 16 GiB budget), and the
// two mistakes are not alike: streaming's cost is bounded per layer, the
// CPU's grows with the step.
double prefill_miss_rate(double held_out_miss, double cached_share);

// Decode's split of the CPU's choices (docs/CUDA.md, "The GPU's share of the
// CPU's choices"): per token and layer the CPU would compute m = k x
// miss_rate choices; the GPU can take g of them, reading those experts from
// page-locked host memory while the CPU computes the rest and the GPU its
// cached ones. The layer then costs about max((m - g) x cpu, cached + g x host).
struct HostSplitCosts {
  int k = 1;                // routed choices per token
  double miss_rate = 1;     // share of choices the CPU would compute
  double cpu_us = 0;        // the CPU's cost per expert (one token)
  double host_us = 0;       // the GPU's cost per expert read from host memory
  double cached_us = 0;     // the GPU's time for one token's cached choices in a layer
};
struct HostSplit {
  int choices = 0;          // g
  double layer_us = 0;      // the estimate at g
};
// The g in [0, min(k, ceil(m))] with the lowest estimate (the smallest on
// ties); 0 when a cost is unknown (<= 0).
HostSplit plan_host_split(const HostSplitCosts& c);
// The estimate at a given g (clamped to [0, k]).
double host_split_layer_us(const HostSplitCosts& c, int choices);

// Online cache policy: exponentially decayed routing counts per expert; after
// each observation window at most max_copies experts are swapped in, each
// only when its decayed count beats the coldest cached expert of its layer by
// `margin` (a factor > 1) — so the copies per step are bounded by
// max_copies / window_steps and a swap needs a sustained shift in routing.
class ExpertCachePolicy {
 public:
  struct Swap {
    int layer;
    int slot;
    int expert;   // goes into slot
    int evicted;  // was in slot (-1: empty)
  };
  void init(int n_layer, int n_expert, double decay = 0.5, double margin = 1.5, int max_copies = 2);
  // counts: [n_layer][n_expert] since the last call; cached(layer, slot) and
  // n_slots(layer) describe the cache now. Returns the swaps to make.
  template <typename Cached, typename Slots>
  std::vector<Swap> update(const std::vector<uint32_t>& counts, Cached&& cached, Slots&& n_slots);
  double score(int layer, int expert) const { return score_[static_cast<size_t>(layer) * n_expert_ + expert]; }

 private:
  int n_layer_ = 0, n_expert_ = 0, max_copies_ = 2;
  double decay_ = 0.5, margin_ = 1.5;
  std::vector<double> score_;
  std::vector<Swap> pick(const std::vector<std::vector<int>>& cached_by_layer);
};

template <typename Cached, typename Slots>
std::vector<ExpertCachePolicy::Swap> ExpertCachePolicy::update(const std::vector<uint32_t>& counts, Cached&& cached,
                                                               Slots&& n_slots) {
  for (size_t i = 0; i < score_.size() && i < counts.size(); ++i) score_[i] = score_[i] * decay_ + counts[i];
  std::vector<std::vector<int>> by_layer(n_layer_);
  for (int l = 0; l < n_layer_; ++l) {
    const int n = n_slots(l);
    by_layer[l].resize(n);
    for (int s = 0; s < n; ++s) by_layer[l][s] = cached(l, s);
  }
  return pick(by_layer);
}

}  // namespace guild
