// check_standard_shapes (models/runner.h): every hyper-parameter that sizes
// something is compared with every tensor of the standard decoder that has
// that dimension, before anything is allocated from it. The binder (stage 9)
// checks whole shapes again; this pass exists to say which key is wrong.
#include <string>

#include "artifact/gguf.h"
#include "models/runner.h"

namespace guild {
namespace {

class ShapeChecker {
 public:
  ShapeChecker(const gguf::ModelFiles& files, const ModelHparams& hp) : files_(files), arch_(hp.arch) {}

  // "qwen3moe.embedding_length", or with " (absent: <fallback>)" when the
  // file lacks the key and the value was derived.
  std::string key(std::string_view k, const char* fallback = nullptr) const {
    std::string full = arch_ + "." + std::string(k);
    if (fallback && !files_.find(full)) full += " (absent: " + std::string(fallback) + ")";
    return full;
  }

  // Tensor `name`, when present, must have ne[dim] == want; `what` names the
  // key(s) and how `want` follows from them.
  bool dim(const std::string& name, int d, int64_t want, const std::string& what) {
    const gguf::TensorInfo* t = files_.find_tensor(name);
    if (!t || t->ne[d] == want) return true;
    error_ = what + " = " + std::to_string(want) + " does not match tensor '" + name + "' (ne[" + std::to_string(d) +
             "] = " + std::to_string(t->ne[d]) + ")";
    return false;
  }

  bool has(const std::string& name) const { return files_.find_tensor(name) != nullptr; }
  const std::string& error() const { return error_; }

