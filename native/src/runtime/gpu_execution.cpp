#include "runtime/gpu_execution.h"
#include "core/tuning.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include <sys/mman.h>

#include "gpu/gpu_backend.h"
#include "runtime/cpu_experts.h"
#include "runtime/model.h"
#include "runtime/session_memory.h"

namespace guild {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// The online policy looks at the routing every this many decode steps.
constexpr int kPolicyWindowSteps = 16;
// ... and copies at most this many experts per window (see ExpertCachePolicy).
constexpr int kPolicyMaxCopies = 2;

}  // namespace

GpuExecution::~GpuExecution() {
  dec_.reset();  // the decoder's host nodes call into cpu_: destroy it first
  cpu_.reset();
  // The model's weights point at the mapping again before the pinned copies go.
  for (const PinnedStack& p : pinned_) {
    p.where->first.data = p.original;
    backend_->host_free(p.block);
  }
}

// Host memcpy spread over the pool (fills the pinned staging ring from the
// mapping: one thread copies at a fraction of what the memory system gives).
void GpuExecution::pool_copy(void* ctx, void* dst, const void* src, size_t bytes) {
  ThreadPool& pool = *static_cast<ThreadPool*>(ctx);
  constexpr size_t kPiece = size_t{1} << 20;
  const int64_t pieces = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
  pool.parallel_for(pieces, [&](int64_t i, int) {
    const size_t off = static_cast<size_t>(i) * kPiece;
    std::memcpy(static_cast<uint8_t*>(dst) + off, static_cast<const uint8_t*>(src) + off, std::min(kPiece, bytes - off));
  });
}

bool GpuExecution::hybrid() const { return dec_ && dec_->hybrid(); }
int GpuExecution::max_tokens() const { return dec_ ? dec_->max_tokens() : 0; }
uint64_t GpuExecution::cpu_experts_computed() const { return cpu_ ? cpu_->experts_computed() : 0; }
double GpuExecution::cpu_expert_busy_ms() const { return cpu_ ? cpu_->busy_ms() : 0.0; }
uint64_t GpuExecution::cached_experts() const {
  uint64_t n = 0;
  for (int s : plan_.slots) n += static_cast<uint64_t>(s);
  return n;
}

bool GpuExecution::build_decoder(const std::vector<int>& slots, std::string* error) {
  dec_.reset();  // free the old caches before allocating new ones
  gpu::DecoderOptions o;
  o.device = opt_.device;
  o.n_ctx = opt_.n_ctx;
  o.max_tokens = opt_.max_tokens;
  // The A/B knobs (core/tuning.h): cuda_graphs 0 launches decode steps kernel
  // by kernel (a profiler then sees every kernel of a step; for measuring only).
  const Tuning& tune = tuning();
  o.use_graphs = opt_.use_graphs && tune.cuda_graphs;
  o.fused = tune.cuda_fused;
  o.pdl = tune.cuda_pdl;
  o.gemm_direct = tune.gemm_direct;
  o.expert_cache_slots = slots;
  o.layers = opt_.layers;
  o.nextn = opt_.nextn;
  o.nextn_layer = opt_.nextn_layer;
  o.sliding_history = kSlidingHistory;
  o.cpu = gpu::CpuExperts{cpu_.get(), &CpuExpertRunner::run_trampoline};
  o.stream_prefill = opt_.stream_prefill;
  o.peer_on_same_device_stand_in = opt_.peer_stand_in;
  for (size_t p = 0; p < peer_plans_.size(); ++p) {
    gpu::PeerOptions po;
    po.device = opt_.peer_devices[p];
    po.expert_cache_slots = peer_plans_[p].slots;
    o.peers.push_back(std::move(po));
  }
  o.host_copy = gpu::HostCopy{pool_, &GpuExecution::pool_copy};
  // staging_ring_mib 0 turns the pinned ring off (the driver's pageable
  // copies): for measuring one path against the other.
  if (tune.staging_ring_mib >= 0) o.staging_ring_bytes = static_cast<size_t>(tune.staging_ring_mib) << 20;
  dec_.reset(backend_->create(*hp_, *w_, o, error));
  if (!dec_) return false;
  // A rebuilt decoder must know which host stacks are pinned (stage 10).
  for (int l = 0; l < static_cast<int>(pinned_layers_.size()); ++l)
    if (pinned_layers_[l]) {
      const LayerWeights& L = w_->layers[l];
      if (!dec_->set_host_experts(l, L.gate_exps, L.up_exps, L.down_exps, true, error)) return false;
    }
  return true;
}

