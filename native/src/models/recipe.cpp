#include "models/recipe.h"

namespace guild {

LayerBuilder& LayerBuilder::add(StepKind kind, const RecipeStep& params) {
  RecipeStep s = params;
  s.kind = kind;
  out_->steps.push_back(s);
  return *this;
}

LayerBuilder& LayerBuilder::norm(const float* weight) {
  RecipeStep s;
  s.norm = weight;
  return add(StepKind::Norm, s);
}

LayerBuilder& LayerBuilder::attention(const AttentionStep& a) {
  RecipeStep s;
  s.attention = a;
  return add(StepKind::Attention, s);
}

LayerBuilder& LayerBuilder::routed_experts(const RoutedExpertsStep& e) {
  RecipeStep s;
  s.experts = e;
  return add(StepKind::RoutedExperts, s);
}

LayerBuilder& LayerBuilder::dense_ffn(const GluParams& glu) {
  RecipeStep s;
  s.dense_glu = glu;
  return add(StepKind::DenseFfn, s);
}

LayerBuilder& LayerBuilder::residual() { return add(StepKind::Residual, RecipeStep{}); }

namespace {

// What the CUDA executor cannot run of one layer ("" when it runs every step).
std::string layer_gap(const LayerRecipe& L) {
  static constexpr StepKind kStandard[] = {StepKind::Norm, StepKind::Attention, StepKind::Residual, StepKind::Norm,
                                           StepKind::RoutedExperts, StepKind::Residual};
  if (L.steps.size() != 6) return "a layer of " + std::to_string(L.steps.size()) + " steps";
  for (size_t i = 0; i < L.steps.size(); ++i) {
    const RecipeStep& s = L.steps[i];
    const bool ffn = i == 4;
    if (ffn ? (s.kind != StepKind::RoutedExperts && s.kind != StepKind::DenseFfn) : s.kind != kStandard[i])
      return "a layer whose steps are not norm, attention, residual, norm, FFN, residual";
  }
  return "";
}

ExecutorLayer executor_layer(const LayerRecipe& L) {
  ExecutorLayer out;
  const RecipeStep& attn = L.steps[1];
  const RecipeStep& ffn = L.steps[4];
  out.attention = attn.attention;
  out.moe = ffn.kind == StepKind::RoutedExperts;
  if (out.moe) out.experts = ffn.experts;
  else out.dense_glu = ffn.dense_glu;
  return out;
}

}  // namespace

std::string ModelRecipe::gpu_gap() const {
  // The CUDA executor runs layers of the standard shape (docs/CUDA.md) with
  // the step parameters it has kernels for: the first one it lacks names the gap.
  for (const LayerRecipe& L : layers)
    if (std::string gap = layer_gap(L); !gap.empty()) return gap;
  return "";
}

std::vector<ExecutorLayer> ModelRecipe::executor_layers() const {
  std::vector<ExecutorLayer> out;
  if (!gpu_gap().empty()) return out;
  out.reserve(layers.size());
  for (const LayerRecipe& L : layers) out.push_back(executor_layer(L));
  return out;
}

bool ModelRecipe::executor_nextn(ExecutorLayer* out) const {
  if (nextn.empty() || !layer_gap(nextn[0]).empty()) return false;
  *out = executor_layer(nextn[0]);
  return true;
}

bool build_standard_recipe(const ModelHparams& hp, const ModelWeights& w, ModelRecipe* out, std::string* error) {
  (void)error;
  out->layers.assign(static_cast<size_t>(hp.n_layer), LayerRecipe{});
  for (int l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    AttentionStep a;
    a.qk_norm = hp.qk_norm;
    LayerBuilder b(&out->layers[static_cast<size_t>(l)]);
    b.norm(L.attn_norm).attention(a).residual().norm(L.ffn_norm);
    if (L.is_moe()) b.routed_experts(RoutedExpertsStep{});
    else b.dense_ffn();
    b.residual();
  }
  return true;
}

std::vector<int> ModelRecipe::attention_windows() const {
  std::vector<int> w(layers.size(), 0);
  for (size_t l = 0; l < layers.size(); ++l)
    for (const RecipeStep& step : layers[l].steps)
      if (step.kind == StepKind::Attention) w[l] = step.attention.sliding_window;
  return w;
}

}  // namespace guild
