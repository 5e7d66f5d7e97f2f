// plan() (weight_layout.h): the checks and sizes behind CudaDecoder::estimate()
// and create(); plan_matrix / plan_vector add each weight tensor once.
#include "cuda/weight_layout.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "core/tensor_type.h"
#include "cuda/cuda_kernels.h"
#include "cuda/f16_fallback.h"

namespace guild::cuda {

namespace {

constexpr uint32_t kTypeF16 = static_cast<uint32_t>(TensorType::F16);

bool plan_matrix(Layout& L, const QMatrix& m, int64_t n_expert, size_t expert_bytes, std::string* error,
                 const char* what, const UploadPolicy& policy) {
  if (!m.data) return true;
  if (L.index.count(m.data)) return true;
  const bool native = matrix_type_supported(m.type) && !policy.forced(m.type);
  if (!native && !f16_fallback_available(m.type)) {
    *error = std::string("CUDA decoder: tensor type ") + std::string(tensor_type_name(m.type)) + " of " + what +
             " has no CUDA kernel and no CPU dequantizer";
    return false;
  }
  if (n_expert > 1 && expert_bytes != static_cast<size_t>(m.n_out) * m.row_bytes) {
    *error = std::string("CUDA decoder: expert stack ") + what + " is not contiguous";
    return false;
  }
  Upload u;
  u.src = m.data;
  u.rows = m.n_out * n_expert;
  u.row_bytes = m.row_bytes;
  u.src_type = m.type;
  u.n_in = m.n_in;
  u.to_f16 = !native;
  u.dev_type = native ? m.type : kTypeF16;
  // The F16 copy: n_in halves per row, padded like any row.
  u.stride = align_up(native ? m.row_bytes : static_cast<size_t>(m.n_in) * 2, 16);
  L.f16_uploads += u.to_f16;
  L.index[m.data] = L.uploads.size();
  L.uploads.push_back(u);
  return true;
}

bool plan_vector(Layout& L, const float* v, int64_t n) {
  if (!v || L.index.count(v)) return true;
  Upload u;
  u.src = reinterpret_cast<const uint8_t*>(v);
  u.rows = 1;
  u.row_bytes = static_cast<size_t>(n) * 4;
  u.stride = align_up(u.row_bytes, 16);
  L.index[v] = L.uploads.size();
  L.uploads.push_back(u);
  return true;
}

}  // namespace

bool plan(const ModelHparams& hp, const ModelWeights& w, const CudaDecoderOptions& o, Layout* out,
          std::string* error, const UploadPolicy& policy) {
  Layout& L = *out;
  L.hybrid = !o.expert_cache_slots.empty() && hp.n_expert > 0;
  if (hp.head_dim_k != hp.head_dim_v) { *error = "CUDA decoder: head_dim_k != head_dim_v is not supported"; return false; }
  if (!attention_head_dim_supported(hp.head_dim_k, false) || !attention_head_dim_supported(hp.head_dim_k, true)) {
    *error = "CUDA decoder: head size " + std::to_string(hp.head_dim_k) + " is not supported";
    return false;
  }
  if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0) { *error = "CUDA decoder: bad head counts"; return false; }
  if (hp.rope.n_rot > hp.head_dim_k || hp.rope.n_rot % 2 != 0) { *error = "CUDA decoder: bad rope dims"; return false; }
  if (hp.n_expert > 0 && (hp.n_expert > 512 || hp.n_expert_used > 32 || hp.n_expert_used < 1)) {
    *error = "CUDA decoder: expert counts beyond the kernels' limits (512 experts, 32 used)";
    return false;
  }
  if (hp.n_embd % 32 != 0) { *error = "CUDA decoder: n_embd must be a multiple of 32"; return false; }
  if (o.n_ctx < 1 || o.max_tokens < 1 || o.max_tokens > 65535) { *error = "CUDA decoder: bad n_ctx / max_tokens"; return false; }

