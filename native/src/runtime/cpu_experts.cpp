#include "runtime/cpu_experts.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>

#include "ops/matmul.h"

namespace guild {

bool CpuExpertRunner::init(const ModelHparams& hp, const ModelWeights& w, const CpuKernelTable& kernels,
                           ThreadPool& pool, int max_tokens, int pin_cpu, const std::vector<ExecutorLayer>& layers) {
  if (!layers.empty() && layers.size() != w.layers.size()) return false;
  layers_ = layers;
  hp_ = &hp;
  w_ = &w;
  kernels_ = &kernels;
  pool_ = &pool;
  max_tokens_ = max_tokens;
  pin_cpu_ = pin_cpu;
  const int k = std::max(1, hp.n_expert_used);
  const size_t T = static_cast<size_t>(max_tokens);
  const size_t n_ff = static_cast<size_t>(std::max(1, hp.n_ff_exp));
  // F32 (4 bytes per element) is the widest activation encoding.
  try {
    routing_.reserve(max_tokens, k, std::max(1, hp.n_expert));
    act_x_.resize(T * hp.n_embd * 4);
    x_rows_.resize(T);
    gate_.resize(T * k * n_ff);
    up_.resize(T * k * n_ff);
    act_down_.resize(T * k * n_ff * 4);
    slot_rows_.resize(T * k);
    y_.resize(T * k * hp.n_embd);
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

void CpuExpertRunner::run_trampoline(void* ctx, int layer, int n_tokens, const float* xn, const int32_t* ids,
                                     const float* weights, const int32_t* slot_of, float* out) {
  static_cast<CpuExpertRunner*>(ctx)->run(layer, n_tokens, xn, ids, weights, slot_of, out);
}

void CpuExpertRunner::run(int layer, int n, const float* xn, const int32_t* ids, const float* weights,
                          const int32_t* slot_of, float* out) {
  const ModelHparams& hp = *hp_;
  const LayerWeights& L = w_->layers[layer];
  const int k = hp.n_expert_used;
  const int64_t d = hp.n_embd;
  // Whichever thread calls (the CUDA decoder's expert server, or the loading
  // thread during calibration) is the pool's worker 0: pin it once.
  thread_local const CpuExpertRunner* pinned_for = nullptr;
  if (pinned_for != this) {
    if (pin_cpu_ >= 0) pin_current_thread(pin_cpu_);
    pinned_for = this;
  }
  n = std::min(n, max_tokens_);
  const auto t0 = std::chrono::steady_clock::now();
  struct AddBusy {
    uint64_t* acc;
    std::chrono::steady_clock::time_point t0;
    ~AddBusy() {
      *acc += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
  } add_busy{&busy_ns_, t0};

  // The routing restricted to the CPU's choices: slots of cached experts are
  // left out of the grouping, so moe_ffn never computes them.
  ExpertRouting& r = routing_;
  r.n_tokens = n;
  r.k = k;
  r.n_expert = hp.n_expert;
  const int n_slots = n * k;
  std::copy(ids, ids + n_slots, r.ids.begin());
  std::copy(weights, weights + n_slots, r.weights.begin());
  const int cpu_slots = group_slots_by_expert(&r, slot_of);
  if (cpu_slots == 0) {
    std::memset(out, 0, static_cast<size_t>(n) * d * sizeof(float));
    return;
  }

  quantize_activations(*pool_, *kernels_, L.gate_exps.first, xn, d, n, act_x_.data());
  const size_t rb = act_row_bytes(L.gate_exps.first);
  for (int t = 0; t < n; ++t) x_rows_[t] = act_x_.data() + t * rb;
  MoeBuffers buf;
  buf.gate = gate_.data();
  buf.up = up_.data();
  buf.act_down = act_down_.data();
  buf.slot_rows = slot_rows_.data();
  ExpertHidden hidden;
  const float* down_bias = nullptr;
  if (!layers_.empty()) {
    const RoutedExpertsStep& e = layers_[static_cast<size_t>(layer)].experts;
    hidden.glu = e.glu;
    if (e.expert_bias) {
      hidden.gate_bias = L.gate_exps_bias;
      hidden.up_bias = L.up_exps_bias;
      down_bias = L.down_exps_bias;
    }
  }
  moe_ffn(*pool_, *kernels_, L.gate_exps, L.up_exps, L.down_exps, r, x_rows_.data(), buf, y_.data(), d, hidden);
  experts_computed_ += static_cast<uint64_t>(cpu_slots);

  // Weighted sum in choice order (as the CPU decoder sums them). Tokens are
  // independent: a prompt step's are spread over the pool (serially, its
  // sums and zero rows took ~0.2 ms per layer of a 512-token step).
  auto sum_tokens = [&](int t0, int t1) {
    for (int t = t0; t < t1; ++t) {
      float* o = out + t * d;
      bool any = false;
      for (int j = 0; j < k; ++j) {
        const int s = t * k + j;
        if (ids[s] < 0 || slot_of[ids[s]] >= 0) continue;  // computed by the GPU
        const float wj = weights[s];
        float* y = y_.data() + static_cast<int64_t>(s) * d;
        if (down_bias) {  // as the CPU decoder: the bias joins the expert's output before the weight
          const float* bd = down_bias + static_cast<int64_t>(ids[s]) * d;
          for (int64_t i = 0; i < d; ++i) y[i] += bd[i];
        }
        if (!any) for (int64_t i = 0; i < d; ++i) o[i] = y[i] * wj;
        else      for (int64_t i = 0; i < d; ++i) o[i] += y[i] * wj;
        any = true;
      }
      if (!any) std::memset(o, 0, static_cast<size_t>(d) * sizeof(float));
    }
  };
  constexpr int kTokensPerTask = 16;
  if (n < 2 * kTokensPerTask) {
    sum_tokens(0, n);
    return;
  }
  pool_->parallel_for((n + kTokensPerTask - 1) / kTokensPerTask, [&](int64_t task, int) {
    const int t0 = static_cast<int>(task) * kTokensPerTask;
    sum_tokens(t0, std::min(n, t0 + kTokensPerTask));
  });
}

}  // namespace guild