bool GpuExecution::plan_budget(const gpu::BackendV1& backend, const ModelHparams& hp, const ModelWeights& w,
                               const GpuLoadOptions& o, GpuBudget* out, json::Value* detail, std::string* error) {
  size_t free_b = 0, total_b = 0;
  if (!backend.device_memory(o.device, &free_b, &total_b, error)) return false;
  const int64_t avail = static_cast<int64_t>(free_b) - kGpuReserveBytes;
  const uint64_t budget = static_cast<uint64_t>(std::max<int64_t>(0, o.budget_bytes >= 0 ? std::min<int64_t>(o.budget_bytes, avail) : avail));

  gpu::DecoderOptions all;
  all.device = o.device;
  all.n_ctx = o.n_ctx;
  all.max_tokens = o.max_tokens;
  all.layers = o.layers;
  all.nextn = o.nextn;
  all.nextn_layer = o.nextn_layer;
  all.sliding_history = kSlidingHistory;
  gpu::DecoderMemory m_all, m_dense;
  if (!backend.estimate(hp, w, all, &m_all, error)) return false;
  gpu::DecoderOptions dense = all;
  dense.expert_cache_slots.assign(hp.n_layer, 0);
  if (!backend.estimate(hp, w, dense, &m_dense, error)) return false;
  out->stream_prefill = true;
  if (m_dense.total() > budget) {
    // No room for the prefill staging area: the CPU computes its experts in
    // prefill too.
    dense.stream_prefill = false;
    if (!backend.estimate(hp, w, dense, &m_dense, error)) return false;
    out->stream_prefill = false;
  }
  detail->set("prefill_staging_gib", m_dense.staging / kGiB);
  detail->set("device_free_gib", free_b / kGiB);
  detail->set("budget_gib", budget / kGiB);
  detail->set("all_on_gpu_gib", m_all.total() / kGiB);
  detail->set("dense_kv_scratch_gib", m_dense.total() / kGiB);

  const bool all_fit = hp.n_expert == 0 || (!o.experts_on_cpu && m_all.total() <= budget);
  if (!all_fit && m_dense.total() > budget) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "GPU budget of %.2f GiB cannot hold the dense weights, KV cache and workspace (%.2f GiB)", budget / kGiB,
                  m_dense.total() / kGiB);
    *error = buf;
    return false;
  }
  detail->set("mode", all_fit ? "all on the GPU" : o.experts_on_cpu ? "experts on the CPU" : "hybrid");
  out->budget = budget;
  out->all = m_all;
  out->dense = m_dense;
  out->all_fit = all_fit;
  return true;
}

std::unique_ptr<GpuExecution> GpuExecution::create(const gpu::BackendV1& backend, const ModelHparams& hp,
                                                   const ModelWeights& w, const CpuKernelTable& k, ThreadPool& pool,
                                                   const GpuLoadOptions& o, json::Value* detail, std::string* error) {
  std::unique_ptr<GpuExecution> g(new GpuExecution());
  g->backend_ = &backend;
  g->hp_ = &hp;
  g->w_ = &w;
  g->kernels_ = &k;
  g->pool_ = &pool;
  g->opt_ = o;
  if (!tuning().pool_hold) g->hold_pool_ = false;
  GpuBudget fit;
  if (!plan_budget(backend, hp, w, o, &fit, detail, error)) return nullptr;
  if (!fit.stream_prefill) g->opt_.stream_prefill = false;
  const uint64_t budget = fit.budget;
  const gpu::DecoderMemory& m_dense = fit.dense;
  const bool all_fit = fit.all_fit;
  gpu::DecoderOptions all;
  all.device = o.device;
  all.n_ctx = o.n_ctx;
  all.max_tokens = o.max_tokens;
  all.layers = o.layers;
  all.nextn = o.nextn;
  all.nextn_layer = o.nextn_layer;
  all.sliding_history = kSlidingHistory;
  g->expert_bytes_.assign(hp.n_layer, 0);
  for (int l = 0; l < hp.n_layer; ++l) g->expert_bytes_[l] = g->backend_->expert_cache_bytes(hp, w, l);
  if (all_fit) {
    g->plan_.slots.assign(hp.n_layer, 0);
    g->plan_.experts.assign(hp.n_layer, {});
    for (int l = 0; l < hp.n_layer; ++l)
      if (g->expert_bytes_[l]) {
        g->plan_.slots[l] = hp.n_expert;
        for (int e = 0; e < hp.n_expert; ++e) g->plan_.experts[l].push_back(e);
      }
    g->plan_.all_cached = true;
    g->plan_.expected_hit_rate = 1.0;
    g->dec_.reset(g->backend_->create(hp, w, all, error));
    if (!g->dec_) return nullptr;
    return g;
  }
  // Hybrid: the CPU runner first (the decoder's host nodes call it).
  g->cpu_ = std::make_unique<CpuExpertRunner>();
  if (!g->cpu_->init(hp, w, k, pool, o.max_tokens, o.pin_cpu, o.layers)) {
    *error = "out of memory for the CPU expert buffers";
    return nullptr;
  }
  g->cache_budget_ = o.experts_on_cpu ? 0 : budget - m_dense.total();
  PlacementInput in = g->placement_input({});
  // Peers: each device's budget for its cache, less its buffers.
  json::Value peers_json = json::Value::array();
  std::vector<uint64_t> budgets{g->cache_budget_};
  for (int d : o.peer_devices) {
    if (o.experts_on_cpu) break;
    size_t pf = 0, pt = 0;
    if (!g->backend_->device_memory(d, &pf, &pt, error)) return nullptr;
    const uint64_t buffers = static_cast<uint64_t>(o.max_tokens) * std::max(1, hp.n_expert_used) *
                                 (3ull * hp.n_ff_exp + hp.n_embd) * 4 * 2 + (uint64_t{64} << 20);
    const int64_t free_left = static_cast<int64_t>(pf) - kGpuReserveBytes - static_cast<int64_t>(buffers);
    int64_t b = o.peer_budget_bytes >= 0 ? o.peer_budget_bytes : free_left;
    if (d != o.device) b = std::min<int64_t>(b, free_left);
    b = std::max<int64_t>(0, b);
    budgets.push_back(static_cast<uint64_t>(b));
    g->peer_budgets_.push_back(static_cast<uint64_t>(b));
    json::Value pj = json::Value::object();
    pj.set("device", "cuda:" + std::to_string(d));
    if (d == o.device) pj.set("stand_in", "the primary device itself (one-GPU test stand-in)");
    pj.set("expert_cache_budget_gib", b / kGiB);
    peers_json.push_back(std::move(pj));
  }
  std::vector<PlacementPlan> plans = plan_devices_placement(in, budgets);
  g->plan_ = plans[0];
  g->peer_plans_.assign(plans.begin() + 1, plans.end());
  if (!g->peer_plans_.empty()) detail->set("peers", std::move(peers_json));
  detail->set("expert_cache_budget_gib", g->cache_budget_ / kGiB);
  if (!g->build_decoder(g->plan_.slots, error)) return nullptr;
  g->policy_.init(hp.n_layer, hp.n_expert, 0.5, 1.5, kPolicyMaxCopies);
  return g;
}

