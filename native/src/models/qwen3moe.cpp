// qwen3moe (Qwen3-30B-A3B family) and its dense sibling qwen3: the standard
// decoder with per-head q/k RMSNorm before NEOX-style rope. The MoE gate is a
// softmax over all experts, top-k, and the k weights renormalised — llama.cpp
// always renormalises for qwen3moe (norm_topk_prob has no GGUF key).
#include "models/runner.h"

namespace guild {
namespace {

bool load_qwen3(const gguf::ModelFiles& files, ModelHparams* hp, std::string* error) {
  if (!load_standard_hparams(files, hp, error)) return false;
  hp->rope.style = RopeStyle::Neox;
  hp->qk_norm = true;
  return check_standard_shapes(files, hp, "expert_feed_forward_length", error);
}

}  // namespace

extern const RunnerDescriptor kQwen3MoeRunner{"qwen3moe", load_qwen3, bind_standard_dense, bind_standard_experts,
                                              build_standard_recipe};
extern const RunnerDescriptor kQwen3Runner{"qwen3", load_qwen3, bind_standard_dense, bind_standard_experts,
                                           build_standard_recipe};

}  // namespace guild
