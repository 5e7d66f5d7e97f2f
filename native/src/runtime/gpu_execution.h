// GpuExecution: a model's GPU side (docs/CUDA.md, "Hybrid MoE"): the GPU
// package's decoder (gpu/gpu_backend.h) with its placement plan, the CPU expert runner that computes the
// uncached experts at the same time, calibration (stage 11) and the online
// expert-cache policy. Needs no CUDA header: the GPU comes from a package.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/kernel_table.h"
#include "core/thread_pool.h"
#include "models/hparams.h"
#include "models/weights.h"
#include "gpu/gpu_backend.h"
#include "runtime/expert_placement.h"

namespace guild {

class CpuExpertRunner;

struct GpuLoadOptions {
  int device = 0;
  int n_ctx = 4096;
  int max_tokens = 512;
  bool use_graphs = true;
  // Device bytes the model may use in all (weights, caches, KV, scratch);
  // < 0: the device's free memory less a reserve of kGpuReserveBytes.
  int64_t budget_bytes = -1;
  // Compute every routed expert on the CPU (the GPU holds dense weights and KV).
  bool experts_on_cpu = false;
  bool online_policy = true;
  bool stream_prefill = true;  // big prefill steps copy uncached experts to the GPU (CudaDecoderOptions)
  int pin_cpu = -1;  // CPU for the host-callback thread (worker 0 of the pool)
  // Peer GPUs (hybrid only; docs/CUDA.md, "Several GPUs"): each holds an
  // expert cache of its own of up to peer_budget_bytes (< 0: its free memory
  // less the reserve and its buffers).
  std::vector<int> peer_devices;
  int64_t peer_budget_bytes = -1;
  bool peer_stand_in = false;  // tests: the primary device may be its own "peer"
  // The layers' step parameters (ModelRecipe::executor_layers; empty: the
  // standard layer), for the decoder and the CPU expert runner alike.
  std::vector<ExecutorLayer> layers;
  // The MTP block on the device too (ModelRecipe::executor_nextn): a GPU
  // session's drafter (runtime/mtp_drafter.h).
  bool nextn = false;
  ExecutorLayer nextn_layer;
};
inline constexpr int64_t kGpuReserveBytes = int64_t{1} << 30;

// The device budget arithmetic of GpuExecution::create (plan_budget).
struct GpuBudget {
  uint64_t budget = 0;            // device bytes the model may use
  gpu::DecoderMemory all;         // everything on the device
  gpu::DecoderMemory dense;       // dense weights, KV cache and workspace (no expert cache)
  bool all_fit = false;           // every expert fits beside the dense part
  bool stream_prefill = true;     // false: no room for the prefill staging area
};

class GpuExecution {
 public:
  // The budget decision of create(), allocating nothing (the device is only
  // asked for its free memory): false + *error when the device cannot hold
  // even the dense part, or the device or the estimate fails. *detail gets
  // the arithmetic (and "mode" when it fits). A pre-flight check
  // (GuildModel::check) stops here.
  static bool plan_budget(const gpu::BackendV1& backend, const ModelHparams& hp, const ModelWeights& w,
                          const GpuLoadOptions& o, GpuBudget* out, json::Value* detail, std::string* error);
  // Stage 9: plans the budget and uploads the dense weights (and, when they
  // fit, all experts). Null + *error when the device cannot hold even the
  // dense part or fails; *detail gets the budget arithmetic either way.
  static std::unique_ptr<GpuExecution> create(const gpu::BackendV1& backend, const ModelHparams& hp,
                                              const ModelWeights& w, const CpuKernelTable& k, ThreadPool& pool,
                                              const GpuLoadOptions& o, json::Value* detail, std::string* error);
  ~GpuExecution();

  // Stage 10: the RAM tier. When the experts fit in available RAM (an eighth
  // kept free) they are copied into page-locked memory and w's expert stacks
  // point there (restored by the destructor), so copies to the GPU run at DMA
  // speed; otherwise they stay on the mapping and streamed copies go through
  // the pinned staging ring. Records which and why.
  bool pin_ram_tier(ModelWeights& w, uint64_t ram_total, uint64_t ram_available, json::Value* detail);
  // Stage 10: fills the expert caches with a first plan (no statistics yet).
  bool fill_initial(json::Value* detail, std::string* error);
  // Stage 11: routing statistics from a calibration prompt, measured costs,
  // the final plan. Records costs and the per-layer plan in *detail / *layers.
  bool calibrate(const std::vector<int32_t>& calibration_tokens, json::Value* detail, json::Value* layers,
                 std::string* error);