  if (!plan_matrix(L, w.token_embd, 1, 0, error, "token_embd", policy) ||
      !plan_matrix(L, w.output, 1, 0, error, "output", policy) ||
      !plan_vector(L, w.output_norm, hp.n_embd))
    return false;
  // A layer's tensors; its expert stacks resident (uploaded whole) unless the
  // placement is hybrid and the layer is a trunk layer (cached, streamed).
  auto plan_layer = [&](const LayerWeights& lw, const std::string& n, bool resident_experts) {
    if (!plan_vector(L, lw.attn_norm, hp.n_embd) || !plan_vector(L, lw.ffn_norm, hp.n_embd) ||
        !plan_vector(L, lw.q_norm, hp.head_dim_k) || !plan_vector(L, lw.k_norm, hp.head_dim_k))
      return false;
    // The tensors of step parameters (biases, sinks): null where the architecture has none.
    const int64_t q_dim = static_cast<int64_t>(hp.n_head) * hp.head_dim_k;
    const int64_t kv_dim = static_cast<int64_t>(hp.n_head_kv) * hp.head_dim_k;
    const int64_t n_exp = std::max(1, hp.n_expert);
    for (auto [v, len] : {std::pair{lw.bq, q_dim}, {lw.bk, kv_dim}, {lw.bv, kv_dim}, {lw.bo, int64_t{hp.n_embd}},
                          {lw.attn_sinks, int64_t{hp.n_head}}, {lw.router_bias, n_exp}, {lw.exp_probs_b, n_exp},
                          {lw.gate_exps_bias, n_exp * hp.n_ff_exp}, {lw.up_exps_bias, n_exp * hp.n_ff_exp},
                          {lw.down_exps_bias, n_exp * hp.n_embd}})
      plan_vector(L, v, len);
    for (auto [m, name] : {std::pair{&lw.wq, ".attn_q"}, {&lw.wk, ".attn_k"}, {&lw.wv, ".attn_v"},
                           {&lw.wo, ".attn_output"}, {&lw.router, ".ffn_gate_inp"}, {&lw.ffn_gate, ".ffn_gate"},
                           {&lw.ffn_up, ".ffn_up"}, {&lw.ffn_down, ".ffn_down"}, {&lw.shexp_gate, ".ffn_gate_shexp"},
                           {&lw.shexp_up, ".ffn_up_shexp"}, {&lw.shexp_down, ".ffn_down_shexp"}})
      if (!plan_matrix(L, *m, 1, 0, error, (n + name).c_str(), policy)) return false;
    for (auto [e, name] : {std::pair{&lw.gate_exps, ".ffn_gate_exps"}, {&lw.up_exps, ".ffn_up_exps"},
                           {&lw.down_exps, ".ffn_down_exps"}}) {
      if (resident_experts) {
        if (!plan_matrix(L, e->first, e->n_expert, e->expert_bytes, error, (n + name).c_str(), policy)) return false;
      } else if (e->first.data && !matrix_type_supported(e->first.type)) {
        // Cache fills, streamed prefill and the GPU's reads of host experts
        // use the stored bytes: no F16 copy of a stack that stays on the host.
        *error = std::string("CUDA decoder: tensor type ") + std::string(tensor_type_name(e->first.type)) + " of " +
                 n + name + " has no CUDA kernel (hybrid placement keeps experts in their own type; load every expert "
                 "on the GPU to run them as F16)";
        return false;
      } else if (e->first.data && e->expert_bytes != static_cast<size_t>(e->first.n_out) * e->first.row_bytes) {
        // Cache fills and staging copy whole runs of experts as rows.
        *error = "CUDA decoder: " + n + name + ": expert matrices are not stored back to back";
        return false;
      }
    }
    if (lw.is_moe() && (!lw.gate_exps.first.data || !lw.up_exps.first.data || !lw.down_exps.first.data)) {
      *error = "CUDA decoder: " + n + " has a router but its experts are not bound";
      return false;
    }
    return true;
  };
  for (size_t l = 0; l < w.layers.size(); ++l)
    if (!plan_layer(w.layers[l], "blk." + std::to_string(l), !L.hybrid)) return false;
  // The MTP block: all of it on the device (its experts too, in any placement).
  if (o.nextn) {
    if (hp.n_nextn < 1 || w.nextn.empty()) {
      *error = "CUDA decoder: an MTP block asked for, but the model has none";
      return false;
    }
    const NextnWeights& m = w.nextn[0];
    const std::string n = "blk." + std::to_string(hp.n_layer) + ".nextn";
    if (!plan_layer(m.block, "blk." + std::to_string(hp.n_layer), true) ||
        !plan_matrix(L, m.eh_proj, 1, 0, error, (n + ".eh_proj").c_str(), policy) ||
        !plan_matrix(L, m.embed, 1, 0, error, (n + ".embed_tokens").c_str(), policy) ||
        !plan_matrix(L, m.head, 1, 0, error, (n + ".shared_head_head").c_str(), policy) ||
        !plan_vector(L, m.enorm, hp.n_embd) || !plan_vector(L, m.hnorm, hp.n_embd) ||
        !plan_vector(L, m.shared_head_norm, hp.n_embd))
      return false;
  }
  size_t off = 0;
  for (Upload& u : L.uploads) {
    off = align_up(off, 256);
    u.offset = off;
    off += u.bytes();
  }
  L.weight_bytes = align_up(off, 256);
  if (L.hybrid) {
    if (o.expert_cache_slots.size() != w.layers.size()) {
      *error = "CUDA decoder: expert_cache_slots needs one entry per layer";
      return false;
    }
    size_t coff = 0;
    L.caches.resize(w.layers.size());
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const LayerWeights& lw = w.layers[l];
      Layout::Cache& c = L.caches[l];
      const int slots = o.expert_cache_slots[l];
      if (!lw.is_moe()) continue;
      if (slots < 0 || slots > hp.n_expert) {
        *error = "CUDA decoder: layer " + std::to_string(l) + " cache of " + std::to_string(slots) + " experts (model has " +
                 std::to_string(hp.n_expert) + ")";
        return false;
      }
      c.slots = slots;
      c.gate_stride = align_up(lw.gate_exps.first.row_bytes, 16);
      c.up_stride = align_up(lw.up_exps.first.row_bytes, 16);
      c.down_stride = align_up(lw.down_exps.first.row_bytes, 16);
      for (auto [o_off, stride, m] : {std::tuple{&c.gate_off, c.gate_stride, &lw.gate_exps.first},
                                      {&c.up_off, c.up_stride, &lw.up_exps.first},
                                      {&c.down_off, c.down_stride, &lw.down_exps.first}}) {
        coff = align_up(coff, 256);
        *o_off = coff;
        coff += static_cast<size_t>(slots) * static_cast<size_t>(m->n_out) * stride;
      }
    }
    L.cache_bytes = align_up(coff, 256);
    if (o.stream_prefill) {
      for (size_t l = 0; l < w.layers.size(); ++l) {
        const Layout::Cache& c = L.caches[l];
        if (!w.layers[l].is_moe()) continue;
        size_t b = 0;
        for (auto [stride, m] : {std::pair{c.gate_stride, &w.layers[l].gate_exps.first},
                                 {c.up_stride, &w.layers[l].up_exps.first}, {c.down_stride, &w.layers[l].down_exps.first}})
          b = align_up(b, 256) + static_cast<size_t>(hp.n_expert) * static_cast<size_t>(m->n_out) * stride;
        L.staging_bytes = std::max(L.staging_bytes, align_up(b, 256));
      }
    }
  }

  L.T = o.max_tokens;
  L.K = std::max(1, hp.n_expert_used);
  L.n_ff_max = std::max({hp.n_ff, hp.n_ff_exp, hp.n_ff_shexp});
  L.q_dim = hp.n_head * hp.head_dim_k;
  L.kv_dim = hp.n_head_kv * hp.head_dim_k;
  // (The MTP block's eh_proj reads rows of 2 n_embd.)
  const int widest_in = std::max({hp.n_embd * (o.nextn ? 2 : 1), L.q_dim, L.n_ff_max});
  L.widest = static_cast<int>(align_up(static_cast<size_t>(widest_in), 32));
  L.act_rows = L.T * L.K;
  L.logits_rows = std::min(L.T, 32);
  L.max_tiles = hp.n_expert > 0 ? moe_max_tiles(L.T, L.K, hp.n_expert) : 1;
  // KV: n_ctx rows per layer, a sliding-window layer's ring fewer.
  L.kv_rows.assign(static_cast<size_t>(hp.n_layer), o.n_ctx);
  L.kv_offset.assign(static_cast<size_t>(hp.n_layer), 0);
  size_t kv_elems = 0;
  for (int l = 0; l < hp.n_layer; ++l) {
    const int window = o.layers.empty() ? 0 : o.layers[static_cast<size_t>(l)].attention.sliding_window;
    L.kv_rows[l] = sliding_kv_rows(window, o.n_ctx, o.max_tokens, std::max(0, o.sliding_history));
    L.kv_offset[l] = kv_elems;
    kv_elems += 2 * static_cast<size_t>(L.kv_rows[l]) * L.kv_dim;
  }
  if (o.nextn) {  // the MTP block's own n_ctx rows, after the trunk's
    L.kv_rows.push_back(o.n_ctx);
    L.kv_offset.push_back(kv_elems);
    kv_elems += 2 * static_cast<size_t>(o.n_ctx) * L.kv_dim;
  }
  L.kv_bytes = kv_elems * 2;

  const size_t T = L.T, K = L.K;
  size_t f = 0;  // floats
  f += 2 * T * hp.n_embd;                                 // x, xn
  f += T * L.q_dim + 2 * T * L.kv_dim + T * L.q_dim;      // q, k, v, attn
  f += T * std::max(1, hp.n_expert);                      // router logits
  L.ffn_floats = std::max({T * K * hp.n_ff_exp, T * static_cast<size_t>(hp.n_ff), T * static_cast<size_t>(hp.n_ff_shexp)});
  f += 3 * L.ffn_floats;                                  // gate, up, h
  f += T * K * hp.n_embd;                                 // per-slot expert outputs
  f += static_cast<size_t>(L.logits_rows) * hp.n_vocab;   // logits
  f += T * std::max(2, hp.rope.n_rot);                    // rope cos/sin
  f += attention_decode_workspace_floats(hp.n_head, hp.head_dim_k, o.n_ctx);
  if (o.nextn) f += (T + 2) * hp.n_embd + 2 * T * hp.n_embd + 1 + 4 * 64;  // h table + step row, eh_proj input, p_top1 (+ their alignment)
  size_t bytes = f * 4 + 64 * 256;                        // + alignment slack
  bytes += static_cast<size_t>(L.act_rows) * L.widest;                 // q8 quants
  bytes += static_cast<size_t>(L.act_rows) * (L.widest / 32) * 4;      // q8 scales
  bytes += static_cast<size_t>(L.act_rows) * L.widest * 2;             // f16
  bytes += (2 * T + 2 + 3 * T * K + 2 * (hp.n_expert + 1) + L.max_tiles + 4) * 4;  // ints
  bytes += argmax_workspace_bytes(L.logits_rows) + 256;                              // argmax partials
  bytes += 256;                                                                      // routing counter
  if (L.hybrid)  // cache and staging ids, slot and staging maps, routing counts, pending / seq / error
    bytes += (2 * T * K + K + 3 * static_cast<size_t>(hp.n_layer) * hp.n_expert + 3) * 4 + 9 * 256;
  L.scratch_bytes = align_up(bytes, 256);
  return true;
}

}  // namespace guild::cuda