PlacementInput GpuExecution::placement_input(std::vector<uint32_t> counts) const {
  PlacementInput in;
  in.n_layer = hp_->n_layer;
  in.n_expert = hp_->n_expert;
  in.expert_bytes = expert_bytes_;
  in.budget_bytes = cache_budget_;
  in.counts = std::move(counts);
  return in;
}

bool GpuExecution::apply_plan(const PlacementPlan& plan, std::string* error) {
  for (int l = 0; l < hp_->n_layer; ++l)
    if (dec_->cache_slots(l) > 0 && !dec_->set_layer_experts(l, plan.experts[l], error)) return false;
  peer_fill_us_.resize(peer_plans_.size(), -1.0);  // a fill that copies nothing keeps the last measurement
  for (int p = 0; p < static_cast<int>(peer_plans_.size()) && p < dec_->peer_count(); ++p) {
    // Timed: the host-to-peer copy cost per expert (the peers' caches are
    // filled from empty here), recorded by calibration.
    uint64_t copied = 0;
    for (int l = 0; l < hp_->n_layer; ++l)
      for (int e : peer_plans_[p].experts[l]) copied += dec_->owner_of(l, e) != 1 + p;
    const auto t0 = Clock::now();
    for (int l = 0; l < hp_->n_layer; ++l)
      if (dec_->peer_cache_slots(p, l) > 0 && !dec_->set_peer_layer_experts(p, l, peer_plans_[p].experts[l], error))
        return false;
    if (copied > 0) peer_fill_us_[p] = ms_since(t0) * 1e3 / static_cast<double>(copied);
  }
  return true;
}

uint64_t GpuExecution::peer_experts() const {
  uint64_t n = 0;
  for (const PlacementPlan& p : peer_plans_)
    for (const auto& e : p.experts) n += e.size();
  return n;
}

