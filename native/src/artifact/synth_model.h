// Synthetic qwen3moe models: every shape and tensor type chosen by the
// caller, random zero-mean weights, and a synthetic byte-level BPE tokenizer,
// written as GGUF through GgufWriter's streaming mode (layer by layer, from
// several threads, little memory). Used by guild-gen-model (benchmarks) and
// by tests. The same config and seed always give the same file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace guild::synth {

struct MoeModelConfig {
  std::string name = "guild-synthetic-qwen3moe";
  int n_layer = 2;
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
  // Tensor type ids (core/tensor_type.h).
  uint32_t expert_type = 12;       // Q4_K: ffn_{gate,up}_exps
  uint32_t expert_down_type = 12;  // ffn_down_exps (mixed files quantize it apart)
  uint32_t dense_type = 14;   // Q6_K: attn_{q,k,v,output}
  uint32_t output_type = 14;  // Q6_K: output.weight
  uint32_t embd_type = 12;    // Q4_K: token_embd.weight
  uint32_t norm_type = 0;     // F32: norms
  uint32_t router_type = 0;   // F32: ffn_gate_inp
  uint64_t seed = 1;
};

// Named shapes: "qwen3-30b-a3b" (Qwen3-30B-A3B's exact shapes and its usual
// Q4_K/Q6_K mix) and "bench-1b" (~1.0 B parameters, ~0.19 B active per token).
// False for an unknown name.
bool apply_preset(const std::string& name, MoeModelConfig* c);

// "q4_K", "Q8_0", "f32", ... -> type id; false when the name is unknown or the
// type has no weight quantizer (artifact/weight_quant.h).
bool parse_type(const std::string& name, uint32_t* type_id);

// Problems with the shapes (block sizes, head counts, ...); empty when valid.
std::string validate(const MoeModelConfig& c);

struct ParamCounts {
  uint64_t total = 0;        // every parameter
  uint64_t active = 0;       // read per token: dense weights, k experts per layer, one embedding row
  uint64_t file_bytes = 0;   // tensor data bytes
};
ParamCounts count_params(const MoeModelConfig& c);

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
