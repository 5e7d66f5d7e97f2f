// The CPU half of hybrid MoE execution: computes the routed experts that the
// GPU does not cache, for the tokens of one step, while the GPU computes its
// own (docs/CUDA.md, "Hybrid MoE"). It is called from a CUDA host node, so it
// allocates nothing per call and never touches CUDA; the CudaDecoder hands it
// pinned host copies of the layer's normed input and routing.
#pragma once
#include <cstdint>
#include <vector>

#include "core/kernel_table.h"
#include "core/thread_pool.h"
#include "models/hparams.h"
#include "models/recipe.h"
#include "models/weights.h"
#include "ops/moe.h"

namespace guild {

class CpuExpertRunner {
 public:
  // Sizes every buffer for steps of up to max_tokens tokens; false when out of memory.
  // pin_cpu >= 0: the calling thread (CUDA's host-callback thread) is pinned
  // there on its first call, as worker 0 of the pool. layers: the recipe's
  // step parameters (ModelRecipe::executor_layers; empty: bias-free SwiGLU
  // experts), whose gated unit and expert biases run() applies.
  bool init(const ModelHparams& hp, const ModelWeights& w, const CpuKernelTable& kernels, ThreadPool& pool,
            int max_tokens, int pin_cpu, const std::vector<ExecutorLayer>& layers = {});

  // out[t] = sum over choices j of token t whose expert has slot_of[e] < 0 of
  // weights[t*k+j] * expert_e(xn[t]) (its down bias included), in choice
  // order; zeros where none.
  void run(int layer, int n_tokens, const float* xn, const int32_t* ids, const float* weights, const int32_t* slot_of,
           float* out);

  // The CpuExperts::run trampoline (ctx = this).
  static void run_trampoline(void* ctx, int layer, int n_tokens, const float* xn, const int32_t* ids,
                             const float* weights, const int32_t* slot_of, float* out);

  // Experts computed and steps run so far (for stats).
  uint64_t experts_computed() const { return experts_computed_; }
  // Time spent in run() (one clock read at each end of a layer's call).
  double busy_ms() const { return busy_ns_ * 1e-6; }

 private:
  const ModelHparams* hp_ = nullptr;
  const ModelWeights* w_ = nullptr;
  const CpuKernelTable* kernels_ = nullptr;
  ThreadPool* pool_ = nullptr;
  int max_tokens_ = 0;
  int pin_cpu_ = -1;
  std::vector<ExecutorLayer> layers_;  // [n_layer] or empty
  ExpertRouting routing_;
  std::vector<uint8_t> act_x_;          // [T][act row] the normed input in gate's vec_dot_type
  std::vector<const uint8_t*> x_rows_;  // [T]
  std::vector<float> gate_, up_;        // [T*k][n_ff]
  std::vector<uint8_t> act_down_;       // [T*k][act row of down]
  std::vector<const uint8_t*> slot_rows_;
  std::vector<float> y_;                // [T*k][n_embd] per-slot expert outputs
  uint64_t experts_computed_ = 0;
  uint64_t busy_ns_ = 0;
};

}  // namespace guild
