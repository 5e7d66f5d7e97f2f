// gpt-oss (OpenAI's gpt-oss-20b / -120b): a pre-norm MoE decoder with
//  - q/k/v and output biases, no q/k norm, NEOX rope with YaRN scaling
//    (rope.scaling.*: factor 32 over 4096 original positions in the releases);
//  - a learned sink logit per query head in every attention softmax;
//  - sliding-window attention (attention.sliding_window keys) on even layers,
//    full causal attention on odd ones (llama.cpp's swa pattern 2);
//  - a router with a bias: top-k of the logits, softmax over those k;
//  - experts with gate/up/down biases and the clamped SwiGLU "swiglu-oai"
//    (alpha 1.702, limit 7: constants of the model, no GGUF key carries them);
//  - the FFN's pre-norm is named post_attention_norm.
// The releases store experts in MXFP4 and the rest in BF16 (or Q8_0).
#include <string>

#include "artifact/gguf.h"
#include "models/hparam_limits.h"
#include "models/runner.h"

namespace guild {
namespace {

constexpr float kSwigluAlpha = 1.702f;
constexpr float kSwigluLimit = 7.0f;

std::string blk(int layer, const char* name) { return "blk." + std::to_string(layer) + "." + name; }

// The window a layer attends over: even layers slide, odd ones see everything.
int layer_window(const ModelHparams& hp, int layer) { return layer % 2 == 0 ? hp.sliding_window : 0; }

bool load_gpt_oss(const gguf::ModelFiles& files, ModelHparams* hp, std::string* error) {
  if (!load_standard_hparams(files, hp, error)) return false;
  hp->rope.style = RopeStyle::Neox;
  hp->qk_norm = false;
  HparamReader r(files, hp->arch);
  if (!r.has("attention.sliding_window")) {
    *error = "missing metadata key '" + r.full("attention.sliding_window") + "'";
    return false;
  }
  if (!r.required_int("attention.sliding_window", 1, hparam_limits::kMaxContext, &hp->sliding_window)) {
    *error = r.error();
    return false;
  }
  if (hp->n_expert == 0) {
    *error = "gpt-oss without experts (" + r.full("expert_count") + " is 0)";
    return false;
  }
  return check_standard_shapes(files, hp, "expert_feed_forward_length", error);
}

bool bind_gpt_oss_dense(TensorBinder& b, const ModelHparams& hp, ModelWeights* w, std::string* error) {
  bool ok = bind_embeddings_and_head(b, hp, w);
  for (int l = 0; ok && l < hp.n_layer; ++l) {
    LayerWeights& L = w->layers[l];
    ok = bind_attention(b, hp, l, /*qkv_bias=*/true, /*out_bias=*/true, &L, w) &&
         b.vector(blk(l, "attn_sinks.weight"), hp.n_head, &L.attn_sinks, *w) &&
         b.vector(blk(l, "post_attention_norm.weight"), hp.n_embd, &L.ffn_norm, *w) &&
         b.matrix(blk(l, "ffn_gate_inp.weight"), hp.n_embd, hp.n_expert, &L.router) &&
         b.vector(blk(l, "ffn_gate_inp.bias"), hp.n_expert, &L.router_bias, *w);
  }
  if (!ok) *error = b.error();
  return ok;
}

bool bind_gpt_oss_experts(TensorBinder& b, const ModelHparams& hp, ModelWeights* w, std::string* error) {
  bool ok = true;
  for (int l = 0; ok && l < hp.n_layer; ++l) {
    LayerWeights& L = w->layers[l];
    ok = b.experts(blk(l, "ffn_gate_exps.weight"), hp.n_embd, hp.n_ff_exp, hp.n_expert, &L.gate_exps) &&
         b.experts(blk(l, "ffn_up_exps.weight"), hp.n_embd, hp.n_ff_exp, hp.n_expert, &L.up_exps) &&
         b.experts(blk(l, "ffn_down_exps.weight"), hp.n_ff_exp, hp.n_embd, hp.n_expert, &L.down_exps) &&
         b.table(blk(l, "ffn_gate_exps.bias"), hp.n_ff_exp, hp.n_expert, &L.gate_exps_bias, *w) &&
         b.table(blk(l, "ffn_up_exps.bias"), hp.n_ff_exp, hp.n_expert, &L.up_exps_bias, *w) &&
         b.table(blk(l, "ffn_down_exps.bias"), hp.n_embd, hp.n_expert, &L.down_exps_bias, *w);
  }
  if (!ok) *error = b.error();
  return ok;
}

bool build_gpt_oss_recipe(const ModelHparams& hp, const ModelWeights& w, ModelRecipe* out, std::string*) {
  out->layers.assign(static_cast<size_t>(hp.n_layer), LayerRecipe{});
  for (int l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    AttentionStep attn;
    attn.qkv_bias = attn.out_bias = attn.sinks = true;
    attn.sliding_window = layer_window(hp, l);
    RoutedExpertsStep experts;
    experts.gating = Gating::TopkSoftmax;
    experts.router_bias = experts.expert_bias = true;
    experts.glu = GluParams{Glu::SwigluOai, kSwigluAlpha, kSwigluLimit};
    LayerBuilder(&out->layers[static_cast<size_t>(l)])
        .norm(L.attn_norm)
        .attention(attn)
        .residual()
        .norm(L.ffn_norm)
        .routed_experts(experts)
        .residual();
  }
  return true;
}

}  // namespace

extern const RunnerDescriptor kGptOssRunner{"gpt-oss", load_gpt_oss, bind_gpt_oss_dense, bind_gpt_oss_experts,
                                            build_gpt_oss_recipe};

}  // namespace guild
