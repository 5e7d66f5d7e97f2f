// Synthetic gpt-oss (models/gpt_oss.cpp): q/k/v/o biases and a sink logit per
// query head, no q/k norm; the FFN pre-norm is post_attention_norm; a router
// with a bias; experts with per-expert gate/up/down biases. The sliding window
// and YaRN keys are written; which layers slide (the even ones) and the
// clamped SwiGLU's alpha/limit are the loader's constants (no GGUF key has
// them). Names, shapes, keys and types as llama.cpp's gpt-oss files
// (fixture gptoss-a-MXFP4_MOE: MXFP4 experts, Q8_0 attention, embedding and
// head, F32 router, norms, biases and sinks).
#include "artifact/gguf_writer.h"
#include "artifact/synth_arch.h"
#include "core/tensor_type.h"

namespace guild::synth {
namespace {

std::vector<std::string> gpt_oss_presets() { return {"gpt-oss-120b", "gpt-oss-20b"}; }

// openai/gpt-oss-120b and -20b config.json (and the model card's counts:
// 116.83 B / 5.13 B active, 20.91 B / 3.61 B active): 2880 hidden, 64 query
// heads and 8 kv heads of 64, experts of width 2880, top 4, o200k_harmony's
// 201088 ids, a 128-token window on alternate layers, rope base 150000 with
// YaRN x32 over 4096 positions (131072 in all), rms eps 1e-5.
bool gpt_oss_preset(const std::string& name, MoeModelConfig* c) {
  const bool big = name == "gpt-oss-120b";
  if (!big && name != "gpt-oss-20b") return false;
  c->arch = "gpt-oss";
  c->name = big ? "synthetic-gpt-oss-120b" : "synthetic-gpt-oss-20b";
  set_shape({.n_layer = big ? 36 : 24, .n_embd = 2880, .n_head = 64, .n_head_kv = 8, .head_dim = 64,
             .n_expert = big ? 128 : 32, .n_expert_used = 4, .n_ff_exp = 2880, .n_vocab = 201088},
            c);
  c->n_ctx_train = 131072;
  c->rope_base = 150000.0f;
  c->rms_eps = 1e-5f;
  c->sliding_window = 128;
  c->yarn_factor = 32.0f;
  c->yarn_orig_ctx = 4096;
  c->expert_type = c->expert_down_type = static_cast<uint32_t>(TensorType::MXFP4);
  c->dense_type = c->output_type = c->embd_type = static_cast<uint32_t>(TensorType::Q8_0);
  c->norm_type = c->router_type = static_cast<uint32_t>(TensorType::F32);
  return true;
}

std::string gpt_oss_validate(const MoeModelConfig& c) {
  if (c.sliding_window <= 0) return "gpt-oss needs a sliding window (sliding_window > 0)";
  if (c.yarn_factor != 0.0f && (c.yarn_factor < 1.0f || c.yarn_orig_ctx <= 0))
    return "gpt-oss YaRN: factor >= 1 over a positive original context (or factor 0 for none)";
  return glm4moe_fields_set(c);
}

std::vector<TensorSpec> gpt_oss_tensors(const MoeModelConfig& c) {
  std::vector<TensorSpec> t;
  add_embedding(t, c);
  AttentionTensors attn;
  attn.qkv_bias = attn.out_bias = true;
  attn.bias_sigma = 0.1f;
  for (int l = 0; l < c.n_layer; ++l) {
    add_attention(t, c, l, attn, Role::Dense);
    // Sink logits of the order of the q.k scores.
    t.push_back({blk(l, "attn_sinks.weight"), c.norm_type, {c.n_head}, 0.5f});
    t.push_back({blk(l, "post_attention_norm.weight"), c.norm_type, {c.n_embd}, 0.0f, 1.0f});
    add_routed_experts(t, c, l, /*router_bias=*/true, /*expert_biases=*/true, Role::Dense);
  }
  add_head(t, c);
  return t;
}

void gpt_oss_metadata(const MoeModelConfig& c, gguf::GgufWriter& w) {
  const std::string a = "gpt-oss";
  // feed_forward_length is the expert width in llama.cpp's files.
  add_common_keys(c, c.n_layer, c.n_ff_exp, w);
  w.add_u32(a + ".attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  if (c.yarn_factor != 0.0f) {
    w.add_string(a + ".rope.scaling.type", "yarn");
    w.add_f32(a + ".rope.scaling.factor", c.yarn_factor);
    w.add_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(c.yarn_orig_ctx));
    w.add_f32(a + ".rope.scaling.yarn_beta_fast", 32.0f);
    w.add_f32(a + ".rope.scaling.yarn_beta_slow", 1.0f);
  }
}

}  // namespace

extern const SynthArch kGptOssSynth{"gpt-oss", gpt_oss_presets, gpt_oss_preset, gpt_oss_validate, gpt_oss_tensors,
                                    gpt_oss_metadata};

}  // namespace guild::synth
