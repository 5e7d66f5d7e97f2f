// Synthetic glm4moe (models/glm4moe.cpp): q/k/v biases, optional per-head q/k
// norms, partial rope; n_dense_lead dense SwiGLU layers, then MoE layers with
// sigmoid gating biased by exp_probs_b and shared experts; the FFN pre-norm is
// post_attention_norm; n_nextn MTP blocks after the trunk (a MoE block plus
// nextn.eh_proj / enorm / hnorm / shared_head_norm, the trunk's embedding and
// head). Names, shapes and keys as llama.cpp's glm4moe files (fixture
// glm4moe-a: one dense layer, two MoE layers, one nextn block).
#include <cmath>

#include "artifact/gguf_writer.h"
#include "artifact/synth_arch.h"
#include "core/tensor_type.h"

namespace guild::synth {
namespace {

std::vector<std::string> glm4moe_presets() { return {"glm4.5-air"}; }

// zai-org/GLM-4.5-Air (config.json; the same shapes in THUDM/slime's
// scripts/models/glm4.5-106B-A12B.sh): 46 layers of which the first is dense
// (first_k_dense_replace 1) plus 1 nextn block (num_nextn_predict_layers),
// hidden 4096, 96 query heads and 8 kv heads of 128 with rope over half of
// each head (partial_rotary_factor 0.5, theta 1e6) and no q/k norm
// (use_qk_norm false), dense FFN 10944, 128 experts of 1408 (8 used) and one
// shared expert of 1408, sigmoid routing with a correction bias,
// norm_topk_prob true, routed_scaling_factor 1.0, vocab 151552, 131072
// positions, rms eps 1e-5. GLM's published 106 B / 12 B count the trunk
// without the nextn block, and the active figure without the output head.
bool glm4moe_preset(const std::string& name, MoeModelConfig* c) {
  if (name != "glm4.5-air") return false;
  c->arch = "glm4moe";
  c->name = "synthetic-glm4.5-air";
  set_shape({.n_layer = 46, .n_embd = 4096, .n_head = 96, .n_head_kv = 8, .head_dim = 128, .n_expert = 128,
             .n_expert_used = 8, .n_ff_exp = 1408, .n_vocab = 151552},
            c);
  c->n_nextn = 1;
  c->n_dense_lead = 1;
  c->rope_dims = 64;
  c->qk_norm = false;
  c->n_ff = 10944;
  c->n_expert_shared = 1;
  c->n_ff_shexp = 1408;
  c->expert_weights_scale = 1.0f;
  c->expert_weights_norm = true;
  c->n_ctx_train = 131072;
  c->rope_base = 1e6f;
  c->rms_eps = 1e-5f;
  // A Q4_K_M-like mix; the 1408- and 10944-wide down projections fall back
  // to Q5_0 / Q8_0 as llama-quantize's do.
  c->expert_type = c->expert_down_type = c->embd_type = static_cast<uint32_t>(TensorType::Q4_K);
  c->dense_type = c->output_type = static_cast<uint32_t>(TensorType::Q6_K);
  c->norm_type = c->router_type = static_cast<uint32_t>(TensorType::F32);
  return true;
}

int shexp_width(const MoeModelConfig& c) { return c.n_ff_shexp > 0 ? c.n_ff_shexp : c.n_expert_shared * c.n_ff_exp; }

std::string glm4moe_validate(const MoeModelConfig& c) {
  if (c.n_dense_lead < 0 || c.n_dense_lead > c.n_layer) return "dense-lead must be in 0..layers";
  if (c.n_dense_lead > 0 && c.n_ff <= 0) return "leading dense layers need a dense FFN width (n_ff)";
  if (c.n_expert_shared < 0 || c.n_ff_shexp < 0 || c.n_nextn < 0) return "shared experts and nextn blocks cannot be negative";
  if (c.n_ff_shexp > 0 && c.n_expert_shared == 0) return "a shared-expert width needs shared experts (n_expert_shared)";
  if (c.rope_dims != 0 && (c.rope_dims < 2 || c.rope_dims > c.head_dim || c.rope_dims % 2 != 0))
    return "rope-dims must be even and at most head-dim";
  if (!(c.expert_weights_scale > 0.0f)) return "expert weights scale must be positive";
  return "";
}

// A SwiGLU FFN of width `width`: ffn_gate<suffix>, ffn_up<suffix>, ffn_down<suffix>.
void add_glu(std::vector<TensorSpec>& t, const MoeModelConfig& c, int l, const std::string& suffix, int64_t width, Role role) {
  const Scales s(c);
  const int64_t E = c.n_embd;
  const std::string gate = "ffn_gate" + suffix + ".weight", up = "ffn_up" + suffix + ".weight",
                    down = "ffn_down" + suffix + ".weight";
  t.push_back({blk(l, gate.c_str()), c.dense_type, {E, width}, s.in_e, 1.0f, role});
  t.push_back({blk(l, up.c_str()), c.dense_type, {E, width}, s.in_e, 1.0f, role});
  t.push_back({blk(l, down.c_str()), c.dense_type, {width, E}, s.down(width), 1.0f, role});
}

// One block: attention, post_attention_norm, then the dense FFN or the
// router, experts and shared expert. `role` Nextn for the MTP blocks.
void add_block(std::vector<TensorSpec>& t, const MoeModelConfig& c, int l, bool dense, Role role) {
  AttentionTensors attn;
  attn.qkv_bias = true;
  attn.qk_norm = c.qk_norm;
  add_attention(t, c, l, attn, role);
  t.push_back({blk(l, "post_attention_norm.weight"), c.norm_type, {c.n_embd}, 0.0f, 1.0f, role});
  if (dense) {
    add_glu(t, c, l, "", c.n_ff, role);
    return;
  }
  add_routed_experts(t, c, l, /*router_bias=*/false, /*expert_biases=*/false, role);
  t.push_back({blk(l, "exp_probs_b.bias"), c.norm_type, {c.n_expert}, 0.1f, 1.0f, role});
  if (shexp_width(c) > 0) add_glu(t, c, l, "_shexp", shexp_width(c), role);
}

std::vector<TensorSpec> glm4moe_tensors(const MoeModelConfig& c) {
  const int64_t E = c.n_embd;
  std::vector<TensorSpec> t;
  add_embedding(t, c);
  for (int l = 0; l < c.n_layer; ++l) add_block(t, c, l, l < c.n_dense_lead, Role::Dense);
  for (int j = 0; j < c.n_nextn; ++j) {
    const int l = c.n_layer + j;
    add_block(t, c, l, /*dense=*/false, Role::Nextn);
    // eh_proj mixes [enorm(embedding); hnorm(trunk output)] back to the stream.
    t.push_back({blk(l, "nextn.eh_proj.weight"), c.dense_type, {2 * E, E}, 1.0f / std::sqrt(2.0f * static_cast<float>(E)),
                 1.0f, Role::Nextn});
    for (const char* norm : {"nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight"})
      t.push_back({blk(l, norm), c.norm_type, {E}, 0.0f, 1.0f, Role::Nextn});
  }
  add_head(t, c);
  return t;
}

void glm4moe_metadata(const MoeModelConfig& c, gguf::GgufWriter& w) {
  const std::string a = "glm4moe";
  add_common_keys(c, c.n_layer + c.n_nextn, c.n_ff, w);
  w.add_u32(a + ".expert_group_count", 1);
  w.add_u32(a + ".expert_group_used_count", 1);
  w.add_u32(a + ".expert_gating_func", 2);  // sigmoid
  w.add_u32(a + ".rope.dimension_count", static_cast<uint32_t>(c.rope_dims > 0 ? c.rope_dims : c.head_dim));
  w.add_u32(a + ".expert_shared_count", static_cast<uint32_t>(c.n_expert_shared));
  if (c.n_ff_shexp > 0 && c.n_ff_shexp != c.n_expert_shared * c.n_ff_exp)
    w.add_u32(a + ".expert_shared_feed_forward_length", static_cast<uint32_t>(c.n_ff_shexp));
  w.add_u32(a + ".leading_dense_block_count", static_cast<uint32_t>(c.n_dense_lead));
  w.add_f32(a + ".expert_weights_scale", c.expert_weights_scale);
  w.add_bool(a + ".expert_weights_norm", c.expert_weights_norm);
  w.add_u32(a + ".nextn_predict_layers", static_cast<uint32_t>(c.n_nextn));
}

}  // namespace

extern const SynthArch kGlm4MoeSynth{"glm4moe", glm4moe_presets, glm4moe_preset, glm4moe_validate, glm4moe_tensors,
                                     glm4moe_metadata};

}  // namespace guild::synth
