// A runner describes one architecture: how to read its hyper-parameters and
// bind its tensors. Architecture facts are fields and functions of one
// descriptor, looked up by name once at load (never in the token loop).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/hparams.h"
#include "models/recipe.h"
#include "models/weights.h"

namespace guild {
namespace gguf { class ModelFiles; }

struct RunnerDescriptor {
  std::string_view arch;  // general.architecture
  bool (*load_hparams)(const gguf::ModelFiles& files, ModelHparams* hp, std::string* error);
  // Load stage 9: embeddings, attention, norms, routers, dense FFNs, output head.
  bool (*bind_dense)(TensorBinder& binder, const ModelHparams& hp, ModelWeights* w, std::string* error);
  // Load stage 10: the routed experts.
  bool (*bind_experts)(TensorBinder& binder, const ModelHparams& hp, ModelWeights* w, std::string* error);
  // After binding: the layers as executor steps (models/recipe.h).
  bool (*build_recipe)(const ModelHparams& hp, const ModelWeights& w, ModelRecipe* out, std::string* error);
};

const RunnerDescriptor* find_runner(std::string_view arch);
std::vector<std::string_view> supported_architectures();

// Reads "<arch>.<key>" metadata with clear errors; used by the runners.
// Integers are checked against [lo, hi] (models/hparam_limits.h), floats must
// be finite; each failure is one line naming the key and the value.
class HparamReader {
 public:
  HparamReader(const gguf::ModelFiles& files, std::string_view arch) : files_(files), arch_(arch) {}
  bool required_int(std::string_view key, int lo, int hi, int* out);
  bool optional_int(std::string_view key, int lo, int hi, int* out);  // leaves *out when absent
  bool optional_float(std::string_view key, float* out);               // finite; leaves *out when absent
  // Finite and > 0 (epsilons, rope base, scaling factors).
  bool optional_positive_float(std::string_view key, float* out);
  bool optional_string(std::string_view key, std::string* out);
  bool has(std::string_view key) const;
  std::string full(std::string_view key) const { return std::string(arch_) + "." + std::string(key); }
  const std::string& error() const { return error_; }

 private:
  bool optional_int64(std::string_view key, int64_t* out, bool* present);
  const gguf::ModelFiles& files_;
  std::string_view arch_;
  std::string error_;
};

// Shared by the standard pre-norm decoder architectures (llama family,
// qwen3moe): attention block hparams, vocab size, rope and expert counts.
bool load_standard_hparams(const gguf::ModelFiles& files, ModelHparams* hp, std::string* error);
// Binds token_embd, output_norm and output (token_embd when absent: tied) and
// sizes w->layers; false with b.error() set.
bool bind_embeddings_and_head(TensorBinder& b, const ModelHparams& hp, ModelWeights* w);
// Binds layer l's attn_norm and attn_{q,k,v,output}.weight, the q/k/v .bias
// tensors when `qkv_bias` and attn_output.bias when `out_bias`; false with
// b.error() set.
bool bind_attention(TensorBinder& b, const ModelHparams& hp, int l, bool qkv_bias, bool out_bias, LayerWeights* L,
                    ModelWeights* w);
// Binds token_embd, output_norm, output (tied if absent), per-layer attention,
// norms, routers (MoE layers: blk.N.ffn_gate_inp exists) and dense FFNs.
bool bind_standard_dense(TensorBinder& b, const ModelHparams& hp, ModelWeights* w, std::string* error);
// Binds layer l's ffn_{gate,up,down}_exps (block index l: a trunk layer or an
// MTP block after them); false with b.error() set.
bool bind_layer_experts(TensorBinder& b, const ModelHparams& hp, int l, LayerWeights* L);
// Binds ffn_{gate,up,down}_exps of every MoE layer.
bool bind_standard_experts(TensorBinder& b, const ModelHparams& hp, ModelWeights* w, std::string* error);

// Load stage 4, after the runner has settled every hyper-parameter: checks
// each one a tensor also has against every such tensor of the standard
// decoder (models/shape_checks.cpp), so a mismatch is one line naming the
// key, its value and the tensor before anything is sized from it. The
// expert FFN width comes from `expert_ff_key` ("expert_feed_forward_length";
// "feed_forward_length" for Mixtral-style llama). Also sets hp->n_ff to 0
// when no layer is dense: the key is then unused (qwen3moe files carry the
// dense width of the original model there) and must size nothing.
bool check_standard_shapes(const gguf::ModelFiles& files, ModelHparams* hp, std::string_view expert_ff_key,
                           std::string* error);

}  // namespace guild