bool GpuExecution::pin_ram_tier(ModelWeights& w, uint64_t ram_total, uint64_t ram_available, json::Value* detail) {
  if (!hybrid()) return false;
  auto not_pinned = [&](const char* note) {
    detail->set("pinned", false);
    detail->set("pin_note", note);
    return false;
  };
  if (!tuning().pin_experts)
    return not_pinned("pin_experts=0 (GUILD_PIN_EXPERTS): streamed copies go through the pinned staging ring");
  if (!backend_->host_alloc || !backend_->host_free) return not_pinned("the GPU package cannot allocate pinned memory");
  if (pool_->numa())
    return not_pinned("the experts are placed on NUMA nodes (stage 6): a pinned copy would move them to one node; "
                      "streamed copies go through the pinned staging ring");
  uint64_t expert_bytes = 0;
  for (int l = 0; l < hp_->n_layer; ++l) expert_bytes += expert_bytes_[l] * static_cast<uint64_t>(hp_->n_expert);
  // The copy must leave room for everything else: an eighth of RAM (at least
  // 2 GiB) stays available. The mapping's pages are clean page cache, which
  // the kernel reclaims, so they count as available.
  const uint64_t keep = std::max<uint64_t>(ram_total / 8, uint64_t{2} << 30);
  if (ram_available < keep || expert_bytes > ram_available - keep)
    return not_pinned("the experts do not fit in available RAM with an eighth kept free: streamed copies go through the "
                      "pinned staging ring");
  // One pinned block per expert stack (gate/up/down of each MoE layer), filled
  // by the pool; the model's weights then point at it, so the CPU expert pool
  // and the GPU's copies read the same bytes.
  const auto t0 = Clock::now();
  std::string why;
  uint64_t bytes = 0;
  int layers_done = 0;
  for (int l = 0; l < hp_->n_layer && why.empty(); ++l) {
    if (!expert_bytes_[l]) continue;
    LayerWeights& L = w.layers[l];
    for (ExpertMatrices* m : {&L.gate_exps, &L.up_exps, &L.down_exps}) {
      const size_t n = m->expert_bytes * static_cast<size_t>(m->n_expert);
      void* block = backend_->host_alloc(n, &why);
      if (!block) break;
      pool_copy(pool_, block, m->first.data, n);
      // The mapping's pages of this stack are not read any more: unmapping
      // them keeps the process's resident size honest (they stay in the page
      // cache, reclaimable, and fault back in if the pointers are restored).
      const uintptr_t page = 4096, a = reinterpret_cast<uintptr_t>(m->first.data);
      const uintptr_t lo = (a + page - 1) / page * page, hi = (a + n) / page * page;
      if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
      pinned_.push_back(PinnedStack{block, m->first.data, m});
      m->first.data = static_cast<const uint8_t*>(block);
      bytes += n;
    }
    if (!why.empty()) {
      // This layer stays on the mapping (its stacks must move together).
      while (!pinned_.empty() && pinned_.back().where >= &L.gate_exps && pinned_.back().where <= &L.down_exps) {
        bytes -= pinned_.back().where->expert_bytes * static_cast<size_t>(pinned_.back().where->n_expert);
        pinned_.back().where->first.data = pinned_.back().original;
        backend_->host_free(pinned_.back().block);
        pinned_.pop_back();
      }
      break;
    }
    std::string err;
    if (!dec_->set_host_experts(l, L.gate_exps, L.up_exps, L.down_exps, true, &err)) {
      why = err;
      break;
    }
    pinned_layers_.resize(hp_->n_layer, false);
    pinned_layers_[l] = true;
    ++layers_done;
  }
  detail->set("pinned", layers_done > 0);
  detail->set("pinned_bytes", static_cast<unsigned long long>(bytes));
  detail->set("pinned_layers", layers_done);
  detail->set("pin_ms", ms_since(t0));
  if (!why.empty()) detail->set("pin_note", "stopped: " + why);
  return layers_done > 0;
}

bool GpuExecution::fill_initial(json::Value* detail, std::string* error) {
  if (!hybrid()) {
    detail->set("gpu_experts", static_cast<unsigned long long>(cached_experts()));
    detail->set("cpu_experts", 0);
    return true;
  }
  const auto t0 = Clock::now();
  if (!apply_plan(plan_, error)) return false;
  const double ms = ms_since(t0);
  const uint64_t n = cached_experts();
  detail->set("gpu_experts", static_cast<unsigned long long>(n));
  detail->set("cache_bytes", static_cast<unsigned long long>(plan_.bytes));
  detail->set("copy_ms", ms);
  if (n > 0 && ms > 0) detail->set("copy_gbps", plan_.bytes / (ms * 1e-3) / 1e9);
  return true;
}

