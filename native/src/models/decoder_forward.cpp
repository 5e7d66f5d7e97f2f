#include "models/decoder_forward.h"

#include <algorithm>
#include <cmath>
#include <new>

#include "ops/attention.h"
#include "ops/glu.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/rope.h"

namespace guild {

DecoderScratchSizes DecoderScratch::sizes(const ModelHparams& hp, int max_tokens_, int n_ctx, int n_threads) {
  DecoderScratchSizes z;
  const size_t T = static_cast<size_t>(max_tokens_);
  const size_t k = static_cast<size_t>(std::max(1, hp.n_expert_used));
  const size_t n_ff = static_cast<size_t>(std::max({hp.n_ff_exp, hp.n_ff, hp.n_ff_shexp}));
  const size_t d = static_cast<size_t>(hp.n_embd);
  const size_t q_dim = static_cast<size_t>(hp.n_head) * hp.head_dim_k;
  const size_t o_dim = static_cast<size_t>(hp.n_head) * hp.head_dim_v;
  const size_t nextn_in_row = hp.n_nextn > 0 ? 2 * d : 0;
  const size_t widest_in = std::max({d, o_dim, n_ff, nextn_in_row});
  z.x = z.xn = z.block_out = z.norm_out = T * d;
  z.q = T * q_dim;
  z.k = T * hp.n_head_kv * hp.head_dim_k;
  z.v = T * hp.n_head_kv * hp.head_dim_v;
  z.attn = T * o_dim;
  z.rope_cs = T * hp.rope.n_rot;
  z.nextn_in = T * nextn_in_row;
  // Attention tiles: up to kAttnTileRows query rows (whole KV groups).
  z.attn_tile_rows = std::max(kAttnTileRows, hp.n_head_kv > 0 ? hp.n_head / hp.n_head_kv : 1);
  z.scores = static_cast<size_t>(n_threads) * z.attn_tile_rows * static_cast<size_t>(n_ctx);
  z.router_logits = T * std::max(1, hp.n_expert);
  z.ffn_gate = z.ffn_up = T * k * n_ff;
  z.ffn_down = T * k * d;
  // F32 (4 bytes per element) is the widest activation encoding.
  z.act_in = z.act_in2 = T * widest_in * 4;
  z.act_ffn = T * k * n_ff * 4;
  z.rows_in = z.rows_in2 = T;
  z.rows_ffn = T * k;
  if (hp.n_expert > 0) {
    const size_t e = static_cast<size_t>(hp.n_expert);
    z.routing_elems = 3 * T * k + (e + 1) + e + 2 * (e * 64 + 64) + e;
  }
  return z;
}

uint64_t DecoderScratchSizes::bytes() const {
  const uint64_t floats = uint64_t{x} + xn + q + k + v + attn + block_out + rope_cs + scores + router_logits + ffn_gate +
                          ffn_up + ffn_down + norm_out + nextn_in;
  return floats * sizeof(float) + uint64_t{act_in} + act_in2 + act_ffn +
         (uint64_t{rows_in} + rows_in2 + rows_ffn) * sizeof(const uint8_t*) + uint64_t{routing_elems} * 4;
}

bool DecoderScratch::init(const ModelHparams& hp, int max_tokens_, int n_ctx, int n_threads) {
  max_tokens = max_tokens_;
  const DecoderScratchSizes z = sizes(hp, max_tokens_, n_ctx, n_threads);
  try {
    x.resize(z.x);
    xn.resize(z.xn);
    q.resize(z.q);
    k.resize(z.k);
    v.resize(z.v);
    attn.resize(z.attn);
    block_out.resize(z.block_out);
    rope_cs.resize(z.rope_cs);
    attn_tile_rows = z.attn_tile_rows;
    scores.resize(z.scores);
    router_logits.resize(z.router_logits);
    if (hp.n_expert > 0) routing.reserve(max_tokens, std::max(1, hp.n_expert_used), hp.n_expert);
    ffn_gate.resize(z.ffn_gate);
    ffn_up.resize(z.ffn_up);
    ffn_down.resize(z.ffn_down);
    norm_out.resize(z.norm_out);
    nextn_in.resize(z.nextn_in);
    act_in.resize(z.act_in);
    act_in2.resize(z.act_in2);
    act_ffn.resize(z.act_ffn);
    rows_in.resize(z.rows_in);
    rows_in2.resize(z.rows_in2);
    rows_ffn.resize(z.rows_ffn);
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

uint64_t DecoderScratch::allocated_bytes() const {
  auto b = [](const auto& vec) { return uint64_t{vec.capacity()} * sizeof(vec[0]); };
  return b(x) + b(xn) + b(q) + b(k) + b(v) + b(attn) + b(block_out) + b(rope_cs) + b(scores) + b(router_logits) + b(nextn_in) +
         b(ffn_gate) + b(ffn_up) + b(ffn_down) + b(norm_out) + b(act_in) + b(act_in2) + b(act_ffn) + b(rows_in) +
         b(rows_in2) + b(rows_ffn) + b(routing.ids) + b(routing.weights) + b(routing.offset) +
         b(routing.slots_by_expert) + b(routing.cursor) + b(routing.task_expert) + b(routing.task_row) +
         b(routing.active);
}

namespace {

// fn(i0, i1) over row blocks of [0, n): in parallel for batches (the row-wise
// steps around the products would otherwise run on one thread while the
// others wait), inline for a few rows (decode).
template <typename Fn>
void for_rows(ThreadPool& pool, int n, Fn&& fn) {
  constexpr int kBlock = 16;
  if (n < 2 * kBlock || pool.size() == 1) {
    fn(0, n);
    return;
  }
  pool.parallel_for((n + kBlock - 1) / kBlock, [&](int64_t b, int) {
    const int i0 = static_cast<int>(b) * kBlock;
    fn(i0, std::min(n, i0 + kBlock));
  });
}

// x += y for n rows of n_embd.
void add_rows(const DecoderContext& c, const float* y, int n, float* x) {
  const int64_t d = c.hp.n_embd;
  for_rows(c.pool, n, [&](int i0, int i1) {
    for (int64_t i = i0 * d; i < i1 * d; ++i) x[i] += y[i];
  });
}

void norm_rows(const DecoderContext& c, const float* x, const float* w, int n, float* y) {
  const int64_t d = c.hp.n_embd;
  for_rows(c.pool, n, [&](int i0, int i1) { rms_norm_rows(x + i0 * d, w, c.hp.rms_eps, d, i1 - i0, y + i0 * d); });
}

// Converts n rows of `in` (stride n_in) for matrix w, reusing `have` when the
// previous conversion already produced w's vec_dot_type.
struct PreparedRows {
  uint8_t* buf;
  const uint8_t** rows;
  int type = -1;
};

const uint8_t* const* prepare(const DecoderContext& c, PreparedRows& p, const QMatrix& w, const float* in, int n) {
  const int type = static_cast<int>(w.kernels->vec_dot_type);
  if (p.type != type) {
    quantize_activations(c.pool, c.kernels, w, in, w.n_in, n, p.buf);
    const size_t rb = act_row_bytes(w);
    for (int i = 0; i < n; ++i) p.rows[i] = p.buf + i * rb;
    p.type = type;
  }
  return p.rows;
}

// Of two prepared-row caches of the same input, the one to use for w: the
// first if it is empty or already in w's type, else the second.
PreparedRows& pick(PreparedRows& a, PreparedRows& b, const QMatrix& w) {
  const int type = static_cast<int>(w.kernels->vec_dot_type);
  return (a.type == type || a.type == -1) ? a : b;
}

// y = in · Wᵀ, converting `in` through one of two prepared-row caches.
void project(const DecoderContext& c, PreparedRows& a, PreparedRows& b, const QMatrix& w, const float* in,
             int n, float* y) {
  matmul_prepared(c.pool, w, prepare(c, pick(a, b, w), w, in, n), n, y, w.n_out);
}

// Several projections of the same input: the matrices that share a
// vec_dot_type (and row length) run in one parallel loop.
void project_many(const DecoderContext& c, PreparedRows& a, PreparedRows& b, const QMatrix* const* ws, float* const* ys,
                  int n_mats, const float* in, int n) {
  bool done[4] = {};
  for (int i = 0; i < n_mats; ++i) {
    if (done[i]) continue;
    MatmulJob jobs[4];
    int n_jobs = 0;
    for (int j = i; j < n_mats; ++j) {
      if (done[j] || ws[j]->kernels->vec_dot_type != ws[i]->kernels->vec_dot_type || ws[j]->n_in != ws[i]->n_in) continue;
      jobs[n_jobs++] = MatmulJob{ws[j], ys[j], ws[j]->n_out};
      done[j] = true;
    }
    matmul_prepared_multi(c.pool, jobs, n_jobs, prepare(c, pick(a, b, *ws[i]), *ws[i], in, n), n);
  }
}

// y[i] += bias for n rows of dim floats.
void add_bias(const DecoderContext& c, const float* bias, int n, int64_t dim, float* y) {
  for_rows(c.pool, n, [&](int i0, int i1) {
    for (int i = i0; i < i1; ++i)
      for (int64_t d = 0; d < dim; ++d) y[i * dim + d] += bias[d];
  });
}

// y = down(glu(gate . xn, up . xn)) for n rows (a dense FFN or a shared expert).
void swiglu_ffn(const DecoderContext& c, const QMatrix& gate, const QMatrix& up, const QMatrix& down, const GluParams& g,
                int n, float* y) {
  DecoderScratch& s = c.s;
  PreparedRows a{s.act_in.data(), s.rows_in.data()}, b{s.act_in2.data(), s.rows_in2.data()};
  const QMatrix* gu[2] = {&gate, &up};
  float* gu_out[2] = {s.ffn_gate.data(), s.ffn_up.data()};
  project_many(c, a, b, gu, gu_out, 2, s.xn.data(), n);
  glu(c.kernels, g, static_cast<int64_t>(n) * gate.n_out, s.ffn_gate.data(), s.ffn_up.data(), s.ffn_gate.data());
  PreparedRows d{s.act_ffn.data(), s.rows_ffn.data()}, d2{s.act_in.data(), s.rows_in.data()};
  project(c, d, d2, down, s.ffn_gate.data(), n, y);
}

void attention_step(const DecoderContext& c, const AttentionStep& a, const LayerWeights& L, int layer, int n, int pos0) {
  const ModelHparams& hp = c.hp;
  DecoderScratch& s = c.s;
  const int q_dim = hp.n_head * hp.head_dim_k;
  const int k_dim = hp.n_head_kv * hp.head_dim_k;
  const int v_dim = hp.n_head_kv * hp.head_dim_v;

  PreparedRows pa{s.act_in.data(), s.rows_in.data()}, pb{s.act_in2.data(), s.rows_in2.data()};
  const QMatrix* qkv[3] = {&L.wq, &L.wk, &L.wv};
  float* qkv_out[3] = {s.q.data(), s.k.data(), s.v.data()};
  project_many(c, pa, pb, qkv, qkv_out, 3, s.xn.data(), n);
  if (a.qkv_bias) {
    add_bias(c, L.bq, n, q_dim, s.q.data());
    add_bias(c, L.bk, n, k_dim, s.k.data());
    add_bias(c, L.bv, n, v_dim, s.v.data());
  }

  // Per token: q/k norms, rope, then K and V into the cache (rows of distinct
  // positions: safe from several threads). A sliding-window layer first
  // slides its rows so the pass fits.
  c.kv.make_room(layer, pos0, n);
  for_rows(c.pool, n, [&](int i0, int i1) {
    for (int i = i0; i < i1; ++i) {
      float* qi = s.q.data() + static_cast<int64_t>(i) * q_dim;
      float* ki = s.k.data() + static_cast<int64_t>(i) * k_dim;
      if (a.qk_norm) {
        for (int h = 0; h < hp.n_head; ++h)
          rms_norm(qi + h * hp.head_dim_k, L.q_norm, hp.rms_eps, hp.head_dim_k, qi + h * hp.head_dim_k);
        for (int h = 0; h < hp.n_head_kv; ++h)
          rms_norm(ki + h * hp.head_dim_k, L.k_norm, hp.rms_eps, hp.head_dim_k, ki + h * hp.head_dim_k);
      }
      const float* cs = s.rope_cs.data() + static_cast<int64_t>(i) * hp.rope.n_rot;
      rope_apply(hp.rope, cs, qi, hp.n_head, hp.head_dim_k);
      rope_apply(hp.rope, cs, ki, hp.n_head_kv, hp.head_dim_k);
      c.kv.store(layer, pos0 + i, ki, s.v.data() + static_cast<int64_t>(i) * v_dim);
    }
  });

  AttentionShape shape;
  shape.n_head = hp.n_head;
  shape.n_head_kv = hp.n_head_kv;
  shape.head_dim_k = hp.head_dim_k;
  shape.head_dim_v = hp.head_dim_v;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
  shape.sliding_window = a.sliding_window;
  shape.sinks = a.sinks ? L.attn_sinks : nullptr;
  attention(c.pool, c.kernels, shape, c.kv, layer, s.q.data(), n, pos0, s.attn.data(), s.scores.data(), s.attn_tile_rows);

  PreparedRows o{s.act_in.data(), s.rows_in.data()}, o2{s.act_in2.data(), s.rows_in2.data()};
  project(c, o, o2, L.wo, s.attn.data(), n, s.block_out.data());
  if (a.out_bias) add_bias(c, L.bo, n, hp.n_embd, s.block_out.data());
}

void routed_experts_step(const DecoderContext& c, const RoutedExpertsStep& e, const LayerWeights& L, int n) {
  const ModelHparams& hp = c.hp;
  DecoderScratch& s = c.s;
  const int k = hp.n_expert_used;

  PreparedRows a{s.act_in.data(), s.rows_in.data()}, b{s.act_in2.data(), s.rows_in2.data()};
  project(c, a, b, L.router, s.xn.data(), n, s.router_logits.data());
  if (e.router_bias) add_bias(c, L.router_bias, n, hp.n_expert, s.router_logits.data());
  s.routing.n_tokens = n;
  s.routing.k = k;
  s.routing.n_expert = hp.n_expert;
  for_rows(c.pool, n, [&](int t0, int t1) {
    switch (e.gating) {
      case Gating::SoftmaxTopkRenorm: route_softmax_topk_rows(s.router_logits.data(), t0, t1, &s.routing); break;
      case Gating::TopkSoftmax: route_topk_softmax_rows(s.router_logits.data(), t0, t1, &s.routing); break;
      case Gating::SigmoidTopk:
        route_sigmoid_topk_rows(s.router_logits.data(), e.choice_bias ? L.exp_probs_b : nullptr, e.renorm, e.scale, t0, t1,
                                &s.routing);
        break;
    }
  });
  group_slots_by_expert(&s.routing);

  // Gate, up, the gated unit and down of every routed expert (ops/moe.h).
  const uint8_t* const* x_rows = prepare(c, pick(a, b, L.gate_exps.first), L.gate_exps.first, s.xn.data(), n);
  MoeBuffers buf;
  buf.gate = s.ffn_gate.data();
  buf.up = s.ffn_up.data();
  buf.act_down = s.act_ffn.data();
  buf.slot_rows = s.rows_ffn.data();
  ExpertHidden hidden;
  hidden.glu = e.glu;
  if (e.expert_bias) {
    hidden.gate_bias = L.gate_exps_bias;
    hidden.up_bias = L.up_exps_bias;
  }
  moe_ffn(c.pool, c.kernels, L.gate_exps, L.up_exps, L.down_exps, s.routing, x_rows, buf, s.ffn_down.data(), hp.n_embd,
          hidden);

  // block_out = Σ_j w_j · (expert_j(x) + down bias), summed in choice order.
  const float* down_bias = e.expert_bias ? L.down_exps_bias : nullptr;
  for_rows(c.pool, n, [&](int t0, int t1) {
    for (int t = t0; t < t1; ++t) {
      float* out = s.block_out.data() + static_cast<int64_t>(t) * hp.n_embd;
      for (int j = 0; j < k; ++j) {
        const int slot = t * k + j;
        const float wj = s.routing.weights[slot];
        float* y = s.ffn_down.data() + static_cast<int64_t>(slot) * hp.n_embd;
        if (down_bias != nullptr) {
          const float* bd = down_bias + static_cast<int64_t>(s.routing.ids[slot]) * hp.n_embd;
          for (int d = 0; d < hp.n_embd; ++d) y[d] += bd[d];
        }
        if (j == 0) for (int d = 0; d < hp.n_embd; ++d) out[d] = y[d] * wj;
        else        for (int d = 0; d < hp.n_embd; ++d) out[d] += y[d] * wj;
      }
    }
  });
  if (e.shared_expert) {
    // The shared expert reads the same input: SwiGLU into ffn_down (free now
    // that the routed outputs are summed), then added after them.
    swiglu_ffn(c, L.shexp_gate, L.shexp_up, L.shexp_down, GluParams{}, n, s.ffn_down.data());
    add_rows(c, s.ffn_down.data(), n, s.block_out.data());
  }
}

void dense_ffn_step(const DecoderContext& c, const GluParams& g, const LayerWeights& L, int n) {
  swiglu_ffn(c, L.ffn_gate, L.ffn_up, L.ffn_down, g, n, c.s.block_out.data());
}

// One layer's steps over the residual rows s.x; kv_layer: the layer's slot in c.kv.
void run_layer(const DecoderContext& c, const LayerRecipe& recipe, const LayerWeights& L, int kv_layer, int n, int pos0) {
  DecoderScratch& s = c.s;
  for (const RecipeStep& step : recipe.steps) {
    switch (step.kind) {
      case StepKind::Norm: norm_rows(c, s.x.data(), step.norm, n, s.xn.data()); break;
      case StepKind::Attention: attention_step(c, step.attention, L, kv_layer, n, pos0); break;
      case StepKind::RoutedExperts: routed_experts_step(c, step.experts, L, n); break;
      case StepKind::DenseFfn: dense_ffn_step(c, step.dense_glu, L, n); break;
      case StepKind::Residual: add_rows(c, s.block_out.data(), n, s.x.data()); break;
    }
  }
}

void embed_rows(const DecoderContext& c, const QMatrix& embed, const int32_t* tokens, int n, int pos0, float* x) {
  const ModelHparams& hp = c.hp;
  for_rows(c.pool, n, [&](int i0, int i1) {
    for (int i = i0; i < i1; ++i) {
      embed.kernels->dequant_row(embed.row(tokens[i]), x + static_cast<int64_t>(i) * hp.n_embd, hp.n_embd);
      rope_cache(hp.rope, pos0 + i, c.s.rope_cs.data() + static_cast<int64_t>(i) * hp.rope.n_rot);
    }
  });
}

}  // namespace

void nextn_forward(const DecoderContext& c, const int32_t* tokens, const float* h_prev, int n, int pos0, float* logits,
                   float* block_out) {
  const ModelHparams& hp = c.hp;
  const NextnWeights& m = c.w.nextn[0];
  DecoderScratch& s = c.s;
  const int64_t d = hp.n_embd;
  // e = enorm(embed(t)) into s.x, then concat(e, hnorm(h)) row by row.
  embed_rows(c, m.embed, tokens, n, pos0, s.x.data());
  for_rows(c.pool, n, [&](int i0, int i1) {
    for (int i = i0; i < i1; ++i) {
      float* row = s.nextn_in.data() + static_cast<int64_t>(i) * 2 * d;
      rms_norm_rows(s.x.data() + i * d, m.enorm, hp.rms_eps, d, 1, row);
      rms_norm_rows(h_prev + i * d, m.hnorm, hp.rms_eps, d, 1, row + d);
    }
  });
  PreparedRows a{s.act_in.data(), s.rows_in.data()}, b{s.act_in2.data(), s.rows_in2.data()};
  project(c, a, b, m.eh_proj, s.nextn_in.data(), n, s.x.data());
  run_layer(c, c.recipe.nextn[0], m.block, /*kv_layer=*/0, n, pos0);
  if (logits == nullptr && block_out == nullptr) return;
  norm_rows(c, s.x.data(), m.shared_head_norm, n, s.norm_out.data());
  if (block_out != nullptr) std::copy(s.norm_out.begin(), s.norm_out.begin() + n * d, block_out);
  if (logits == nullptr) return;
  PreparedRows h{s.act_in.data(), s.rows_in.data()}, h2{s.act_in2.data(), s.rows_in2.data()};
  project(c, h, h2, m.head, s.norm_out.data(), n, logits);
}

void decoder_forward(const DecoderContext& c, const int32_t* tokens, int n, int pos0, float* logits,
                     bool all_rows, float* hidden) {
  const ModelHparams& hp = c.hp;
  const ModelWeights& w = c.w;
  DecoderScratch& s = c.s;

  embed_rows(c, w.token_embd, tokens, n, pos0, s.x.data());
  for (int l = 0; l < hp.n_layer; ++l) run_layer(c, c.recipe.layers[l], w.layers[l], l, n, pos0);

  const int first_row = all_rows ? 0 : n - 1;
  const int n_rows = n - first_row;
  // The norm is per row: normalising every row for `hidden` leaves the rows
  // the head reads as they would be alone.
  const float* head_in = s.norm_out.data();
  if (hidden != nullptr) {
    norm_rows(c, s.x.data(), w.output_norm, n, hidden);
    head_in = hidden + static_cast<int64_t>(first_row) * hp.n_embd;
  } else {
    norm_rows(c, s.x.data() + static_cast<int64_t>(first_row) * hp.n_embd, w.output_norm, n_rows, s.norm_out.data());
  }
  PreparedRows a{s.act_in.data(), s.rows_in.data()}, b{s.act_in2.data(), s.rows_in2.data()};
  project(c, a, b, w.output, head_in, n_rows, logits);
}

}  // namespace guild
