// An architecture's decoder layers as steps of a small executor vocabulary
// (docs/NATIVE.md, "Adding an architecture"). Each models/<arch>.cpp writes
// its layers with these steps once, at load; the CPU executor
// (models/decoder_forward.cpp) runs them and knows no architecture. What an
// architecture needs beyond the standard decoder (biases, sinks, sliding
// windows, another gating or GLU) is an explicit parameter of its step.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/hparams.h"
#include "models/weights.h"
#include "ops/glu.h"

namespace guild {

// How a router's logits choose experts and weigh them.
enum class Gating : uint8_t {
  SoftmaxTopkRenorm,  // softmax over all experts, top-k, the k weights renormalised (qwen3moe, Mixtral)
  TopkSoftmax,        // top-k of the logits, softmax over those k (gpt-oss)
  SigmoidTopk,        // sigmoid of each logit; top-k of sigmoid + exp_probs_b; the k unbiased
                      // sigmoids, renormalised when `renorm` (glm4moe, deepseek-v3)
};

// q/k/v projections (+ biases), per-head q/k RMSNorm, rope, KV store, causal
// attention (optionally windowed, optionally with a learned sink logit per
// head in every softmax), output projection (+ bias) into block_out.
struct AttentionStep {
  bool qkv_bias = false;   // LayerWeights::bq/bk/bv
  bool out_bias = false;   // LayerWeights::bo
  bool qk_norm = false;    // LayerWeights::q_norm/k_norm, before rope
  bool sinks = false;      // LayerWeights::attn_sinks [n_head], unscaled logits
  int sliding_window = 0;  // keys per query, itself included; 0 = all earlier positions
};

// Router (+ bias), gating, every routed expert's gate/up (+ biases), GLU and
// down (+ bias), summed with the routing weights into block_out.
struct RoutedExpertsStep {
  Gating gating = Gating::SoftmaxTopkRenorm;
  bool router_bias = false;  // LayerWeights::router_bias [n_expert]
  bool expert_bias = false;  // LayerWeights::gate/up/down_exps_bias
  bool choice_bias = false;  // LayerWeights::exp_probs_b (SigmoidTopk)
  bool renorm = false;       // SigmoidTopk: weights divided by their sum
  float scale = 1.0f;        // SigmoidTopk: the routing weights' factor (expert_weights_scale)
  bool shared_expert = false;  // + the shared expert (LayerWeights::shexp_*, SwiGLU) of the same input
  GluParams glu;
};

enum class StepKind : uint8_t {
  Norm,           // xn = rms_norm(x) * weight
  Attention,      // block_out = attention(xn)
  RoutedExperts,  // block_out = Σ w_j expert_j(xn)
  DenseFfn,       // block_out = down(glu(gate(xn), up(xn)))
  Residual,       // x += block_out
};

struct RecipeStep {  // one step of a layer: its kind and, for that kind, its parameters
  StepKind kind = StepKind::Norm;
  const float* norm = nullptr;  // Norm: its weight [n_embd]
  AttentionStep attention;
  RoutedExpertsStep experts;
  GluParams dense_glu;  // DenseFfn
};

struct LayerRecipe {
  std::vector<RecipeStep> steps;
};

// One trunk layer of the standard shape (norm, attention, residual, norm,
// FFN, residual) as the CUDA executor takes it: the parameters of its
// attention and FFN steps (gpu::DecoderOptions::layers).
struct ExecutorLayer {
  AttentionStep attention;
  bool moe = false;
  RoutedExpertsStep experts;  // moe
  GluParams dense_glu;        // !moe
};

struct ModelRecipe {
  std::vector<LayerRecipe> layers;  // [n_layer]
  std::vector<LayerRecipe> nextn;   // [n_nextn]: the MTP blocks' steps (models/decoder_forward.h, nextn_forward)

  // What the CUDA executor cannot run yet ("" when it runs every step): a
  // model whose recipe needs more stays on the CPU (or fails a cuda:N load).
  std::string gpu_gap() const;
  // The trunk layers as ExecutorLayer (empty when gpu_gap() names a gap).
  std::vector<ExecutorLayer> executor_layers() const;
  // The first MTP block as an ExecutorLayer, when there is one of the
  // standard shape (false otherwise).
  bool executor_nextn(ExecutorLayer* out) const;
  // Per trunk layer, its attention's sliding window (0: full attention): how
  // many KV rows the layer needs (runtime/kv_cache.h).
  std::vector<int> attention_windows() const;
};

// Rows of KV a sliding-window layer keeps (n_ctx when that is no fewer): a
// pass of max_batch queries whose first attends window - 1 rows back, and
// `history` rows more that a cut (prefix reuse) may go back to. The CPU's
// KvCache and the CUDA decoder's ring both hold this many.
inline int sliding_kv_rows(int window, int n_ctx, int max_batch, int history) {
  if (window <= 0) return n_ctx;
  const int64_t rows = int64_t{window} + max_batch + history;
  return static_cast<int>(rows < n_ctx ? rows : n_ctx);
}

// A small builder the architecture files use, so a layer reads as its steps:
//   LayerBuilder(L).norm(L.attn_norm).attention(a).residual().norm(L.ffn_norm).experts(e).residual()
class LayerBuilder {
 public:
  explicit LayerBuilder(LayerRecipe* out) : out_(out) {}
  LayerBuilder& norm(const float* weight);
  LayerBuilder& attention(const AttentionStep& a);
  LayerBuilder& routed_experts(const RoutedExpertsStep& e);
  LayerBuilder& dense_ffn(const GluParams& glu = {});
  LayerBuilder& residual();

 private:
  LayerBuilder& add(StepKind kind, const RecipeStep& params);
  LayerRecipe* out_;
};

// The standard pre-norm layer (qwen3moe, qwen3, llama/Mixtral): attention
// with optional q/k norm, then the routed experts where the layer has a
// router, else the dense SwiGLU FFN.
bool build_standard_recipe(const ModelHparams& hp, const ModelWeights& w, ModelRecipe* out, std::string* error);

}  // namespace guild