  // Runs tokens at positions pos0.. (chunks of max_tokens) like
  // decoder_forward; logits of all rows or the last one (logits may be null),
  // and the device's argmax (first maximum) of the same rows into argmax.
  bool forward(const int32_t* tokens, int n, int pos0, float* logits, bool all_rows, std::string* error,
               int32_t* argmax = nullptr);

  bool hybrid() const;
  int max_tokens() const;
  const gpu::Decoder& decoder() const { return *dec_; }
  gpu::Decoder& decoder() { return *dec_; }
  uint64_t cached_experts() const;
  uint64_t peer_experts() const;  // experts cached on the peers, all together
  uint64_t cpu_experts_computed() const;
  double cpu_expert_busy_ms() const;  // the CPU expert pool's time in its layer calls
  uint64_t swaps() const { return swaps_; }
  // The GPU's share of the CPU's choices per token and layer now, and how often the online policy changed it.
  int host_choices() const { return host_choices_; }
  uint64_t host_replans() const { return host_replans_; }
  // Share of routed choices served by the GPU cache since the last call (resets).
  double take_hit_rate();

  // The device KV cache holds one session's history at a time: the owner and
  // how many leading tokens of its history are valid there.
  uint64_t kv_owner = 0;
  size_t kv_tokens = 0;

 private:
  GpuExecution() = default;
  bool build_decoder(const std::vector<int>& slots, std::string* error);
  static void pool_copy(void* ctx, void* dst, const void* src, size_t bytes);
  bool apply_plan(const PlacementPlan& plan, std::string* error);
  // Reads (and resets) the decoder's routing counts into counts_, hits_ and choices_.
  // This model's placement problem (its experts and the primary's budget) with routing counts.
  PlacementInput placement_input(std::vector<uint32_t> counts) const;
  bool plan_host_choices(double cpu_total_us, int moe_layers, double gpu_us, double held_out_hit, json::Value* detail,
                         std::string* error);
  HostSplitCosts split_with_hit(double hit) const;
  void replan_host_choices(uint64_t hits, uint64_t choices);
  bool drain_counts();
  // drain_counts, then the online cache policy's swaps.
  void online_step();

  const ModelHparams* hp_ = nullptr;
  const ModelWeights* w_ = nullptr;
  const CpuKernelTable* kernels_ = nullptr;
  ThreadPool* pool_ = nullptr;
  GpuLoadOptions opt_;
  std::unique_ptr<CpuExpertRunner> cpu_;
  const gpu::BackendV1* backend_ = nullptr;  // from the loaded GPU package (kept open by the model)
  std::unique_ptr<gpu::Decoder> dec_;
  std::vector<uint64_t> expert_bytes_;  // [n_layer] one cached expert
  struct PinnedStack {
    void* block;                // host_alloc'ed copy
    const uint8_t* original;    // where the stack was (the mapping)
    ExpertMatrices* where;      // the model's stack now pointing at block
  };
  std::vector<PinnedStack> pinned_;
  std::vector<bool> pinned_layers_;  // [n_layer] once anything is pinned
  bool hold_pool_ = true;             // pool workers spin through hybrid forwards (ThreadPool::set_hold)
  uint64_t cache_budget_ = 0;
  PlacementPlan plan_;
  std::vector<uint64_t> peer_budgets_;      // [peer] bytes for its expert cache
  std::vector<PlacementPlan> peer_plans_;   // [peer]
  std::vector<double> peer_fill_us_;        // [peer] measured host-to-peer copy per expert (µs), -1 unknown
  ExpertCachePolicy policy_;
  int steps_since_policy_ = 0;
  uint64_t swaps_ = 0;
  uint64_t hits_ = 0, choices_ = 0;  // for take_hit_rate
  uint64_t window_hits_ = 0, window_choices_ = 0;  // since the last policy window
  HostSplitCosts split_costs_;        // calibration's costs for the GPU's share of the CPU's choices
  int host_choices_ = 0;              // that share now (Decoder::set_host_choices)
  uint64_t host_replans_ = 0;
  std::vector<uint32_t> counts_;
};

}  // namespace guild
