// Synthetic qwen3moe (Qwen3-30B-A3B family): pre-norm attention with per-head
// q/k RMSNorm, softmax top-k experts, no biases; the FFN pre-norm is ffn_norm.
#include "artifact/gguf_writer.h"
#include "artifact/synth_arch.h"
#include "core/tensor_type.h"

namespace guild::synth {
namespace {

std::vector<std::string> qwen3moe_presets() { return {"qwen3-30b-a3b", "bench-1b"}; }

bool qwen3moe_preset(const std::string& name, MoeModelConfig* c) {
  if (name == "qwen3-30b-a3b") {
    c->arch = "qwen3moe";
    c->name = "synthetic-qwen3-30b-a3b";
    set_shape({.n_layer = 48, .n_embd = 2048, .n_head = 32, .n_head_kv = 4, .head_dim = 128, .n_expert = 128,
               .n_expert_used = 8, .n_ff_exp = 768, .n_vocab = 151936},
              c);
    c->n_ctx_train = 40960;
    c->expert_type = c->embd_type = static_cast<uint32_t>(TensorType::Q4_K);
    c->expert_down_type = c->expert_type;
    c->dense_type = c->output_type = static_cast<uint32_t>(TensorType::Q6_K);
    c->norm_type = c->router_type = static_cast<uint32_t>(TensorType::F32);
    return true;
  }
  if (name == "bench-1b") {
    // 18 x (64 experts x 3 x 1024 x 256) = 906 M expert parameters, 47 M
    // attention, 66 M embedding + head: 1.02 B in all; per token 8 experts
    // (113 M) + attention + head = 0.19 B.
    c->arch = "qwen3moe";
    c->name = "synthetic-bench-1b";
    set_shape({.n_layer = 18, .n_embd = 1024, .n_head = 16, .n_head_kv = 4, .head_dim = 64, .n_expert = 64,
               .n_expert_used = 8, .n_ff_exp = 256, .n_vocab = 32000},
              c);
    c->n_ctx_train = 4096;
    c->expert_type = c->embd_type = static_cast<uint32_t>(TensorType::Q4_K);
    c->expert_down_type = c->expert_type;
    c->dense_type = static_cast<uint32_t>(TensorType::Q8_0);
    c->output_type = static_cast<uint32_t>(TensorType::Q6_K);
    c->norm_type = c->router_type = static_cast<uint32_t>(TensorType::F32);
    return true;
  }
  return false;
}

std::string qwen3moe_validate(const MoeModelConfig& c) {
  if (!c.qk_norm) return "qwen3moe always has q/k norms (qk_norm)";
  return glm4moe_fields_set(c);
}

std::vector<TensorSpec> qwen3moe_tensors(const MoeModelConfig& c) {
  std::vector<TensorSpec> t;
  add_embedding(t, c);
  AttentionTensors attn;
  attn.qk_norm = true;
  for (int l = 0; l < c.n_layer; ++l) {
    add_attention(t, c, l, attn, Role::Dense);
    t.push_back({blk(l, "ffn_norm.weight"), c.norm_type, {c.n_embd}, 0.0f, 1.0f});
    add_routed_experts(t, c, l, /*router_bias=*/false, /*expert_biases=*/false, Role::Dense);
  }
  add_head(t, c);
  return t;
}

void qwen3moe_metadata(const MoeModelConfig& c, gguf::GgufWriter& w) {
  add_common_keys(c, c.n_layer, c.n_ff_exp * c.n_expert_used, w);
}

}  // namespace

extern const SynthArch kQwen3MoeSynth{"qwen3moe", qwen3moe_presets, qwen3moe_preset, qwen3moe_validate, qwen3moe_tensors,
                                      qwen3moe_metadata};

}  // namespace guild::synth