bool GpuExecution::calibrate(const std::vector<int32_t>& tokens, json::Value* detail, json::Value* layers,
                             std::string* error) {
  const ModelHparams& hp = *hp_;
  auto layer_json = [&](int l, double cpu_us, double copy_us) {
    json::Value v = json::Value::object();
    const bool moe = expert_bytes_[l] > 0;
    v.set("dense", !moe);
    v.set("gpu_experts", moe ? plan_.slots[l] : 0);
    int on_peers = 0;
    if (moe && !peer_plans_.empty()) {
      json::Value pe = json::Value::array();
      for (const PlacementPlan& pp : peer_plans_) {
        pe.push_back(pp.slots[l]);
        on_peers += pp.slots[l];
      }
      v.set("peer_experts", std::move(pe));
    }
    v.set("cpu_experts", moe ? hp.n_expert - plan_.slots[l] - on_peers : 0);
    if (moe && hybrid()) {
      json::Value ids = json::Value::array();
      for (int e : plan_.experts[l]) ids.push_back(e);
      v.set("cached", std::move(ids));
      if (cpu_us >= 0) v.set("cpu_us_per_expert", cpu_us);
      if (copy_us >= 0) v.set("copy_us_per_expert", copy_us);
      if (cpu_us >= 0 && copy_us >= 0)
        v.set("cold_expert", copy_us < cpu_us ? "copy is cheaper than one CPU token" : "compute on the CPU");
    }
    return v;
  };
  if (!hybrid()) {
    detail->set("plan", "all experts on the GPU");
    detail->set("reason", "the GPU budget holds every expert: nothing to calibrate");
    for (int l = 0; l < hp.n_layer; ++l) layers->push_back(layer_json(l, -1, -1));
    return true;
  }
  std::vector<uint32_t> counts;
  if (!dec_->routing_counts(&counts, true, error)) return false;
  std::vector<json::Value> peers_detail;  // calibration.peers, completed with the CPU's costs below
  std::vector<double> peer_round_us;
  // 1. Routing statistics from the calibration text.
  const int n = static_cast<int>(std::min<size_t>(tokens.size(), static_cast<size_t>(std::min(opt_.n_ctx, 512))));
  // In two halves: a plan fit on the first half is scored on the second, an
  // honest estimate of the hit rate on text the plan has not seen (the
  // in-sample rate of the final plan is optimistic).
  double prefill_ms = 0;
  double held_out_hit = -1;
  if (n > 0 && plan_.bytes > 0) {
    const int half = n >= 64 ? n / 2 : n;
    const auto t0 = Clock::now();
    if (!forward(tokens.data(), half, 0, nullptr, false, error)) return false;
    std::vector<uint32_t> first;
    if (!dec_->routing_counts(&first, true, error)) return false;
    if (half < n && !forward(tokens.data() + half, n - half, half, nullptr, false, error)) return false;
    prefill_ms = ms_since(t0);
    if (!dec_->routing_counts(&counts, true, error)) return false;
    if (half < n) {
      const PlacementPlan fit = plan_expert_placement(placement_input(first));
      double hit = 0, total = 0;
      for (int l = 0; l < hp.n_layer; ++l) {
        if (!expert_bytes_[l]) continue;
        for (int e = 0; e < hp.n_expert; ++e) total += counts[static_cast<size_t>(l) * hp.n_expert + e];
        for (int e : fit.experts[l]) hit += counts[static_cast<size_t>(l) * hp.n_expert + e];
      }
      if (total > 0) held_out_hit = hit / total;
    }
    for (size_t i = 0; i < counts.size() && i < first.size(); ++i) counts[i] += first[i];
    kv_owner = 0;
    kv_tokens = 0;
  }
  if (held_out_hit >= 0) detail->set("held_out_hit_rate", held_out_hit);
  detail->set("calibration_tokens", n);
  detail->set("calibration_prefill_ms", prefill_ms);
  // 2. The plan from the statistics: the same budget, hottest experts per byte.
  if (n > 0 && plan_.bytes > 0) {
    std::vector<uint64_t> budgets{cache_budget_};
    budgets.insert(budgets.end(), peer_budgets_.begin(), peer_budgets_.end());
    std::vector<PlacementPlan> plans = plan_devices_placement(placement_input(counts), budgets);
    PlacementPlan next = plans[0];
    bool reshape = next.slots != plan_.slots;
    for (size_t p = 0; p < peer_plans_.size(); ++p) reshape = reshape || plans[p + 1].slots != peer_plans_[p].slots;
    peer_plans_.assign(plans.begin() + 1, plans.end());
    if (reshape && !build_decoder(next.slots, error)) return false;
    plan_ = next;
    if (!apply_plan(plan_, error)) return false;
    for (size_t p = 0; p < peer_plans_.size(); ++p) {
      json::Value v = json::Value::object();
      v.set("device", "cuda:" + std::to_string(opt_.peer_devices[p]));
      v.set("experts", static_cast<unsigned long long>(std::accumulate(
                           peer_plans_[p].slots.begin(), peer_plans_[p].slots.end(), 0ull)));
      v.set("cache_bytes", static_cast<unsigned long long>(peer_plans_[p].bytes));
      v.set("expected_hit_rate", peer_plans_[p].expected_hit_rate);
      if (p < peer_fill_us_.size() && peer_fill_us_[p] > 0) v.set("copy_us_per_expert", peer_fill_us_[p]);
      // One token's round trip through the peer in its first layer with
      // experts (activations over, k of its experts, output back), and the
      // two activation copies alone.
      for (int l = 0; l < hp.n_layer; ++l) {
        if (dec_->peer_cache_slots(static_cast<int>(p), l) == 0) continue;
        const double round = dec_->measure_token_experts_us(1 + static_cast<int>(p), l, false, error);
        const double copies = round < 0 ? -1 : dec_->measure_token_experts_us(1 + static_cast<int>(p), l, true, error);
        if ((round < 0 || copies < 0) && !error->empty()) return false;
        if (round > 0) v.set("token_round_trip_us", round);
        if (copies > 0) v.set("activation_copies_us", copies);
        if (round > 0 && copies > 0) v.set("compute_us_per_expert", std::max(0.0, round - copies) / hp.n_expert_used);
        peer_round_us.push_back(round);
        break;
      }
      if (peer_round_us.size() <= p) peer_round_us.push_back(-1);
      peers_detail.push_back(std::move(v));
    }
    detail->set("cache_reshaped", reshape);
    // Seed the online policy with the calibration counts.
    policy_.init(hp.n_layer, hp.n_expert, 0.5, 1.5, kPolicyMaxCopies);
    policy_.update(counts, [](int, int) { return -1; }, [](int) { return 0; });
  }
  detail->set("expected_hit_rate", plan_.expected_hit_rate);

  // 3. Costs: one token's experts on the CPU per layer (the k hottest uncached
  // experts, timed twice, the faster kept), one expert's copy to the GPU.
  std::vector<float> xn(hp.n_embd, 0.01f), out(hp.n_embd);
  std::vector<int32_t> ids(hp.n_expert_used);
  std::vector<float> wts(hp.n_expert_used, 1.0f / hp.n_expert_used);
  std::vector<int32_t> all_cpu(hp.n_expert, -1);
  double cpu_total_us = 0;
  int moe_layers = 0;
  std::vector<double> cpu_us(hp.n_layer, -1);
  for (int l = 0; l < hp.n_layer; ++l) {
    if (!expert_bytes_[l]) continue;
    for (int j = 0; j < hp.n_expert_used; ++j) ids[j] = (j * 7 + l) % hp.n_expert;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    while (static_cast<int>(ids.size()) < hp.n_expert_used) ids.push_back((ids.back() + 1) % hp.n_expert);
    double best = 1e30;
    for (int rep = 0; rep < 2; ++rep) {
      const auto t0 = Clock::now();
      cpu_->run(l, 1, xn.data(), ids.data(), wts.data(), all_cpu.data(), out.data());
      best = std::min(best, ms_since(t0) * 1e3);
    }
    cpu_us[l] = best / hp.n_expert_used;
    cpu_total_us += cpu_us[l];
    ++moe_layers;
  }
  // Copy cost: re-copy one cached expert of the first layer with a cache.
  double copy_us = -1;
  for (int l = 0; l < hp.n_layer && copy_us < 0; ++l) {
    if (dec_->cache_slots(l) == 0 || plan_.experts[l].empty()) continue;
    const int e = plan_.experts[l].back();
    const int slot = dec_->slot_of(l, e);
    const auto t0 = Clock::now();
    if (!dec_->set_cached_expert(l, slot, -1, error) || !dec_->set_cached_expert(l, slot, e, error)) return false;
    copy_us = ms_since(t0) * 1e3;
  }
  if (moe_layers) detail->set("cpu_us_per_expert_mean", cpu_total_us / moe_layers);
  if (copy_us >= 0) detail->set("copy_us_per_expert", copy_us);
  // The primary's cost for one token's k cached experts (first layer with a cache).
  double gpu_us = -1;
  for (int l = 0; l < hp.n_layer; ++l) {
    if (dec_->cache_slots(l) == 0) continue;
    const double us = dec_->measure_token_experts_us(0, l, false, error);
    if (us < 0 && !error->empty()) return false;
    if (us > 0) gpu_us = us / hp.n_expert_used;
    break;
  }
  if (gpu_us > 0) detail->set("gpu_us_per_expert", gpu_us);
  if (!plan_host_choices(cpu_total_us, moe_layers, gpu_us, held_out_hit, detail, error)) return false;
  // Each peer against the CPU: per token and layer it takes k * its share of
  // the choices, which the CPU would otherwise compute; all three run at the
  // same time, so the peer pays when its round trip is shorter than that.
  if (!peers_detail.empty()) {
    json::Value pj = json::Value::array();
    for (size_t p = 0; p < peers_detail.size(); ++p) {
      json::Value& v = peers_detail[p];
      const double saved = moe_layers ? hp.n_expert_used * peer_plans_[p].expected_hit_rate * cpu_total_us / moe_layers : 0;
      v.set("cpu_us_saved_per_layer", saved);
      if (peer_round_us[p] > 0) v.set("pays_off", peer_round_us[p] < saved);
      pj.push_back(std::move(v));
    }
    detail->set("peers", std::move(pj));
  }
  // Prefill: stream a layer's uncached experts when computing them on the CPU
  // would cost more (prefill_stream_threshold). The CPU's batch cost: t_ref
  // tokens all routed to the same k experts, per expert, on the first MoE layer.
  double batch_us = -1;
  const int t_ref = std::min(32, opt_.max_tokens);
  for (int l = 0; l < hp.n_layer && batch_us < 0 && t_ref >= 2; ++l) {
    if (!expert_bytes_[l]) continue;
    std::vector<float> xb(static_cast<size_t>(t_ref) * hp.n_embd, 0.01f), ob(xb.size());
    std::vector<int32_t> ib(static_cast<size_t>(t_ref) * hp.n_expert_used);
    std::vector<float> wb(ib.size(), 1.0f / hp.n_expert_used);
    for (size_t i = 0; i < ib.size(); ++i) ib[i] = static_cast<int32_t>(i % hp.n_expert_used);
    double best = 1e30;
    for (int rep = 0; rep < 2; ++rep) {
      const auto t0 = Clock::now();
      cpu_->run(l, t_ref, xb.data(), ib.data(), wb.data(), all_cpu.data(), ob.data());
      best = std::min(best, ms_since(t0) * 1e3);
    }
    batch_us = best / hp.n_expert_used;
  }
  if (batch_us > 0) detail->set("cpu_us_per_expert_batch", batch_us);
  detail->set("cpu_batch_tokens", t_ref);
  if (dec_->stream_min_tokens() > 0) {
    StreamCosts sc;
    sc.uncached_per_layer = moe_layers ? (static_cast<double>(moe_layers) * hp.n_expert - static_cast<double>(cached_experts())) / moe_layers : 0;
    sc.k = hp.n_expert_used;
    const double all_experts = static_cast<double>(moe_layers) * hp.n_expert;
    sc.miss_rate = prefill_miss_rate(1.0 - (held_out_hit >= 0 ? held_out_hit : plan_.expected_hit_rate),
                                     all_experts > 0 ? static_cast<double>(cached_experts()) / all_experts : 0.0);
    detail->set("prefill_planned_miss_rate", sc.miss_rate);
    sc.cpu_us_1 = moe_layers ? cpu_total_us / moe_layers : 0;
    sc.cpu_us_batch = batch_us;
    sc.t_ref = t_ref;
    // The streamed path's own cost per uncached expert (the ring when there is one).
    // Twice, the faster counts: the first pass also pays for first touches
    // of mapped pages, which a real prefill has paid long before.
    double stream_us = -1;
    for (int l = 0; l < hp.n_layer && stream_us < 0; ++l) {
      if (!expert_bytes_[l]) continue;
      for (int rep = 0; rep < 2; ++rep) {
        const double us = dec_->measure_stream_us_per_expert(l, error);
        if (us < 0 && !error->empty()) return false;
        if (us > 0 && (stream_us < 0 || us < stream_us)) stream_us = us;
      }
    }
    if (stream_us > 0) detail->set("stream_us_per_expert", stream_us);
    sc.copy_us = stream_us > 0 ? stream_us : copy_us;
    // Without a measured copy cost (nothing is cached) the threshold is 0: the CPU computes its experts.
    dec_->set_stream_min_tokens(prefill_stream_threshold(sc, opt_.max_tokens));
  }
  // prefill_stream_min N overrides the rule (0: never stream), for measuring one path against the other.
  if (const int n = tuning().prefill_stream_min; n >= 0 && hybrid()) {
    dec_->set_stream_min_tokens(n);
    detail->set("prefill_stream_min_tokens_override", dec_->stream_min_tokens());
  }
  detail->set("prefill_stream_min_tokens", dec_->stream_min_tokens());
  detail->set("prefill_policy", dec_->stream_min_tokens() > 0
                                    ? "steps of at least prefill_stream_min_tokens tokens copy each layer's uncached "
                                      "experts to the GPU; smaller steps compute them on the CPU"
                                    : !hybrid() || dec_->memory().staging == 0
                                        ? "the CPU computes its experts in every step (no staging area)"
                                        : "the CPU computes its experts in every step (streaming measured slower)");
  detail->set("online_policy", opt_.online_policy ? "on: every 16 decode steps at most 2 expert copies, each only when "
                                                    "the expert's decayed routing count beats the coldest cached one by 1.5x"
                                                  : "off");
  for (int l = 0; l < hp.n_layer; ++l) layers->push_back(layer_json(l, cpu_us[l], copy_us));
  return true;
}

