// llama: the Llama family, with or without experts (Mixtral-style when
// llama.expert_count > 0). Adjacent-pair ("normal") rope, no q/k norm; the
// expert FFN width is llama.feed_forward_length; MoE gate is softmax, top-k,
// weights renormalised.
#include "models/runner.h"

namespace guild {
namespace {

bool load_llama(const gguf::ModelFiles& files, ModelHparams* hp, std::string* error) {
  if (!load_standard_hparams(files, hp, error)) return false;
  hp->rope.style = RopeStyle::Norm;
  hp->qk_norm = false;
  if (hp->n_expert > 0) hp->n_ff_exp = hp->n_ff;  // Mixtral: experts use feed_forward_length
  if (hp->rope.n_rot != hp->head_dim_k) {
    *error = "llama.rope.dimension_count (" + std::to_string(hp->rope.n_rot) + ") must equal the head size (" +
             std::to_string(hp->head_dim_k) + ")";
    return false;
  }
  return check_standard_shapes(files, hp, hp->n_expert > 0 ? "feed_forward_length" : "expert_feed_forward_length", error);
}

}  // namespace

extern const RunnerDescriptor kLlamaRunner{"llama", load_llama, bind_standard_dense, bind_standard_experts,
                                           build_standard_recipe};

}  // namespace guild
