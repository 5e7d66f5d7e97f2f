// glm4moe (GLM-4.5 / 4.6 / 4.7, GLM-4.5-Air): a pre-norm decoder with
//  - q/k/v biases (no output bias), optional per-head q/k RMSNorm, partial
//    NEOX rope (rope.dimension_count of each head's dims);
//  - leading_dense_block_count dense SwiGLU layers, then MoE layers;
//  - sigmoid gating: the top-k of sigmoid(logit) + exp_probs_b choose, the
//    unbiased sigmoids weigh (renormalised when expert_weights_norm), times
//    expert_weights_scale; plus expert_shared_count shared experts of width
//    expert_shared_feed_forward_length (or shared count x expert width);
//  - the FFN's pre-norm is named post_attention_norm;
//  - nextn_predict_layers trailing blocks are the multi-token-prediction
//    head (ModelWeights::nextn, run by nextn_forward): not part of the trunk,
//    which has block_count - nextn layers.
#include <string>

#include "artifact/gguf.h"
#include "models/hparam_limits.h"
#include "models/runner.h"

namespace guild {
namespace {

namespace lim = hparam_limits;

std::string blk(int layer, const char* name) { return "blk." + std::to_string(layer) + "." + name; }

// The MoE keys beyond load_standard_hparams: dense lead, shared experts,
// gating and the routing weights' norm and scale.
bool read_moe_keys(const gguf::ModelFiles& files, ModelHparams* hp, int* n_shared, std::string* error) {
  HparamReader r(files, hp->arch);
  int gating = 2, groups = 1;
  bool ok = r.optional_int("leading_dense_block_count", 0, lim::kMaxLayers, &hp->n_dense_lead) &&
            r.optional_int("expert_shared_count", 0, lim::kMaxExperts, n_shared) &&
            r.optional_positive_float("expert_weights_scale", &hp->expert_weights_scale) &&
            r.optional_int("expert_gating_func", 0, 3, &gating) &&
            r.optional_int("expert_group_count", 1, lim::kMaxExperts, &groups);
  if (!ok) {
    *error = r.error();
    return false;
  }
  std::string bool_error;
  if (auto norm = files.get_bool(r.full("expert_weights_norm"), &bool_error)) hp->expert_weights_norm = *norm;
  if (!bool_error.empty()) {
    *error = bool_error;
    return false;
  }
  if (gating != 2) {
    *error = r.full("expert_gating_func") + " = " + std::to_string(gating) + " is not supported (glm4moe uses 2, sigmoid)";
    return false;
  }
  if (groups > 1) {
    *error = r.full("expert_group_count") + " = " + std::to_string(groups) + ": grouped expert routing is not supported yet";
    return false;
  }
  return true;
}

bool load_glm4moe(const gguf::ModelFiles& files, ModelHparams* hp, std::string* error) {
  if (!load_standard_hparams(files, hp, error)) return false;
  HparamReader r(files, hp->arch);
  int nextn = 0;
  if (!r.optional_int("nextn_predict_layers", 0, lim::kMaxLayers, &nextn)) {
    *error = r.error();
    return false;
  }
  if (nextn >= hp->n_layer) {
    *error = r.full("nextn_predict_layers") + " = " + std::to_string(nextn) + " leaves no trunk layer of " +
             r.full("block_count") + " = " + std::to_string(hp->n_layer);
    return false;
  }
  hp->n_layer -= nextn;  // the trunk; the MTP blocks follow it in the file
  // A file converted without its MTP tensors still runs (no drafter).
  hp->n_nextn = nextn > 0 && files.find_tensor(blk(hp->n_layer, "nextn.eh_proj.weight")) ? nextn : 0;
  hp->rope.style = RopeStyle::Neox;
  hp->qk_norm = files.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  int n_shared = 0;
  if (!read_moe_keys(files, hp, &n_shared, error)) return false;
  if (hp->n_dense_lead > hp->n_layer) {
    *error = r.full("leading_dense_block_count") + " = " + std::to_string(hp->n_dense_lead) + " exceeds the " +
             std::to_string(hp->n_layer) + " trunk layers";
    return false;
  }
  if (n_shared > 0) {
    hp->n_ff_shexp = hp->n_ff_exp * n_shared;
    if (!r.optional_int("expert_shared_feed_forward_length", 1, lim::kMaxFfn, &hp->n_ff_shexp)) {
      *error = r.error();
      return false;
    }
  }
  return check_standard_shapes(files, hp, "expert_feed_forward_length", error);
}

// Block l of the file (a trunk layer, or an MTP block after them) into L:
// attention, norms, and the dense FFN or the router and shared expert.
bool bind_block(TensorBinder& b, const ModelHparams& hp, int l, bool dense, LayerWeights* L_out, ModelWeights* w,
                std::string* error) {
  LayerWeights& L = *L_out;
  bool ok = bind_attention(b, hp, l, /*qkv_bias=*/true, /*out_bias=*/false, &L, w) &&
            b.vector(blk(l, "attn_q_norm.weight"), hp.head_dim_k, &L.q_norm, *w, /*optional=*/true) &&
            b.vector(blk(l, "attn_k_norm.weight"), hp.head_dim_k, &L.k_norm, *w, /*optional=*/true) &&
            b.vector(blk(l, "post_attention_norm.weight"), hp.n_embd, &L.ffn_norm, *w);
  if (!ok) {
    *error = b.error();
    return false;
  }
  if ((L.q_norm == nullptr) != (L.k_norm == nullptr)) {
    *error = "layer " + std::to_string(l) + " has only one of attn_q_norm / attn_k_norm";
    return false;
  }
  if (dense) {
    ok = b.matrix(blk(l, "ffn_gate.weight"), hp.n_embd, hp.n_ff, &L.ffn_gate) &&
         b.matrix(blk(l, "ffn_up.weight"), hp.n_embd, hp.n_ff, &L.ffn_up) &&
         b.matrix(blk(l, "ffn_down.weight"), hp.n_ff, hp.n_embd, &L.ffn_down);
  } else {
    ok = b.matrix(blk(l, "ffn_gate_inp.weight"), hp.n_embd, hp.n_expert, &L.router) &&
         b.vector(blk(l, "exp_probs_b.bias"), hp.n_expert, &L.exp_probs_b, *w, /*optional=*/true);
    if (ok && hp.n_ff_shexp > 0)
      ok = b.matrix(blk(l, "ffn_gate_shexp.weight"), hp.n_embd, hp.n_ff_shexp, &L.shexp_gate) &&
           b.matrix(blk(l, "ffn_up_shexp.weight"), hp.n_embd, hp.n_ff_shexp, &L.shexp_up) &&
           b.matrix(blk(l, "ffn_down_shexp.weight"), hp.n_ff_shexp, hp.n_embd, &L.shexp_down);
  }
  if (!ok) *error = b.error();
  return ok;
}

bool bind_glm4moe_dense(TensorBinder& b, const ModelHparams& hp, ModelWeights* w, std::string* error) {
  if (!bind_embeddings_and_head(b, hp, w)) {
    *error = b.error();
    return false;
  }
  for (int l = 0; l < hp.n_layer; ++l)
    if (!bind_block(b, hp, l, l < hp.n_dense_lead, &w->layers[l], w, error)) return false;
  // The MTP blocks: a MoE block each, plus the nextn tensors; the embedding
  // and head are the trunk's unless the block has its own.
  w->nextn.resize(static_cast<size_t>(hp.n_nextn));
  for (int j = 0; j < hp.n_nextn; ++j) {
    const int l = hp.n_layer + j;
    NextnWeights& m = w->nextn[static_cast<size_t>(j)];
    if (!bind_block(b, hp, l, /*dense=*/false, &m.block, w, error)) return false;
    const bool ok = b.matrix(blk(l, "nextn.eh_proj.weight"), 2 * static_cast<int64_t>(hp.n_embd), hp.n_embd, &m.eh_proj) &&
                    b.vector(blk(l, "nextn.enorm.weight"), hp.n_embd, &m.enorm, *w) &&
                    b.vector(blk(l, "nextn.hnorm.weight"), hp.n_embd, &m.hnorm, *w) &&
                    b.vector(blk(l, "nextn.shared_head_norm.weight"), hp.n_embd, &m.shared_head_norm, *w) &&
                    b.matrix(blk(l, "nextn.embed_tokens.weight"), hp.n_embd, hp.n_vocab, &m.embed, /*optional=*/true) &&
                    b.matrix(blk(l, "nextn.shared_head_head.weight"), hp.n_embd, hp.n_vocab, &m.head, /*optional=*/true);
    if (!ok) {
      *error = b.error();
      return false;
    }
    if (!m.embed.data) m.embed = w->token_embd;
    if (!m.head.data) m.head = w->output;
  }
  return true;
}

bool bind_glm4moe_experts(TensorBinder& b, const ModelHparams& hp, ModelWeights* w, std::string* error) {
  if (!bind_standard_experts(b, hp, w, error)) return false;
  for (int j = 0; j < hp.n_nextn; ++j) {
    const int l = hp.n_layer + j;
    if (!bind_layer_experts(b, hp, l, &w->nextn[static_cast<size_t>(j)].block)) {
      *error = b.error();
      return false;
    }
  }
  return true;
}

void build_layer(const ModelHparams& hp, const LayerWeights& L, LayerRecipe* out) {
  AttentionStep attn;
  attn.qkv_bias = true;
  attn.qk_norm = L.q_norm != nullptr;
  LayerBuilder b(out);
  b.norm(L.attn_norm).attention(attn).residual().norm(L.ffn_norm);
  if (L.is_moe()) {
    RoutedExpertsStep e;
    e.gating = Gating::SigmoidTopk;
    e.choice_bias = L.exp_probs_b != nullptr;
    e.renorm = hp.expert_weights_norm;
    e.scale = hp.expert_weights_scale;
    e.shared_expert = L.shexp_gate.data != nullptr;
    b.routed_experts(e);
  } else {
    b.dense_ffn();
  }
  b.residual();
}

bool build_glm4moe_recipe(const ModelHparams& hp, const ModelWeights& w, ModelRecipe* out, std::string*) {
  out->layers.assign(static_cast<size_t>(hp.n_layer), LayerRecipe{});
  for (int l = 0; l < hp.n_layer; ++l) build_layer(hp, w.layers[static_cast<size_t>(l)], &out->layers[static_cast<size_t>(l)]);
  out->nextn.assign(w.nextn.size(), LayerRecipe{});
  for (size_t j = 0; j < w.nextn.size(); ++j) build_layer(hp, w.nextn[j].block, &out->nextn[j]);
  return true;
}

}  // namespace

extern const RunnerDescriptor kGlm4MoeRunner{"glm4moe", load_glm4moe, bind_glm4moe_dense, bind_glm4moe_experts,
                                             build_glm4moe_recipe};

}  // namespace guild