// Decode's split of the CPU's choices (docs/CUDA.md, "GPU reads of host
// experts"): with the experts page-locked, the GPU can compute some of the
// choices the CPU would, reading those experts from host memory over PCIe
// while the CPU computes the rest. Per token and layer the CPU has m = k x
// miss rate choices; giving the GPU g of them costs max((m - g) x cpu,
// cached + g x host): the g that minimises it, from the measured costs.
bool GpuExecution::plan_host_choices(double cpu_total_us, int moe_layers, double gpu_us, double held_out_hit,
                                     json::Value* detail, std::string* error) {
  const ModelHparams& hp = *hp_;
  const int k = hp.n_expert_used;
  double host_us = -1;
  for (int l = 0; l < hp.n_layer && moe_layers > 0; ++l) {
    if (!expert_bytes_[l]) continue;
    const double us = dec_->measure_token_experts_us(-1, l, false, error);
    if (us < 0 && !error->empty()) return false;
    if (us > 0) host_us = us / k;
    break;
  }
  split_costs_ = HostSplitCosts{};
  split_costs_.k = k;
  split_costs_.cpu_us = moe_layers ? cpu_total_us / moe_layers : 0;
  split_costs_.host_us = host_us;
  split_costs_.cached_us = gpu_us > 0 ? gpu_us * k : 0;  // scaled by the hit rate below
  const double hit = held_out_hit >= 0 ? held_out_hit : plan_.expected_hit_rate;
  int g = 0;
  if (host_us > 0) {
    detail->set("gpu_host_us_per_expert", host_us);
    const HostSplit split = plan_host_split(split_with_hit(hit));
    g = split.choices;
    detail->set("gpu_host_layer_us_estimate", split.layer_us);
  }
  // gpu_host_choices N overrides the rule (0: the CPU computes all its choices), for measuring.
  if (const int n = tuning().gpu_host_choices; n >= 0) {
    g = n;
    detail->set("gpu_host_choices_override", g);
    split_costs_.host_us = -1;  // fixed: the online re-plan leaves it alone
  }
  g = std::clamp(g, 0, k);  // as the decoder takes it
  const int layers = dec_->set_host_choices(g);
  host_choices_ = layers > 0 ? g : 0;
  if (layers == 0) split_costs_.host_us = -1;
  detail->set("gpu_host_choices", host_choices_);
  detail->set("gpu_host_layers", layers);
  return true;
}

