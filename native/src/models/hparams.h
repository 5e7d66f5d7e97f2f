// Shape and numeric settings of a model, read from GGUF metadata by the
// architecture's runner (models/<arch>.cpp).
#pragma once
#include <cstdint>
#include <string>

#include "ops/rope.h"

namespace guild {

struct ModelHparams {
  std::string arch;
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim_k = 0;   // attention.key_length (n_embd / n_head if absent)
  int head_dim_v = 0;   // attention.value_length
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_ff = 0;         // dense FFN width; 0 when no layer is dense (the key is then unused)
  int n_expert = 0;     // 0 = dense model
  int n_expert_used = 0;
  int n_ff_exp = 0;     // expert FFN width
  int n_ff_shexp = 0;   // shared-expert FFN width (glm4moe, deepseek2); 0 = none
  int n_dense_lead = 0; // leading_dense_block_count: layers [0, n) are dense
  int n_nextn = 0;      // nextn_predict_layers: MTP blocks after the n_layer trunk layers (ModelWeights::nextn)
  float expert_weights_scale = 1.0f;  // expert_weights_scale: factor on the routing weights
  bool expert_weights_norm = false;   // expert_weights_norm: routing weights renormalised
  float rms_eps = 1e-6f;
  RopeParams rope;
  bool qk_norm = false;  // per-head RMSNorm of q and k before rope (qwen3)
  int sliding_window = 0;  // attention.sliding_window (gpt-oss); which layers use it is the recipe's choice
};

}  // namespace guild
