// The model's weights, bound once at load to views of the mapped GGUF data
// (or small owned float copies for norm vectors). Names follow GGUF's tensor
// names; shapes are in comments as [ne0, ne1, ne2] (ne0 = row length).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/kernel_table.h"
#include "models/hparams.h"
#include "ops/matmul.h"

namespace guild {
namespace gguf { class ModelFiles; struct TensorInfo; }

// A stack of n_expert matrices stored as one 3-D tensor [n_in, n_out, n_expert].
struct ExpertMatrices {
  QMatrix first;          // expert 0
  int64_t n_expert = 0;
  size_t expert_bytes = 0;

  QMatrix expert(int64_t e) const {
    QMatrix m = first;
    m.data = first.data + static_cast<size_t>(e) * expert_bytes;
    return m;
  }
};

struct LayerWeights {
  const float* attn_norm = nullptr;  // [n_embd]
  QMatrix wq;                         // [n_embd, n_head*head_dim_k]
  QMatrix wk;                         // [n_embd, n_head_kv*head_dim_k]
  QMatrix wv;                         // [n_embd, n_head_kv*head_dim_v]
  QMatrix wo;                         // [n_head*head_dim_v, n_embd]
  const float* q_norm = nullptr;      // [head_dim_k] (qk_norm archs)
  const float* k_norm = nullptr;      // [head_dim_k]
  const float* ffn_norm = nullptr;    // [n_embd]
  // MoE layers.
  QMatrix router;                     // ffn_gate_inp [n_embd, n_expert]
  ExpertMatrices gate_exps;           // [n_embd, n_ff_exp, n_expert]
  ExpertMatrices up_exps;             // [n_embd, n_ff_exp, n_expert]
  ExpertMatrices down_exps;           // [n_ff_exp, n_embd, n_expert]
  // Dense FFN layers.
  QMatrix ffn_gate, ffn_up, ffn_down;
  // Optional tensors of architectures beyond the standard decoder (null when
  // absent; the layer's recipe says which ones it uses).
  const float* bq = nullptr;           // attn_q.bias [n_head*head_dim_k]
  const float* bk = nullptr;           // attn_k.bias [n_head_kv*head_dim_k]
  const float* bv = nullptr;           // attn_v.bias [n_head_kv*head_dim_v]
  const float* bo = nullptr;           // attn_output.bias [n_embd]
  const float* attn_sinks = nullptr;   // attn_sinks [n_head]: a learned logit in every softmax
  const float* router_bias = nullptr;  // ffn_gate_inp.bias [n_expert]
  const float* gate_exps_bias = nullptr;  // ffn_gate_exps.bias [n_expert][n_ff_exp]
  const float* up_exps_bias = nullptr;    // ffn_up_exps.bias [n_expert][n_ff_exp]
  const float* down_exps_bias = nullptr;  // ffn_down_exps.bias [n_expert][n_embd]
  const float* exp_probs_b = nullptr;     // exp_probs_b.bias [n_expert]: added for the choice only (glm4moe)
  QMatrix shexp_gate, shexp_up, shexp_down;  // ffn_{gate,up,down}_shexp: the shared expert
  bool is_moe() const { return router.data != nullptr; }
};

// Bytes the binder copied out of the mapping (aligned_alloc'ed).
struct AlignedBytesFree { void operator()(uint8_t* p) const; };
using AlignedBytes = std::unique_ptr<uint8_t[], AlignedBytesFree>;

// The alignment the kernels may assume for a tensor's data: that of the
// type's block struct (core/quant_blocks.h) or scalar. A row never starts less
// aligned than its first block, so this holds for every row and block.
size_t tensor_data_alignment(uint32_t type_id);

// A multi-token-prediction ("nextn") block (glm4moe, deepseek-v3): from token
// t's embedding and the trunk's output row h of the position before, it
// predicts the token after t: x = eh_proj(concat(enorm(embed(t)), hnorm(h))),
// one decoder block, shared_head_norm, the head.
struct NextnWeights {
  LayerWeights block;                 // the block's attention, norms, router, experts
  QMatrix eh_proj;                    // [2 n_embd, n_embd]
  const float* enorm = nullptr;       // [n_embd]
  const float* hnorm = nullptr;       // [n_embd]
  const float* shared_head_norm = nullptr;  // [n_embd]
  QMatrix embed;                      // nextn.embed_tokens, else token_embd
  QMatrix head;                       // nextn.shared_head_head, else output
};

struct ModelWeights {
  QMatrix token_embd;                 // [n_embd, n_vocab]
  const float* output_norm = nullptr; // [n_embd]
  QMatrix output;                     // [n_embd, n_vocab] (token_embd when tied)
  bool output_tied = false;
  std::vector<LayerWeights> layers;
  std::vector<NextnWeights> nextn;    // [n_nextn]: the MTP drafter's blocks
  // Owned float copies of 1-D tensors stored in other types.
  std::vector<std::unique_ptr<float[]>> owned;
  // Aligned copies of tensors whose data is not aligned for their type in
  // the file (general.alignment below the type's alignment).
  std::vector<AlignedBytes> owned_bytes;
};

// Looks tensors up by name, checks shape and type support, and builds views:
// zero-copy into the mapping where the data is aligned for its type, else an
// aligned copy owned by `owner` (a file written with a small
// general.alignment still runs; the kernels never see a misaligned block).
class TensorBinder {
 public:
  TensorBinder(const gguf::ModelFiles& files, const CpuKernelTable& kernels, ModelWeights& owner)
      : files_(files), kernels_(kernels), owner_(owner) {}

