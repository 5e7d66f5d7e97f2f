// Synthetic MoE models of three architectures (qwen3moe, gpt-oss, glm4moe):
// every shape and tensor type chosen by the caller, random zero-mean weights,
// and a synthetic byte-level BPE tokenizer, written as GGUF through
// GgufWriter's streaming mode (layer by layer, from several threads, little
// memory). Each architecture's tensor list, metadata and presets live in its
// own file (synth_qwen3moe.cpp, synth_gpt_oss.cpp, synth_glm4moe.cpp, through
// synth_arch.h); the names, shapes and keys are those Guild's loaders
// (models/<arch>.cpp) and llama.cpp read. Used by guild-gen-model
// (benchmarks) and by tests. The same config and seed always give the same file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace guild::synth {

struct MoeModelConfig {
  std::string arch = "qwen3moe";  // general.architecture: qwen3moe | gpt-oss | glm4moe
  std::string name = "guild-synthetic-qwen3moe";
  int n_layer = 2;  // decoder layers (glm4moe: the trunk, without the nextn blocks)
  int n_embd = 256;
  int n_head = 4;
  int n_head_kv = 2;
  int head_dim = 64;
  int n_expert = 8;
  int n_expert_used = 2;
  int n_ff_exp = 256;
  int n_vocab = 2048;
  int n_ctx_train = 4096;
  float rope_base = 1e6f;
  float rms_eps = 1e-6f;
  // gpt-oss: the window of the sliding-window layers (the loader slides the
  // even ones) and YaRN rope scaling (factor over the original context; 0 = none).
  int sliding_window = 128;
  float yarn_factor = 32.0f;
  int yarn_orig_ctx = 4096;
  // glm4moe: layers [0, n_dense_lead) are dense SwiGLU of width n_ff; the
  // others route to experts plus n_expert_shared shared experts (width
  // n_ff_shexp, 0 = n_expert_shared x n_ff_exp) with sigmoid gating biased by
  // exp_probs_b; routing weights renormalised (expert_weights_norm) and
  // scaled; rope over rope_dims of each head (0 = all); per-head q/k norms
  // when qk_norm; n_nextn MTP blocks after the trunk (block_count includes them).
  int n_ff = 0;
  int n_dense_lead = 0;
  int n_expert_shared = 0;
  int n_ff_shexp = 0;
  float expert_weights_scale = 1.0f;
  bool expert_weights_norm = true;
  int rope_dims = 0;
  bool qk_norm = true;
  int n_nextn = 0;
  // Tensor type ids (core/tensor_type.h). A type whose block does not divide
  // a tensor's rows is replaced for that tensor the way llama-quantize does
  // (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, other 256-blocks -> IQ4_NL when
  // it has a quantizer, else Q4_0): 2880-wide gpt-oss rows, GLM's 1408.
  uint32_t expert_type = 12;       // Q4_K: ffn_{gate,up}_exps
  uint32_t expert_down_type = 12;  // ffn_down_exps (mixed files quantize it apart)
  uint32_t dense_type = 14;   // Q6_K: attn_{q,k,v,output}, eh_proj, dense and shared-expert FFNs
  uint32_t output_type = 14;  // Q6_K: output.weight
  uint32_t embd_type = 12;    // Q4_K: token_embd.weight
  uint32_t norm_type = 0;     // F32: norms, biases, attention sinks, exp_probs_b
  uint32_t router_type = 0;   // F32: ffn_gate_inp
  uint64_t seed = 1;
};

// The sizes every shape sets together (presets, tests), written into c by set_shape.
struct MoeShape {
  int n_layer, n_embd, n_head, n_head_kv, head_dim, n_expert, n_expert_used, n_ff_exp, n_vocab;
};
void set_shape(const MoeShape& s, MoeModelConfig* c);

// Named shapes (the architecture included), listed by preset_names():
//   qwen3-30b-a3b  Qwen3-30B-A3B's exact shapes and its usual Q4_K/Q6_K mix
//   bench-1b       qwen3moe, ~1.0 B parameters, ~0.19 B active per token
//   gpt-oss-120b   gpt-oss-120b: 116.8 B, 5.1 B active; MXFP4 experts, Q8_0 rest
//   gpt-oss-20b    gpt-oss-20b: 20.9 B, 3.6 B active; the same types
//   glm4.5-air     GLM-4.5-Air: 106.9 B (+2.4 B nextn block), 12.8 B active; Q4_K/Q6_K
// Every field can be overridden afterwards (n_layer to cut a model to fit).
// False for an unknown name.
bool apply_preset(const std::string& name, MoeModelConfig* c);
std::vector<std::string> preset_names();

// "q4_K", "Q8_0", "f32", ... -> type id; false when the name is unknown or the
// type has no weight quantizer (artifact/weight_quant.h).
bool parse_type(const std::string& name, uint32_t* type_id);

// Problems with the shapes (block sizes, head counts, ...); empty when valid.
std::string validate(const MoeModelConfig& c);

struct ParamCounts {
  uint64_t total = 0;        // every parameter in the file (nextn blocks included)
  uint64_t active = 0;       // read per token by the trunk: dense weights, k experts per layer, one embedding row
  uint64_t nextn = 0;        // of total: the MTP (nextn) blocks
  uint64_t output = 0;       // of total and active: the output head (output.weight)
  uint64_t file_bytes = 0;   // tensor data bytes
};
ParamCounts count_params(const MoeModelConfig& c);

// The tensors whose type is not the configured one (see the fallback rule at
// the types above), one line per kind: "ffn_down_exps.weight: q4_K -> q5_0 (x24)".
std::vector<std::string> type_fallbacks(const MoeModelConfig& c);

// The synthetic tokenizer: 256 byte tokens (GPT-2 byte-to-unicode texts),
// then merged tokens built from random pairs of earlier ones (one merge each),
// then <|endoftext|>, <|im_start|>, <|im_end|> as control tokens; n_vocab
// entries in all.
struct SynthVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;  // GGUF token_type: 1 normal, 3 control
  std::vector<std::string> merges;
  int32_t endoftext = -1, im_start = -1, im_end = -1;
};
SynthVocab make_vocab(int n_vocab, uint64_t seed);

// Writes the model. n_threads 0 = all hardware threads. progress (optional)
// is called with a one-line message now and then.
bool write_moe_model(const MoeModelConfig& c, const std::string& path, int n_threads, std::string* error,
                     void (*progress)(const char* msg) = nullptr);

}  // namespace guild::synth
