// Hyper-parameters and tensor binding shared by the standard pre-norm decoder
// architectures (llama family incl. Mixtral-style experts, qwen3, qwen3moe).
#include <string>

#include "artifact/gguf.h"
#include "models/hparam_limits.h"
#include "models/runner.h"

namespace guild {
namespace lim = hparam_limits;
namespace {

std::string blk(int layer, const char* name) {
  return "blk." + std::to_string(layer) + "." + name;
}

}  // namespace

bool load_standard_hparams(const gguf::ModelFiles& files, ModelHparams* hp, std::string* error) {
  HparamReader r(files, hp->arch);
  auto fail = [&](std::string msg) {
    *error = std::move(msg);
    return false;
  };
  hp->n_ctx_train = 4096;
  hp->rope.freq_base = 10000.0f;
  bool ok = r.required_int("block_count", 1, lim::kMaxLayers, &hp->n_layer) &&
            r.required_int("embedding_length", 1, lim::kMaxEmbd, &hp->n_embd) &&
            r.required_int("attention.head_count", 1, lim::kMaxHeads, &hp->n_head) &&
            r.optional_int("context_length", 0, lim::kMaxContext, &hp->n_ctx_train) &&
            r.optional_int("feed_forward_length", 0, lim::kMaxFfn, &hp->n_ff) &&
            r.optional_int("expert_count", 0, lim::kMaxExperts, &hp->n_expert) &&
            r.optional_int("expert_used_count", 0, lim::kMaxExpertsUsed, &hp->n_expert_used) &&
            r.optional_positive_float("rope.freq_base", &hp->rope.freq_base);
  if (!ok) return fail(r.error());
  hp->n_head_kv = hp->n_head;
  hp->head_dim_k = hp->n_embd / hp->n_head;
  ok = r.optional_int("attention.head_count_kv", 1, lim::kMaxHeads, &hp->n_head_kv) &&
       r.optional_int("attention.key_length", 1, lim::kMaxHeadDim, &hp->head_dim_k);
  hp->head_dim_v = hp->head_dim_k;
  hp->rope.n_rot = hp->head_dim_k;
  ok = ok && r.optional_int("attention.value_length", 1, lim::kMaxHeadDim, &hp->head_dim_v) &&
       r.optional_int("rope.dimension_count", 1, lim::kMaxHeadDim, &hp->rope.n_rot);
  hp->n_ff_exp = (hp->n_expert_used > 0 && hp->n_ff > 0) ? hp->n_ff / hp->n_expert_used : 0;
  ok = ok && r.optional_int("expert_feed_forward_length", 0, lim::kMaxFfn, &hp->n_ff_exp);
  if (!ok) return fail(r.error());
  // Non-finite or non-positive values would turn every activation into NaN.
  if (!r.has("attention.layer_norm_rms_epsilon"))
    return fail("missing metadata key '" + r.full("attention.layer_norm_rms_epsilon") + "'");
  if (!r.optional_positive_float("attention.layer_norm_rms_epsilon", &hp->rms_eps)) return fail(r.error());

  // RoPE scaling (llama.cpp semantics): linear divides positions by the
  // factor; YaRN interpolates low frequencies, extrapolates high ones between
  // beta_fast and beta_slow rotations over the original context, and scales
  // the magnitude by 1 + 0.1 ln(factor).
  std::string scaling = "none";
  float factor = 1.0f, ext_factor = -1.0f;
  ok = r.optional_string("rope.scaling.type", &scaling) && r.optional_positive_float("rope.scaling.factor", &factor) &&
       r.optional_int("rope.scaling.original_context_length", 0, lim::kMaxContext, &hp->rope.n_ctx_orig) &&
       r.optional_float("rope.scaling.yarn_ext_factor", &ext_factor) &&
       r.optional_positive_float("rope.scaling.yarn_attn_factor", &hp->rope.attn_factor) &&
       r.optional_positive_float("rope.scaling.yarn_beta_fast", &hp->rope.beta_fast) &&
       r.optional_positive_float("rope.scaling.yarn_beta_slow", &hp->rope.beta_slow);
  if (!ok) return fail(r.error());
  if (scaling == "linear" || scaling == "yarn") {
    hp->rope.freq_scale = 1.0f / factor;
    if (scaling == "yarn") {
      hp->rope.ext_factor = ext_factor >= 0.0f ? ext_factor : 1.0f;
      if (hp->rope.n_ctx_orig <= 0) hp->rope.n_ctx_orig = hp->n_ctx_train;
    }
  } else if (scaling != "none") {
    return fail("rope scaling type '" + scaling + "' is not supported for architecture " + hp->arch);
  }

  if (hp->n_head % hp->n_head_kv != 0)
    return fail(r.full("attention.head_count") + " " + std::to_string(hp->n_head) + " is not a multiple of " +
                r.full("attention.head_count_kv") + " " + std::to_string(hp->n_head_kv));
  if (hp->head_dim_k <= 0 || hp->rope.n_rot > hp->head_dim_k || hp->rope.n_rot % 2 != 0)
    return fail("implausible attention head sizes (key " + std::to_string(hp->head_dim_k) + ", value " +
                std::to_string(hp->head_dim_v) + ", rope dims " + std::to_string(hp->rope.n_rot) + ")");
  if (hp->n_expert_used > hp->n_expert || (hp->n_expert > 0 && (hp->n_expert_used == 0 || hp->n_ff_exp <= 0)))
    return fail("implausible expert configuration (" + r.full("expert_count") + " " + std::to_string(hp->n_expert) +
                ", " + r.full("expert_used_count") + " " + std::to_string(hp->n_expert_used) + ", expert ffn " +
                std::to_string(hp->n_ff_exp) + ")");
  if (hp->n_ctx_train <= 0) hp->n_ctx_train = 4096;

  const gguf::TensorInfo* embd = files.find_tensor("token_embd.weight");
  if (!embd) return fail("missing tensor 'token_embd.weight'");
  if (embd->ne[1] <= 0 || embd->ne[1] > lim::kMaxVocab)
    return fail("tensor 'token_embd.weight' has " + std::to_string(embd->ne[1]) + " rows (vocabulary size): outside 1.." +
                std::to_string(lim::kMaxVocab));
  hp->n_vocab = static_cast<int>(embd->ne[1]);
  return true;
}

bool bind_embeddings_and_head(TensorBinder& b, const ModelHparams& hp, ModelWeights* w) {
  const bool ok = b.matrix("token_embd.weight", hp.n_embd, hp.n_vocab, &w->token_embd) &&
                  b.vector("output_norm.weight", hp.n_embd, &w->output_norm, *w) &&
                  b.matrix("output.weight", hp.n_embd, hp.n_vocab, &w->output, /*optional=*/true);
  if (ok && !w->output.data) {
    w->output = w->token_embd;  // tied embeddings
    w->output_tied = true;
  }
  w->layers.resize(hp.n_layer);
  return ok;
}

bool bind_attention(TensorBinder& b, const ModelHparams& hp, int l, bool qkv_bias, bool out_bias, LayerWeights* L_out,
                    ModelWeights* w) {
  const int64_t q_dim = static_cast<int64_t>(hp.n_head) * hp.head_dim_k;
  const int64_t k_dim = static_cast<int64_t>(hp.n_head_kv) * hp.head_dim_k;
  const int64_t v_dim = static_cast<int64_t>(hp.n_head_kv) * hp.head_dim_v;
  const int64_t o_dim = static_cast<int64_t>(hp.n_head) * hp.head_dim_v;
  LayerWeights& L = *L_out;
  bool ok = b.vector(blk(l, "attn_norm.weight"), hp.n_embd, &L.attn_norm, *w) &&
            b.matrix(blk(l, "attn_q.weight"), hp.n_embd, q_dim, &L.wq) &&
            b.matrix(blk(l, "attn_k.weight"), hp.n_embd, k_dim, &L.wk) &&
            b.matrix(blk(l, "attn_v.weight"), hp.n_embd, v_dim, &L.wv) &&
            b.matrix(blk(l, "attn_output.weight"), o_dim, hp.n_embd, &L.wo);
  if (ok && qkv_bias)
    ok = b.vector(blk(l, "attn_q.bias"), q_dim, &L.bq, *w) && b.vector(blk(l, "attn_k.bias"), k_dim, &L.bk, *w) &&
         b.vector(blk(l, "attn_v.bias"), v_dim, &L.bv, *w);
  if (ok && out_bias) ok = b.vector(blk(l, "attn_output.bias"), hp.n_embd, &L.bo, *w);
  return ok;
}

bool bind_standard_dense(TensorBinder& b, const ModelHparams& hp, ModelWeights* w, std::string* error) {
  bool ok = bind_embeddings_and_head(b, hp, w);
  for (int l = 0; ok && l < hp.n_layer; ++l) {
    LayerWeights& L = w->layers[l];
    ok = bind_attention(b, hp, l, /*qkv_bias=*/false, /*out_bias=*/false, &L, w) && b.vector(blk(l, "ffn_norm.weight"), hp.n_embd, &L.ffn_norm, *w);
    if (ok && hp.qk_norm)
      ok = b.vector(blk(l, "attn_q_norm.weight"), hp.head_dim_k, &L.q_norm, *w) &&
           b.vector(blk(l, "attn_k_norm.weight"), hp.head_dim_k, &L.k_norm, *w);
    if (!ok) break;
    if (hp.n_expert > 0 && b.has(blk(l, "ffn_gate_inp.weight"))) {
      ok = b.matrix(blk(l, "ffn_gate_inp.weight"), hp.n_embd, hp.n_expert, &L.router);
    } else {
      if (hp.n_ff <= 0) { *error = "layer " + std::to_string(l) + " is dense but feed_forward_length is missing"; return false; }
      ok = b.matrix(blk(l, "ffn_gate.weight"), hp.n_embd, hp.n_ff, &L.ffn_gate) &&
           b.matrix(blk(l, "ffn_up.weight"), hp.n_embd, hp.n_ff, &L.ffn_up) &&
           b.matrix(blk(l, "ffn_down.weight"), hp.n_ff, hp.n_embd, &L.ffn_down);
    }
  }
  if (!ok) *error = b.error();
  return ok;
}

bool bind_layer_experts(TensorBinder& b, const ModelHparams& hp, int l, LayerWeights* L) {
  return b.experts(blk(l, "ffn_gate_exps.weight"), hp.n_embd, hp.n_ff_exp, hp.n_expert, &L->gate_exps) &&
         b.experts(blk(l, "ffn_up_exps.weight"), hp.n_embd, hp.n_ff_exp, hp.n_expert, &L->up_exps) &&
         b.experts(blk(l, "ffn_down_exps.weight"), hp.n_ff_exp, hp.n_embd, hp.n_expert, &L->down_exps);
}

bool bind_standard_experts(TensorBinder& b, const ModelHparams& hp, ModelWeights* w, std::string* error) {
  bool ok = true;
  for (int l = 0; ok && l < hp.n_layer; ++l) {
    LayerWeights& L = w->layers[l];
    if (L.is_moe()) ok = bind_layer_experts(b, hp, l, &L);
  }
  if (!ok) *error = b.error();
  return ok;
}

}  // namespace guild