  // Most bytes the aligned copies may take in all (0 = no copy allowed).
  void set_copy_limit(uint64_t bytes) { copy_limit_ = bytes; }
  // A pre-flight check (GuildModel::check): every lookup, shape, kernel and
  // copy-limit test runs as in a load, but nothing is copied, converted or
  // read; the views point into the mapping and must never be used.
  void set_check_only(bool on) { check_only_ = on; }

  // Each returns false and sets error() on a missing tensor (unless optional),
  // a shape mismatch, or a type without a kernel.
  bool matrix(const std::string& name, int64_t n_in, int64_t n_out, QMatrix* out, bool optional = false);
  bool experts(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert, ExpertMatrices* out);
  bool vector(const std::string& name, int64_t n, const float** out, ModelWeights& owner, bool optional = false);
  // A 2-D tensor [n0, n1] as n1 float rows of n0 (per-expert biases).
  bool table(const std::string& name, int64_t n0, int64_t n1, const float** out, ModelWeights& owner,
             bool optional = false);
  bool has(const std::string& name) const;

  const std::string& error() const { return error_; }
  uint64_t bound_bytes() const { return bound_bytes_; }
  uint64_t copied_bytes() const { return copied_bytes_; }
  int copied_tensors() const { return copied_tensors_; }

 private:
  const gguf::TensorInfo* lookup(const std::string& name, bool optional);
  bool floats(const std::string& name, std::initializer_list<int64_t> shape, int64_t n, const float** out,
              ModelWeights& owner, bool optional);
  // t's data, aligned for its type (copied when the mapping's is not); null
  // and error() when the copy cannot be made.
  const uint8_t* aligned_data(const gguf::TensorInfo& t);
  bool check_shape(const gguf::TensorInfo& t, std::initializer_list<int64_t> want);
  bool bind_kernels(const gguf::TensorInfo& t, const TypeKernels** out);

  const gguf::ModelFiles& files_;
  const CpuKernelTable& kernels_;
  ModelWeights& owner_;
  std::string error_;
  uint64_t bound_bytes_ = 0;
  uint64_t copy_limit_ = UINT64_MAX;
  bool check_only_ = false;
  uint64_t copied_bytes_ = 0;
  int copied_tensors_ = 0;
};

}  // namespace guild
