// The per-layer blocks a forward enqueues on the primary's stream: norm and
// matmul, the q/k/v projections, attention, the MoE block (all on the GPU, or
// hybrid: cached experts here while the CPU server, the peers or the staging
// area take the rest) with its expert passes, the dense FFN, and a forward's
// body and head. forward() and the decode graph captures run them; nothing
// here allocates or synchronizes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "cuda/cuda_kernels.h"
#include "cuda/decoder_impl.h"

namespace guild::cuda {

// y = src · Wᵀ for src.rows rows.
bool CudaDecoder::Impl::matmul(const DevMatrix& w, Src& src, float* y, int64_t y_stride, bool accumulate) {
  const int n = src.rows;
  if (!ensure(src, format_for(w, n))) return false;
  cudaError_t e;
  if (use_gemv(w, n)) {
    for (int c0 = 0; c0 < n; c0 += kGemvMaxCols) {
      e = gemv(w, view(src, c0), std::min(kGemvMaxCols, n - c0), y + static_cast<int64_t>(c0) * y_stride, y_stride,
               accumulate, stream);
      if (e != cudaSuccess) return fail("gemv", e);
    }
    return true;
  }
  e = gemm(w, view(src), n, y, y_stride, accumulate, stream);
  return e == cudaSuccess || fail("gemm", e);
}

// RMSNorm of rows of x into xn, also producing the formats the consumers want.
bool CudaDecoder::Impl::norm(float* xin, const float* w, int rows, Src* out,
                             std::initializer_list<const DevMatrix*> consumers, int n_for_format) {
  bool want_q8 = false, want_f16 = false;
  for (const DevMatrix* m : consumers) {
    if (!m || !m->data) continue;
    const ActFormat f = format_for(*m, n_for_format);
    want_q8 |= f == ActFormat::Q8_1;
    want_f16 |= f == ActFormat::F16;
  }
  const cudaError_t e = rms_norm(xin, nullptr, w, hp.rms_eps, rows, hp.n_embd, xn, want_q8 ? &act_q8 : nullptr,
                                 want_f16 ? act_f16 : nullptr, L.widest, stream);
  if (e != cudaSuccess) return fail("rms_norm", e);
  *out = Src{xn, rows, hp.n_embd, want_q8, want_f16};
  return true;
}

// q, k and v: one launch when the three are quantized alike and small
// steps use the matrix-vector path, else three products.
bool CudaDecoder::Impl::qkv_projections(const Layer& ly, Src& xs) {
  const int n = xs.rows;
  const bool one_launch = use_gemv(ly.wq, n) && act_format_gemv(ly.wq.type) == ActFormat::Q8_1 &&
                          ly.wk.type == ly.wq.type && ly.wv.type == ly.wq.type && ly.wk.row_stride == ly.wq.row_stride &&
                          ly.wv.row_stride == ly.wq.row_stride && ly.wk.n_in == ly.wq.n_in && ly.wv.n_in == ly.wq.n_in;
  const DevMatrix ws[3] = {ly.wq, ly.wk, ly.wv};
  const int64_t strides[3] = {L.q_dim, L.kv_dim, L.kv_dim};
  if (!use_gemv(ly.wq, n) && !use_gemv(ly.wk, n) && !use_gemv(ly.wv, n)) {
    // A prompt: the products of the matrices quantized alike in one grid
    // (k and v alone would leave most of the GPU idle; Q4_K_M-style files
    // keep v in another type, which then gets its own launch).
    float* const outs[3] = {q, k, v};
    bool done[3] = {false, false, false};
    for (int i = 0; i < 3; ++i) {
      if (done[i]) continue;
      DevMatrix group[3];
      float* ys[3];
      int64_t group_strides[3];
      int m = 0;
      for (int j = i; j < 3; ++j) {
        if (done[j] || ws[j].type != ws[i].type || ws[j].n_in != ws[i].n_in) continue;
        group[m] = ws[j];
        ys[m] = outs[j];
        group_strides[m] = strides[j];
        done[j] = true;
        ++m;
      }
      if (!ensure(xs, act_format_gemm(group[0].type))) return false;
      const cudaError_t e = gemm_multi(group, m, view(xs), n, ys, group_strides, stream);
      if (e != cudaSuccess) return fail("gemm_multi (q, k, v)", e);
    }
    return true;
  }
  if (!one_launch)
    return matmul(ly.wq, xs, q, L.q_dim, false) && matmul(ly.wk, xs, k, L.kv_dim, false) &&
           matmul(ly.wv, xs, v, L.kv_dim, false);
  if (!ensure(xs, ActFormat::Q8_1)) return false;
  for (int c0 = 0; c0 < n; c0 += kGemvMaxCols) {
    float* const ys[3] = {q + static_cast<int64_t>(c0) * L.q_dim, k + static_cast<int64_t>(c0) * L.kv_dim,
                          v + static_cast<int64_t>(c0) * L.kv_dim};
    const cudaError_t e = gemv_multi(ws, 3, view(xs, c0), std::min(kGemvMaxCols, n - c0), ys, strides, stream);
    if (e != cudaSuccess) return fail("gemv_multi (q, k, v)", e);
  }
  return true;
}

bool CudaDecoder::Impl::attention_block(const Layer& ly, int n) {
  Src xs{};
  if (!norm(x, ly.attn_norm, n, &xs, {&ly.wq, &ly.wk, &ly.wv}, n)) return false;
  if (!qkv_projections(ly, xs)) return false;
  cudaError_t e = cudaSuccess;
  if (ly.bq || ly.bk || ly.bv) {
    e = add_bias_rows(BiasRows{ly.bq ? q : nullptr, L.q_dim, ly.bq, L.q_dim},
                      BiasRows{ly.bk ? k : nullptr, L.kv_dim, ly.bk, L.kv_dim},
                      BiasRows{ly.bv ? v : nullptr, L.kv_dim, ly.bv, L.kv_dim}, n, stream);
    if (e != cudaSuccess) return fail("add_bias_rows (q, k, v)", e);
  }
  QkvPost p;
  p.q = q; p.q_stride = L.q_dim;
  p.k = k; p.k_stride = L.kv_dim;
  p.v = v; p.v_stride = L.kv_dim;
  p.q_norm = ly.steps.attention.qk_norm ? ly.q_norm : nullptr;
  p.k_norm = ly.steps.attention.qk_norm ? ly.k_norm : nullptr;
  p.eps = hp.rms_eps;
  p.n_head = hp.n_head;
  p.n_head_kv = hp.n_head_kv;
  p.head_dim = hp.head_dim_k;
  p.k_cache = ly.k_cache;
  p.v_cache = ly.v_cache;
  p.kv_rows = ly.kv_ring;
  // One token: attention applies qkv_post itself (one launch fewer).
  const bool post_in_attention = fused && n == 1;
  if (!post_in_attention && (e = qkv_post(p, rope, rope_cs, d_pos0, n, stream)) != cudaSuccess)
    return fail("qkv_post", e);

  AttnArgs a;
  a.q = q; a.q_stride = L.q_dim;
  a.k_cache = ly.k_cache;
  a.v_cache = ly.v_cache;
  a.n_head = hp.n_head;
  a.n_head_kv = hp.n_head_kv;
  a.head_dim = hp.head_dim_k;
  a.n_ctx = opt.n_ctx;
  a.n_kv_min = n == 1 ? decode_range_start(decode_range) + 1 : 0;
  a.n_kv_max = n == 1 ? decode_range_end(decode_range) : 0;
  a.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
  a.out = attn; a.out_stride = L.q_dim;
  a.window = ly.steps.attention.sliding_window;
  a.kv_rows = ly.kv_ring;
  a.sinks = ly.sinks;
  Src as{attn, n, L.q_dim};
  if (n == 1) {
    const bool q8 = format_for(ly.wo, 1) == ActFormat::Q8_1 && hp.head_dim_k % 32 == 0;
    e = post_in_attention
            ? attention_decode_post(a, p, rope, rope.n_rot > 0 ? rope_cs : nullptr, d_pos0, attn_work,
                                    q8 ? &act_q8 : nullptr, stream)
            : attention_decode(a, d_pos0, attn_work, q8 ? &act_q8 : nullptr, stream);
    if (e != cudaSuccess) return fail("attention_decode", e);
    as.q8 = q8;
  } else {
    e = attention_prefill(a, d_pos0, n, stream);
    if (e != cudaSuccess) return fail("attention_prefill", e);
  }
  if (!matmul(ly.wo, as, x, hp.n_embd, true)) return false;  // x += attn · Woᵀ
  if (!ly.bo) return true;
  e = add_bias_rows(BiasRows{x, hp.n_embd, ly.bo, hp.n_embd}, BiasRows{}, BiasRows{}, n, stream);
  return e == cudaSuccess || fail("add_bias_rows (attention output)", e);
}

// The FFN norm, the router and the gating of n rows: the normed rows in xs,
// the choices and their weights in groups.ids/weights.
bool CudaDecoder::Impl::route(const Layer& ly, int n, Src* xs) {
  const int kk = hp.n_expert_used;
  const RoutedExpertsStep& es = ly.steps.experts;
  const bool sigmoid = es.gating == Gating::SigmoidTopk;
  cudaError_t e;
  // gpt-oss's top-k-then-softmax equals softmax, top-k, renormalise (the
  // softmax's denominator cancels): moe_route serves both softmax gatings. A
  // router bias is added between the product and the routing (no fused launch).
  if (fused && n == 1 && !sigmoid && !ly.router_bias && moe_norm_route_supported(ly.router, kk)) {
    // Norm, router and top-k in one launch; the normed row in both formats
    // the expert passes (and the CPU's export) may read.
    const bool q8 = format_for(ly.gate_exps, 1) == ActFormat::Q8_1 || format_for(ly.up_exps, 1) == ActFormat::Q8_1;
    e = moe_norm_route(x, ly.ffn_norm, hp.rms_eps, ly.router, kk, xn, q8 ? &act_q8 : nullptr, router_logits,
                       groups.ids, groups.weights, route_counter, stream);
    if (e != cudaSuccess) return fail("moe_norm_route", e);
    *xs = Src{xn, 1, hp.n_embd, q8, false};
    return true;
  }
  if (!norm(x, ly.ffn_norm, n, xs, {&ly.router, &ly.gate_exps, &ly.up_exps}, n)) return false;
  if (!matmul(ly.router, *xs, router_logits, hp.n_expert, false)) return false;
  if (ly.router_bias &&
      (e = add_bias_rows(BiasRows{router_logits, hp.n_expert, ly.router_bias, hp.n_expert}, BiasRows{}, BiasRows{}, n,
                         stream)) != cudaSuccess)
    return fail("add_bias_rows (router)", e);
  e = sigmoid ? moe_route_sigmoid(router_logits, n, hp.n_expert, kk, ly.choice_bias, es.renorm, es.scale, groups.ids,
                                  groups.weights, stream)
              : moe_route(router_logits, n, hp.n_expert, kk, groups.ids, groups.weights, stream);
  return e == cudaSuccess || fail(sigmoid ? "moe_route_sigmoid" : "moe_route", e);
}

bool CudaDecoder::Impl::moe_block(const Layer& ly, int layer, int n) {
  const int kk = hp.n_expert_used;
  Src xs{};
  cudaError_t e;
  if (!route(ly, n, &xs)) return false;
  // The shared expert (glm4moe) reads the same normed rows, on the GPU in
  // every placement; after the routed passes here (which leave xn as it is),
  // before a hybrid layer waits for the CPU's share. Its products reuse the
  // activation buffers: the caller's formats of xs are stale after it.
  auto shared = [&]() {
    if (!ly.shexp_gate.data) return true;
    xs.q8 = xs.f16 = false;
    return glu_ffn(ly.shexp_gate, ly.shexp_up, ly.shexp_down, GluArgs{}, xs, hp.n_ff_shexp);
  };
  if (ly.resident) {
    if (n == 1)
      return token_experts(Experts{ly.gate_exps, ly.up_exps, ly.down_exps}, groups.ids, xs, main_work(), ly.math) &&
             shared();
    e = moe_group(groups, n, kk, hp.n_expert, stream);
    if (e != cudaSuccess) return fail("moe_group", e);
    return gpu_experts(Experts{ly.gate_exps, ly.up_exps, ly.down_exps}, groups, hp.n_expert, xs, n, ly.math) &&
           combine(ly, nullptr, n) && shared();
  }
  // Hybrid: the choices whose expert is cached run here; the others are
  // posted to the CPU expert server, which computes them at the same time;
  // its output is added to the residual after both are done.
  const int n_slots = n * kk;
  e = moe_remap_ids(groups.ids, n_slots, ly.d_slot_of, d_cache_ids, d_counts + static_cast<int64_t>(layer) * hp.n_expert,
                    stream);
  if (e != cudaSuccess) return fail("moe_remap_ids", e);
  if (ly.cpu_part && stream_min > 0 && n >= stream_min && n > 1 && staging_mem) {
    // A big batch: bring the uncached experts to the GPU instead. Cached
    // choices run from the cache, the others from the staging area; each
    // pass writes only its own choices' rows of ffn_down, and one combine
    // sums every choice in order, as the all-GPU layer does (bit for bit).
    // Order: the staging area is free, the cached pass is queued, then the
    // copies (with the ring the host fills slots while the GPU computes).
    if (!staging_free()) return false;
    if (ly.cache_slots > 0) {
      MoeGroups g = groups;
      g.ids = d_cache_ids;
      if ((e = moe_group(g, n, kk, ly.cache_slots, stream)) != cudaSuccess) return fail("moe_group", e);
      if (!gpu_experts(Experts{ly.gate_exps, ly.up_exps, ly.down_exps}, g, ly.cache_slots, xs, n, ly.math))
        return false;
    }
    if (!stage_layer(ly)) return false;
    ++streamed;
    // The cached pass quantized its own hidden rows into the shared
    // activation buffer: the layer input must be converted again.
    xs.q8 = xs.f16 = false;
    if ((e = moe_remap_ids(groups.ids, n_slots, ly.d_stage_of, d_stage_ids, nullptr, stream)) != cudaSuccess)
      return fail("moe_remap_ids (staging)", e);
    MoeGroups g = groups;
    g.ids = d_stage_ids;
    if ((e = moe_group(g, n, kk, ly.n_uncached, stream)) != cudaSuccess) return fail("moe_group", e);
    if (!join_staged()) return false;
    return gpu_experts(ly.staged, g, ly.n_uncached, xs, n, ly.math) && combine(ly, nullptr, n) && shared();
  }
  // One token: the GPU also computes up to host_choices of the CPU's
  // choices, reading those experts from page-locked host memory over PCIe,
  // while the CPU computes the rest (the two read RAM side by side).
  const bool host_split = n == 1 && ly.cpu_part && ly.host_readable && host_choices > 0 && kk <= 32;
  if (ly.cpu_part) {
    if ((e = hybrid_export(xs.f32, n, hp.n_embd, groups.ids, groups.weights, kk, ly.d_owner_of, dv_xn, dv_ids, dv_w,
                           d_pending, host_split ? d_host_ids : nullptr, host_choices, stream)) != cudaSuccess ||
        (e = hybrid_post(dv_mailbox, layer, n, d_pending, d_seq, stream)) != cudaSuccess)
      return fail("hybrid MoE (post)", e);
  }
  // The peers compute their choices on their own streams meanwhile.
  for (Peer& p : peers)
    if (p.layers[layer].slots > 0 && !peer_launch(p, layer, xs, n)) return false;
  if (ly.cache_slots > 0 && n == 1) {
    if (!token_experts(Experts{ly.gate_exps, ly.up_exps, ly.down_exps}, d_cache_ids, xs, main_work(), ly.math))
      return false;
  } else if (ly.cache_slots > 0) {
    MoeGroups g = groups;
    g.ids = d_cache_ids;
    e = moe_group(g, n, kk, ly.cache_slots, stream);
    if (e != cudaSuccess) return fail("moe_group", e);
    if (!gpu_experts(Experts{ly.gate_exps, ly.up_exps, ly.down_exps}, g, ly.cache_slots, xs, n, ly.math) ||
        !combine(ly, d_cache_ids, n))
      return false;
  }
  if (host_split) {
    xs.q8 = xs.f16 = false;  // the cached pass reused the activation buffer for its hidden rows
    if (!token_experts(ly.host_view, d_host_ids, xs, main_work(), ly.math)) return false;
  }
  if (!shared()) return false;
  for (Peer& p : peers) {
    if (p.layers[layer].slots == 0) continue;
    if ((e = cudaStreamWaitEvent(stream, p.ev_out, 0)) != cudaSuccess ||
        (e = add_inplace(x, p.out_primary, static_cast<int64_t>(n) * hp.n_embd, stream)) != cudaSuccess)
      return fail("peer MoE (join)", e);
  }
  if (ly.cpu_part) {
    if ((e = hybrid_wait(dv_mailbox, d_pending, d_seq, d_error, kServerTimeoutNs, stream)) != cudaSuccess ||
        (e = hybrid_add(x, dv_out, static_cast<int64_t>(n) * hp.n_embd, d_pending, d_error, stream)) != cudaSuccess)
      return fail("hybrid MoE (wait)", e);
  }
  return true;
}

bool CudaDecoder::Impl::combine(const Layer& ly, const int32_t* mask, int n) {
  const int kk = hp.n_expert_used;
  const cudaError_t e =
      ly.math.down_bias ? moe_combine_biased(ffn_down, groups.weights, ly.math.down_bias, groups.ids, mask, n, kk, hp.n_embd, x, stream)
      : mask            ? moe_combine_masked(ffn_down, groups.weights, mask, n, kk, hp.n_embd, x, stream)
                        : moe_combine(ffn_down, groups.weights, n, kk, hp.n_embd, x, stream);
  return e == cudaSuccess || fail("moe_combine", e);
}

// gate/up GLU and down of the grouped slots (n_groups experts in the stacks),
// per-slot outputs in ffn_down (the down bias, if any, joins in the combine).
bool CudaDecoder::Impl::gpu_experts(const Experts& ly, const MoeGroups& groups, int n_groups, Src& xs, int n,
                                    const Work& w, const ExpertMath& math) {
  const int kk = hp.n_expert_used;
  const int n_slots = n * kk;
  cudaError_t e;
  const int max_active = std::min(n_groups, n_slots);
  const int n_ff = hp.n_ff_exp;
  // Biases or another gated unit: gate and up apart, then glu_rows (the
  // fused GLU launches compute bias-free SwiGLU).
  const bool plain = math.plain();
  auto gated_unit = [&]() {
    return plain ? swiglu(w.ffn_gate, w.ffn_up, static_cast<int64_t>(n_slots) * n_ff, w.ffn_h, w.stream)
                 : glu_rows(w.ffn_gate, w.ffn_up, n_slots, n_ff, math.glu, math.gate_bias, math.up_bias, this->groups.ids,
                            w.ffn_h, w.stream);
  };
  const bool gemv_up = use_gemv(ly.gate, n) || use_gemv(ly.up, n);
  if (gemv_up) {
    if (!ensure(xs, act_format_gemv(ly.gate.type), w) || !ensure(xs, act_format_gemv(ly.up.type), w)) return false;
    if (plain && ly.gate.type == ly.up.type && ly.gate.row_stride == ly.up.row_stride) {
      e = moe_gemv_glu(ly.gate, ly.up, view(xs, 0, w), groups, kk, max_active, n, w.ffn_h, n_ff, w.stream);
      if (e != cudaSuccess) return fail("moe_gemv_glu", e);
    } else {
      e = moe_gemv(ly.gate, view(xs, 0, w), groups, kk, max_active, n, w.ffn_gate, n_ff, w.stream);
      if (e == cudaSuccess) e = moe_gemv(ly.up, view(xs, 0, w), groups, kk, max_active, n, w.ffn_up, n_ff, w.stream);
      if (e == cudaSuccess) e = gated_unit();
      if (e != cudaSuccess) return fail("moe_gemv", e);
    }
  } else {
    if (!ensure(xs, act_format_gemm(ly.gate.type), w) || !ensure(xs, act_format_gemm(ly.up.type), w)) return false;
    if (plain && fused && moe_gemm_glu_supported(ly.gate, ly.up)) {
      e = moe_gemm_glu(ly.gate, ly.up, view(xs, 0, w), groups, kk, w.ffn_h, n_ff, w.stream);
      if (e != cudaSuccess) return fail("moe_gemm_glu", e);
    } else {
      e = moe_gemm(ly.gate, view(xs, 0, w), groups, kk, w.ffn_gate, n_ff, w.stream);
      if (e == cudaSuccess) e = moe_gemm(ly.up, view(xs, 0, w), groups, kk, w.ffn_up, n_ff, w.stream);
      if (e == cudaSuccess) e = gated_unit();
      if (e != cudaSuccess) return fail("moe_gemm", e);
    }
  }
  Src hs{w.ffn_h, n_slots, n_ff};
  if (use_gemv(ly.down, n)) {
    if (!ensure(hs, act_format_gemv(ly.down.type), w)) return false;
    e = moe_gemv(ly.down, view(hs, 0, w), groups, 1, max_active, n, w.ffn_down, hp.n_embd, w.stream);
    if (e != cudaSuccess) return fail("moe_gemv (down)", e);
  } else {
    if (!ensure(hs, act_format_gemm(ly.down.type), w)) return false;
    e = moe_gemm(ly.down, view(hs, 0, w), groups, 1, w.ffn_down, hp.n_embd, w.stream);
    if (e != cudaSuccess) return fail("moe_gemm (down)", e);
  }
  return true;
}

// One token (decode): its k choices straight from the routing (ids[j]: the
// expert's index in ex's stacks, -1 where another device or the CPU
// computes it), without grouping; the down projection adds the weighted
// sum of the choices to the residual x in the same pass (with a down bias:
// down into ffn_down, then the biased combine).
bool CudaDecoder::Impl::token_experts(const Experts& ex, const int32_t* ids, Src& xs, const Work& w,
                                      const ExpertMath& math) {
  return token_experts(ex, ids, groups.weights, xs, w, x, math);
}
bool CudaDecoder::Impl::token_experts(const Experts& ex, const int32_t* ids, const float* weights, Src& xs,
                                      const Work& w, float* out, const ExpertMath& math) {
  const int kk = hp.n_expert_used;
  const int n_ff = hp.n_ff_exp;
  cudaError_t e;
  if (!ensure(xs, act_format_gemv(ex.gate.type), w) || !ensure(xs, act_format_gemv(ex.up.type), w)) return false;
  const bool plain = math.plain();
  if (plain && ex.gate.type == ex.up.type && ex.gate.row_stride == ex.up.row_stride) {
    e = moe_gemv_glu_direct(ex.gate, ex.up, view(xs, 0, w), ids, kk, kk, w.ffn_h, n_ff, w.stream);
  } else {
    e = moe_gemv_direct(ex.gate, view(xs, 0, w), ids, kk, kk, w.ffn_gate, n_ff, w.stream);
    if (e == cudaSuccess) e = moe_gemv_direct(ex.up, view(xs, 0, w), ids, kk, kk, w.ffn_up, n_ff, w.stream);
    if (e == cudaSuccess)
      e = plain ? swiglu(w.ffn_gate, w.ffn_up, static_cast<int64_t>(kk) * n_ff, w.ffn_h, w.stream)
                : glu_rows(w.ffn_gate, w.ffn_up, kk, n_ff, math.glu, math.gate_bias, math.up_bias, groups.ids, w.ffn_h,
                           w.stream);
  }
  if (e != cudaSuccess) return fail("moe_gemv (one token)", e);
  // Rows of choices computed elsewhere hold stale values: the quantization
  // reads them but the combine skips them.
  Src hs{w.ffn_h, kk, n_ff};
  if (!ensure(hs, act_format_gemv(ex.down.type), w)) return false;
  if (math.down_bias) {
    e = moe_gemv_direct(ex.down, view(hs, 0, w), ids, kk, 1, w.ffn_down, hp.n_embd, w.stream);
    if (e == cudaSuccess)
      e = moe_combine_biased(w.ffn_down, weights, math.down_bias, groups.ids, ids, 1, kk, hp.n_embd, out, w.stream);
    return e == cudaSuccess || fail("moe_gemv + moe_combine_biased (one token)", e);
  }
  e = moe_gemv_combine(ex.down, view(hs, 0, w), ids, weights, kk, out, w.stream);
  return e == cudaSuccess || fail("moe_gemv_combine", e);
}

bool CudaDecoder::Impl::gpu_experts(const Experts& ly, const MoeGroups& groups, int n_groups, Src& xs, int n,
                                    const ExpertMath& math) {
  return gpu_experts(ly, groups, n_groups, xs, n, main_work(), math);
}

bool CudaDecoder::Impl::glu_ffn(const DevMatrix& gate, const DevMatrix& up, const DevMatrix& down, const GluArgs& glu,
                                Src& xs, int n_ff) {
  const int n = xs.rows;
  cudaError_t e;
  if (glu.kind == GluKind::Silu && use_gemv(gate, n) && gate.type == up.type && gate.row_stride == up.row_stride) {
    if (!ensure(xs, act_format_gemv(gate.type))) return false;
    for (int c0 = 0; c0 < n; c0 += kGemvMaxCols) {
      e = gemv_glu(gate, up, view(xs, c0), std::min(kGemvMaxCols, n - c0), ffn_h + static_cast<int64_t>(c0) * n_ff,
                   n_ff, stream);
      if (e != cudaSuccess) return fail("gemv_glu", e);
    }
  } else {
    if (!matmul(gate, xs, ffn_gate, n_ff, false) || !matmul(up, xs, ffn_up, n_ff, false)) return false;
    e = glu.kind == GluKind::Silu ? swiglu(ffn_gate, ffn_up, static_cast<int64_t>(n) * n_ff, ffn_h, stream)
                                  : glu_rows(ffn_gate, ffn_up, n, n_ff, glu, nullptr, nullptr, nullptr, ffn_h, stream);
    if (e != cudaSuccess) return fail("swiglu", e);
  }
  Src hs{ffn_h, n, n_ff};
  return matmul(down, hs, x, hp.n_embd, true);  // x += h · Wdownᵀ
}

bool CudaDecoder::Impl::dense_block(const Layer& ly, int n) {
  Src xs{};
  if (!norm(x, ly.ffn_norm, n, &xs, {&ly.ffn_gate, &ly.ffn_up}, n)) return false;
  return glu_ffn(ly.ffn_gate, ly.ffn_up, ly.ffn_down, ly.dense_glu, xs, hp.n_ff);
}

// Embedding, rope table and every layer for n tokens (inputs already on device).
bool CudaDecoder::Impl::enqueue_body(int n) {
  cudaError_t e = get_rows(token_embd, d_tokens, n, x, hp.n_embd, stream);
  if (e != cudaSuccess) return fail("get_rows", e);
  if (rope.n_rot > 0) {
    e = rope_table(rope, d_pos0, n, rope_cs, stream);
    if (e != cudaSuccess) return fail("rope_table", e);
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& ly = layers[l];
    if (!attention_block(ly, n)) return false;
    if (ly.moe ? !moe_block(ly, static_cast<int>(l), n) : !dense_block(ly, n)) return false;
  }
  if (!nextn.on) return true;
  // The MTP block's h rows: output_norm of every row (the head norms its own rows again).
  e = rms_norm(x, nullptr, output_norm, hp.rms_eps, n, hp.n_embd, nextn.h_table + hp.n_embd, nullptr, nullptr, 0, stream);
  return e == cudaSuccess || fail("rms_norm (h rows)", e);
}

// Final norm, lm_head and argmax for rows [first, first + rows) (rows <= logits_rows).
bool CudaDecoder::Impl::enqueue_head(int first, int rows) {
  Src ns{};
  if (!norm(x + static_cast<int64_t>(first) * hp.n_embd, output_norm, rows, &ns, {&output}, rows)) return false;
  if (!matmul(output, ns, logits, hp.n_vocab, false)) return false;
  const cudaError_t e = argmax_rows(logits, rows, hp.n_vocab, d_argmax, argmax_work, stream);
  return e == cudaSuccess || fail("argmax_rows", e);
}

}  // namespace guild::cuda
