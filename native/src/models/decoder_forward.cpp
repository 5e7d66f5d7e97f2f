#include "models/decoder_forward.h"

#include <algorithm>
#include <cmath>
#include <new>

#include "ops/attention.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/rope.h"

namespace guild {

bool DecoderScratch::init(const ModelHparams& hp, int max_tokens_, int n_ctx, int n_threads) {
  max_tokens = max_tokens_;
  const size_t T = static_cast<size_t>(max_tokens);
  const int k = std::max(1, hp.n_expert_used);
  const size_t n_ff = static_cast<size_t>(std::max(hp.n_ff_exp, hp.n_ff));
  const size_t q_dim = static_cast<size_t>(hp.n_head) * hp.head_dim_k;
  const size_t o_dim = static_cast<size_t>(hp.n_head) * hp.head_dim_v;
  const size_t widest_in = std::max({static_cast<size_t>(hp.n_embd), o_dim, n_ff});
  try {
    x.resize(T * hp.n_embd);
    xn.resize(T * hp.n_embd);
    q.resize(T * q_dim);
    this->k.resize(T * hp.n_head_kv * hp.head_dim_k);
    v.resize(T * hp.n_head_kv * hp.head_dim_v);
    attn.resize(T * o_dim);
    block_out.resize(T * hp.n_embd);
    rope_cs.resize(T * hp.rope.n_rot);
    scores.resize(static_cast<size_t>(n_threads) * n_ctx);
    router_logits.resize(T * std::max(1, hp.n_expert));
    if (hp.n_expert > 0) routing.reserve(max_tokens, k, hp.n_expert);
    ffn_gate.resize(T * k * n_ff);
    ffn_up.resize(T * k * n_ff);
    ffn_down.resize(T * k * hp.n_embd);
    norm_out.resize(T * hp.n_embd);
    // F32 (4 bytes per element) is the widest activation encoding.
    act_in.resize(T * widest_in * 4);
    act_in2.resize(T * widest_in * 4);
    act_ffn.resize(T * k * n_ff * 4);
    rows_in.resize(T);
    rows_in2.resize(T);
    rows_ffn.resize(T * k);
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

namespace {

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

void attention_block(const DecoderContext& c, const LayerWeights& L, int layer, int n, int pos0) {
  const ModelHparams& hp = c.hp;
  DecoderScratch& s = c.s;
  const int q_dim = hp.n_head * hp.head_dim_k;
  const int k_dim = hp.n_head_kv * hp.head_dim_k;
  const int v_dim = hp.n_head_kv * hp.head_dim_v;

  rms_norm_rows(s.x.data(), L.attn_norm, hp.rms_eps, hp.n_embd, n, s.xn.data());
  PreparedRows a{s.act_in.data(), s.rows_in.data()}, b{s.act_in2.data(), s.rows_in2.data()};
  project(c, a, b, L.wq, s.xn.data(), n, s.q.data());
  project(c, a, b, L.wk, s.xn.data(), n, s.k.data());
  project(c, a, b, L.wv, s.xn.data(), n, s.v.data());

  for (int i = 0; i < n; ++i) {
    float* qi = s.q.data() + static_cast<int64_t>(i) * q_dim;
    float* ki = s.k.data() + static_cast<int64_t>(i) * k_dim;
    if (hp.qk_norm) {
      for (int h = 0; h < hp.n_head; ++h) rms_norm(qi + h * hp.head_dim_k, L.q_norm, hp.rms_eps, hp.head_dim_k, qi + h * hp.head_dim_k);
      for (int h = 0; h < hp.n_head_kv; ++h) rms_norm(ki + h * hp.head_dim_k, L.k_norm, hp.rms_eps, hp.head_dim_k, ki + h * hp.head_dim_k);
    }
    const float* cs = s.rope_cs.data() + static_cast<int64_t>(i) * hp.rope.n_rot;
    rope_apply(hp.rope, cs, qi, hp.n_head, hp.head_dim_k);
    rope_apply(hp.rope, cs, ki, hp.n_head_kv, hp.head_dim_k);
    c.kv.store(layer, pos0 + i, ki, s.v.data() + static_cast<int64_t>(i) * v_dim);
  }

  AttentionShape shape;
  shape.n_head = hp.n_head;
  shape.n_head_kv = hp.n_head_kv;
  shape.head_dim_k = hp.head_dim_k;
  shape.head_dim_v = hp.head_dim_v;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
  attention(c.pool, shape, c.kv, layer, s.q.data(), n, pos0, s.attn.data(), s.scores.data());

  PreparedRows o{s.act_in.data(), s.rows_in.data()}, o2{s.act_in2.data(), s.rows_in2.data()};
  project(c, o, o2, L.wo, s.attn.data(), n, s.block_out.data());
  const int64_t total = static_cast<int64_t>(n) * hp.n_embd;
  for (int64_t i = 0; i < total; ++i) s.x[i] += s.block_out[i];
}

void moe_block(const DecoderContext& c, const LayerWeights& L, int n) {
  const ModelHparams& hp = c.hp;
  DecoderScratch& s = c.s;
  const int k = hp.n_expert_used;
  const int n_ff = hp.n_ff_exp;

  PreparedRows a{s.act_in.data(), s.rows_in.data()}, b{s.act_in2.data(), s.rows_in2.data()};
  project(c, a, b, L.router, s.xn.data(), n, s.router_logits.data());
  route_softmax_topk(s.router_logits.data(), n, hp.n_expert, k, &s.routing);

  // Each slot (token, choice) reads its token's prepared input row.
  const int n_slots = n * k;
  const uint8_t** slot_rows = s.rows_ffn.data();
  const uint8_t* const* gate_rows = prepare(c, pick(a, b, L.gate_exps.first), L.gate_exps.first, s.xn.data(), n);
  for (int slot = 0; slot < n_slots; ++slot) slot_rows[slot] = gate_rows[slot / k];
  expert_matmul(c.pool, L.gate_exps, s.routing, slot_rows, s.ffn_gate.data(), n_ff);
  const uint8_t* const* up_rows = prepare(c, pick(a, b, L.up_exps.first), L.up_exps.first, s.xn.data(), n);
  for (int slot = 0; slot < n_slots; ++slot) slot_rows[slot] = up_rows[slot / k];
  expert_matmul(c.pool, L.up_exps, s.routing, slot_rows, s.ffn_up.data(), n_ff);

  for (int slot = 0; slot < n_slots; ++slot) {
    const int64_t off = static_cast<int64_t>(slot) * n_ff;
    swiglu(s.ffn_gate.data() + off, s.ffn_up.data() + off, n_ff, s.ffn_gate.data() + off);
  }
  const QMatrix& down0 = L.down_exps.first;
  quantize_activations(c.pool, c.kernels, down0, s.ffn_gate.data(), n_ff, n_slots, s.act_ffn.data());
  const size_t rb = act_row_bytes(down0);
  for (int slot = 0; slot < n_slots; ++slot) slot_rows[slot] = s.act_ffn.data() + slot * rb;
  expert_matmul(c.pool, L.down_exps, s.routing, slot_rows, s.ffn_down.data(), hp.n_embd);

  // moe_out = Σ_j w_j · expert_j(x), summed in choice order, then the residual add.
  for (int t = 0; t < n; ++t) {
    float* out = s.block_out.data() + static_cast<int64_t>(t) * hp.n_embd;
    for (int j = 0; j < k; ++j) {
      const int slot = t * k + j;
      const float wj = s.routing.weights[slot];
      const float* y = s.ffn_down.data() + static_cast<int64_t>(slot) * hp.n_embd;
      if (j == 0) for (int d = 0; d < hp.n_embd; ++d) out[d] = y[d] * wj;
      else        for (int d = 0; d < hp.n_embd; ++d) out[d] += y[d] * wj;
    }
  }
}

void dense_ffn_block(const DecoderContext& c, const LayerWeights& L, int n) {
  const ModelHparams& hp = c.hp;
  DecoderScratch& s = c.s;
  PreparedRows a{s.act_in.data(), s.rows_in.data()}, b{s.act_in2.data(), s.rows_in2.data()};
  project(c, a, b, L.ffn_gate, s.xn.data(), n, s.ffn_gate.data());
  project(c, a, b, L.ffn_up, s.xn.data(), n, s.ffn_up.data());
  swiglu(s.ffn_gate.data(), s.ffn_up.data(), static_cast<int64_t>(n) * hp.n_ff, s.ffn_gate.data());
  PreparedRows d{s.act_ffn.data(), s.rows_ffn.data()}, d2{s.act_in.data(), s.rows_in.data()};
  project(c, d, d2, L.ffn_down, s.ffn_gate.data(), n, s.block_out.data());
}

}  // namespace

void decoder_forward(const DecoderContext& c, const int32_t* tokens, int n, int pos0, float* logits,
                     bool all_rows) {
  const ModelHparams& hp = c.hp;
  const ModelWeights& w = c.w;
  DecoderScratch& s = c.s;

  for (int i = 0; i < n; ++i) {
    w.token_embd.kernels->dequant_row(w.token_embd.row(tokens[i]), s.x.data() + static_cast<int64_t>(i) * hp.n_embd,
                                      hp.n_embd);
    rope_cache(hp.rope, pos0 + i, s.rope_cs.data() + static_cast<int64_t>(i) * hp.rope.n_rot);
  }

  for (int l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& L = w.layers[l];
    attention_block(c, L, l, n, pos0);
    rms_norm_rows(s.x.data(), L.ffn_norm, hp.rms_eps, hp.n_embd, n, s.xn.data());
    if (L.is_moe()) moe_block(c, L, n);
    else dense_ffn_block(c, L, n);
    const int64_t total = static_cast<int64_t>(n) * hp.n_embd;
    for (int64_t i = 0; i < total; ++i) s.x[i] += s.block_out[i];
  }

  const int first_row = all_rows ? 0 : n - 1;
  const int n_rows = n - first_row;
  rms_norm_rows(s.x.data() + static_cast<int64_t>(first_row) * hp.n_embd, w.output_norm, hp.rms_eps, hp.n_embd,
                n_rows, s.norm_out.data());
  PreparedRows a{s.act_in.data(), s.rows_in.data()}, b{s.act_in2.data(), s.rows_in2.data()};
  project(c, a, b, w.output, s.norm_out.data(), n_rows, logits);
}

}  // namespace guild