HostSplitCosts GpuExecution::split_with_hit(double hit) const {
  HostSplitCosts c = split_costs_;
  c.miss_rate = 1.0 - std::clamp(hit, 0.0, 1.0);
  c.cached_us = split_costs_.cached_us * std::clamp(hit, 0.0, 1.0);
  return c;
}

// Every policy window: the GPU's share of the CPU's choices re-planned from
// the hit rate seen in the window (the calibration text's may not be the
// traffic's); changed only when the estimate improves by 5 % or more, since a
// change recaptures the decode graph.
void GpuExecution::replan_host_choices(uint64_t hits, uint64_t choices) {
  if (split_costs_.host_us <= 0 || choices < 64) return;
  const HostSplitCosts c = split_with_hit(static_cast<double>(hits) / static_cast<double>(choices));
  const HostSplit best = plan_host_split(c);
  if (best.choices == host_choices_ || best.layer_us > 0.95 * host_split_layer_us(c, host_choices_)) return;
  if (dec_->set_host_choices(best.choices) > 0 || best.choices == 0) {
    host_choices_ = best.choices;
    ++host_replans_;
  }
}

bool GpuExecution::drain_counts() {
  std::string err;
  if (!dec_->routing_counts(&counts_, true, &err)) return false;
  uint64_t hits = 0, choices = 0;
  for (int l = 0; l < hp_->n_layer; ++l)
    for (int e = 0; e < hp_->n_expert; ++e) {
      const uint32_t c = counts_[static_cast<size_t>(l) * hp_->n_expert + e];
      choices += c;
      if (dec_->slot_of(l, e) >= 0) hits += c;
    }
  choices_ += choices;
  hits_ += hits;
  window_choices_ += choices;
  window_hits_ += hits;
  return true;
}

