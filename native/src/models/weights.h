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
  bool is_moe() const { return router.data != nullptr; }
};

struct ModelWeights {
  QMatrix token_embd;                 // [n_embd, n_vocab]
  const float* output_norm = nullptr; // [n_embd]
  QMatrix output;                     // [n_embd, n_vocab] (token_embd when tied)
  bool output_tied = false;
  std::vector<LayerWeights> layers;
  // Owned float copies of 1-D tensors stored in other types.
  std::vector<std::unique_ptr<float[]>> owned;
};

// Looks tensors up by name, checks shape and type support, and builds views.
class TensorBinder {
 public:
  TensorBinder(const gguf::ModelFiles& files, const CpuKernelTable& kernels)
      : files_(files), kernels_(kernels) {}

  // Each returns false and sets error() on a missing tensor (unless optional),
  // a shape mismatch, or a type without a kernel.
  bool matrix(const std::string& name, int64_t n_in, int64_t n_out, QMatrix* out, bool optional = false);
  bool experts(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert, ExpertMatrices* out);
  bool vector(const std::string& name, int64_t n, const float** out, ModelWeights& owner, bool optional = false);
  bool has(const std::string& name) const;

  const std::string& error() const { return error_; }
  uint64_t bound_bytes() const { return bound_bytes_; }

 private:
  const gguf::TensorInfo* lookup(const std::string& name, bool optional);
  bool check_shape(const gguf::TensorInfo& t, std::initializer_list<int64_t> want);
  bool bind_kernels(const gguf::TensorInfo& t, const TypeKernels** out);

  const gguf::ModelFiles& files_;
  const CpuKernelTable& kernels_;
  std::string error_;
  uint64_t bound_bytes_ = 0;
};

}  // namespace guild
