// The architecture-specific half of the synthetic-model generator
// (synth_model.h): each architecture's file (synth_qwen3moe.cpp,
// synth_gpt_oss.cpp, synth_glm4moe.cpp) describes its tensors in file order,
// writes its <arch>.* keys and knows its presets; synth_model.cpp does the rest
// (types, checks, counts, tokenizer, the streamed write). Internal to the
// artifact layer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "artifact/synth_model.h"

namespace guild::gguf {
class GgufWriter;
}

namespace guild::synth {

// How a tensor counts in count_params.
enum class Role : uint8_t {
  Dense,      // read for every token
  Experts,    // one slice per expert (last dimension), n_expert_used of them read per token
  Embedding,  // token_embd: one row per token
  Output,     // output.weight: read for every token
  Nextn,      // the MTP (nextn) blocks: in the file, not in the trunk's per-token reads
};

struct TensorSpec {
  std::string name;
  uint32_t type = 0;
  std::vector<int64_t> ne;
  float sigma = 0.0f;  // N(0, sigma) entries; 0 = every entry is `value`
  float value = 1.0f;
  Role role = Role::Dense;
};

struct SynthArch {
  const char* name;  // general.architecture
  // Presets of this architecture: names (in the order apply_preset lists them) and the setter.
  std::vector<std::string> (*presets)();
  bool (*apply_preset)(const std::string& name, MoeModelConfig* c);
  // Problems beyond the checks every architecture shares; empty when valid.
  std::string (*validate)(const MoeModelConfig& c);
  // Every tensor in file order, with the configured types (fallbacks come later).
  std::vector<TensorSpec> (*tensors)(const MoeModelConfig& c);
  // The <arch>.* keys (general.* and tokenizer.* are written by the caller).
  void (*metadata)(const MoeModelConfig& c, gguf::GgufWriter& w);
};

extern const SynthArch kQwen3MoeSynth;
extern const SynthArch kGptOssSynth;
extern const SynthArch kGlm4MoeSynth;

// nullptr for an architecture the generator does not write.
const SynthArch* find_synth_arch(const std::string& name);

// ---- helpers the architecture files share ------------------------------------------

std::string blk(int layer, const char* name);

// Weight scales. Block inputs are RMS-normed (RMS 1), so a matrix with
// entries N(0, 1/sqrt(n_in)) keeps RMS 1. Each attention and FFN block adds
// about RMS 1/sqrt(2 n_layer) to the residual stream, so after all layers the
// stream's RMS stays near sqrt(2) whatever the depth; the output head's
// logits have a standard deviation of about 3.
struct Scales {
  float block;  // RMS each block adds to the residual stream
  float in_e;   // 1/sqrt(n_embd): matrices reading the (normed) stream
  explicit Scales(const MoeModelConfig& c);
  // A projection from `width` back to the stream: out = block RMS.
  float out(int64_t width) const;
  // The down projection of a gated FFN of width `width` (silu(g) * u for
  // g, u ~ N(0, 1) has RMS ~0.6: the down projection makes up for it).
  float down(int64_t width) const;
};

struct AttentionTensors {
  bool qkv_bias = false;
  bool out_bias = false;
  bool qk_norm = false;
  float bias_sigma = 0.1f;
};

// attn_norm, attn_q/k/v (+ biases), attn_output (+ bias), then the q/k norms:
// the names and shapes of models/standard_decoder.cpp bind_attention.
void add_attention(std::vector<TensorSpec>& t, const MoeModelConfig& c, int l, const AttentionTensors& a, Role role);

// The router ffn_gate_inp.weight [n_embd, n_expert] (+ ffn_gate_inp.bias when
// router_bias), then ffn_{gate,up,down}_exps.weight (each followed by its
// per-expert bias when expert_biases): [n_embd, n_ff_exp, n_expert] and
// [n_ff_exp, n_embd, n_expert]. The router has `role`; the stacks Experts,
// or Nextn in an MTP block.
void add_routed_experts(std::vector<TensorSpec>& t, const MoeModelConfig& c, int l, bool router_bias, bool expert_biases,
                        Role role);

// token_embd.weight / output_norm.weight + output.weight.
void add_embedding(std::vector<TensorSpec>& t, const MoeModelConfig& c);
void add_head(std::vector<TensorSpec>& t, const MoeModelConfig& c);

// The keys every architecture writes: block_count (n_blocks), context,
// embedding, feed_forward_length (ff_length; 0 = not written), heads,
// key/value lengths, rope base, rms eps, expert count/used/width.
void add_common_keys(const MoeModelConfig& c, int n_blocks, int ff_length, gguf::GgufWriter& w);

// For the architectures without them: names the glm4moe-only fields that
// are set (leading dense layers, shared experts, nextn blocks, partial rope);
// empty when none is.
std::string glm4moe_fields_set(const MoeModelConfig& c);

}  // namespace guild::synth