void GpuExecution::online_step() {
  // With peers the plan stays as calibrated: the policy moves experts into the
  // primary's cache only and would take hot ones from the peers for nothing.
  if (!drain_counts() || !opt_.online_policy || !peer_plans_.empty()) return;
  replan_host_choices(window_hits_, window_choices_);
  window_hits_ = window_choices_ = 0;
  std::string err;
  const auto swaps = policy_.update(
      counts_, [&](int l, int s) { return dec_->cached_expert(l, s); }, [&](int l) { return dec_->cache_slots(l); });
  for (const auto& s : swaps) {
    if (!dec_->set_cached_expert(s.layer, s.slot, s.expert, &err)) return;
    ++swaps_;
    auto& ex = plan_.experts[s.layer];
    if (s.evicted >= 0) std::replace(ex.begin(), ex.end(), s.evicted, s.expert);
    else ex.push_back(s.expert);
  }
}

double GpuExecution::take_hit_rate() {
  if (hybrid()) drain_counts();
  const double r = choices_ ? static_cast<double>(hits_) / static_cast<double>(choices_) : (hybrid() ? 0.0 : 1.0);
  hits_ = choices_ = 0;
  return r;
}

bool GpuExecution::forward(const int32_t* tokens, int n, int pos0, float* logits, bool all_rows, std::string* error,
                           int32_t* argmax) {
  const int T = dec_->max_tokens();
  // Hybrid: the CPU expert server issues pool loops once per MoE layer; the
  // workers keep spinning for the whole forward instead of sleeping between
  // layers (GUILD_POOL_HOLD=0 turns this off, for measuring).
  struct Hold {
    ThreadPool* pool;
    explicit Hold(ThreadPool* p) : pool(p) {
      if (pool) pool->set_hold(true);
    }
    ~Hold() {
      if (pool) pool->set_hold(false);
    }
  } hold(hybrid() && hold_pool_ ? pool_ : nullptr);
  int done = 0;
  while (done < n) {
    const int c = std::min(T, n - done);
    const bool last = done + c == n;
    float* out = logits ? (all_rows ? logits + static_cast<int64_t>(done) * hp_->n_vocab : (last ? logits : nullptr)) : nullptr;
    int32_t* am = argmax ? (all_rows ? argmax + done : (last ? argmax : nullptr)) : nullptr;
    if (!dec_->forward(tokens + done, c, pos0 + done, out, all_rows, error, am)) return false;
    done += c;
  }
  if (hybrid() && n == 1 && ++steps_since_policy_ >= kPolicyWindowSteps) {
    steps_since_policy_ = 0;
    online_step();
  }
  return true;
}

void GpuExecutionDeleter::operator()(GpuExecution* g) const { delete g; }

}  // namespace guild