 private:
  const gguf::ModelFiles& files_;
  std::string arch_;
  std::string error_;
};

std::string blk(int layer, const char* name) { return "blk." + std::to_string(layer) + "." + name; }

std::string times(const std::string& a, int va, const std::string& b, int vb) {
  return a + " x " + b + " (" + std::to_string(va) + " x " + std::to_string(vb) + ")";
}

}  // namespace

bool check_standard_shapes(const gguf::ModelFiles& files, ModelHparams* hp, std::string_view expert_ff_key,
                           std::string* error) {
  ShapeChecker c(files, *hp);
  const std::string embd = c.key("embedding_length");
  const std::string heads = c.key("attention.head_count");
  const std::string heads_kv = c.key("attention.head_count_kv", "attention.head_count");
  const std::string dim_k = c.key("attention.key_length", "embedding_length / attention.head_count");
  const std::string dim_v = c.key("attention.value_length", "attention.key_length");
  const std::string experts = c.key("expert_count");
  const std::string ff = c.key("feed_forward_length");
  const std::string ff_exp = expert_ff_key == "feed_forward_length"
                                 ? ff
                                 : c.key(expert_ff_key, "feed_forward_length / expert_used_count");
  const int64_t q_dim = static_cast<int64_t>(hp->n_head) * hp->head_dim_k;
  const int64_t k_dim = static_cast<int64_t>(hp->n_head_kv) * hp->head_dim_k;
  const int64_t v_dim = static_cast<int64_t>(hp->n_head_kv) * hp->head_dim_v;
  const int64_t o_dim = static_cast<int64_t>(hp->n_head) * hp->head_dim_v;
  const std::string q_what = times(heads, hp->n_head, dim_k, hp->head_dim_k);
  const std::string k_what = times(heads_kv, hp->n_head_kv, dim_k, hp->head_dim_k);
  const std::string v_what = times(heads_kv, hp->n_head_kv, dim_v, hp->head_dim_v);
  const std::string o_what = times(heads, hp->n_head, dim_v, hp->head_dim_v);
  const std::string vocab = "the vocabulary size (rows of token_embd.weight)";

  bool ok = c.dim("token_embd.weight", 0, hp->n_embd, embd) && c.dim("output_norm.weight", 0, hp->n_embd, embd) &&
            c.dim("output.weight", 0, hp->n_embd, embd) && c.dim("output.weight", 1, hp->n_vocab, vocab);
  if (ok) {
    // The tokenizer's size is checked again when it is built (stage 14);
    // here it is compared before sessions size their logits from n_vocab.
    const gguf::MetaValue* tokens = files.find("tokenizer.ggml.tokens");
    if (tokens && tokens->type == gguf::ValueType::ARRAY && tokens->array->count != static_cast<uint64_t>(hp->n_vocab)) {
      *error = "metadata key 'tokenizer.ggml.tokens' has " + std::to_string(tokens->array->count) +
               " entries but tensor 'token_embd.weight' has " + std::to_string(hp->n_vocab) + " rows";
      return false;
    }
  }
  bool any_dense = false;
  for (int l = 0; ok && l < hp->n_layer; ++l) {
    ok = c.dim(blk(l, "attn_norm.weight"), 0, hp->n_embd, embd) && c.dim(blk(l, "ffn_norm.weight"), 0, hp->n_embd, embd) &&
         c.dim(blk(l, "attn_q.weight"), 0, hp->n_embd, embd) && c.dim(blk(l, "attn_q.weight"), 1, q_dim, q_what) &&
         c.dim(blk(l, "attn_k.weight"), 0, hp->n_embd, embd) && c.dim(blk(l, "attn_k.weight"), 1, k_dim, k_what) &&
         c.dim(blk(l, "attn_v.weight"), 0, hp->n_embd, embd) && c.dim(blk(l, "attn_v.weight"), 1, v_dim, v_what) &&
         c.dim(blk(l, "attn_output.weight"), 0, o_dim, o_what) &&
         c.dim(blk(l, "attn_output.weight"), 1, hp->n_embd, embd);
    if (ok && hp->qk_norm)
      ok = c.dim(blk(l, "attn_q_norm.weight"), 0, hp->head_dim_k, dim_k) &&
           c.dim(blk(l, "attn_k_norm.weight"), 0, hp->head_dim_k, dim_k);
    if (!ok) break;
    // The same rule as bind_standard_dense: a router makes a layer MoE.
    if (hp->n_expert > 0 && c.has(blk(l, "ffn_gate_inp.weight"))) {
      ok = c.dim(blk(l, "ffn_gate_inp.weight"), 0, hp->n_embd, embd) &&
           c.dim(blk(l, "ffn_gate_inp.weight"), 1, hp->n_expert, experts);
      for (const char* name : {"ffn_gate_exps.weight", "ffn_up_exps.weight"})
        ok = ok && c.dim(blk(l, name), 0, hp->n_embd, embd) && c.dim(blk(l, name), 1, hp->n_ff_exp, ff_exp) &&
             c.dim(blk(l, name), 2, hp->n_expert, experts);
      ok = ok && c.dim(blk(l, "ffn_down_exps.weight"), 0, hp->n_ff_exp, ff_exp) &&
           c.dim(blk(l, "ffn_down_exps.weight"), 1, hp->n_embd, embd) &&
           c.dim(blk(l, "ffn_down_exps.weight"), 2, hp->n_expert, experts);
    } else {
      any_dense = true;
      if (hp->n_ff <= 0) {
        *error = "layer " + std::to_string(l) + " is dense but " + ff + " is missing";
        return false;
      }
      ok = c.dim(blk(l, "ffn_gate.weight"), 0, hp->n_embd, embd) && c.dim(blk(l, "ffn_gate.weight"), 1, hp->n_ff, ff) &&
           c.dim(blk(l, "ffn_up.weight"), 0, hp->n_embd, embd) && c.dim(blk(l, "ffn_up.weight"), 1, hp->n_ff, ff) &&
           c.dim(blk(l, "ffn_down.weight"), 0, hp->n_ff, ff) && c.dim(blk(l, "ffn_down.weight"), 1, hp->n_embd, embd);
    }
  }
  if (!ok) {
    *error = c.error();
    return false;
  }
  if (!any_dense) hp->n_ff = 0;
  return true;
}

}  // namespace guild
