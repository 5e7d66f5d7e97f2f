// Guild's CUDA kernels: plain C++ launchers (no CUDA headers beyond the
// runtime API types), each enqueued on a cudaStream_t. Every launcher checks
// its arguments and cudaGetLastError() after its launches and returns the
// error as a value (cudaErrorInvalidValue / cudaErrorNotSupported for bad or
// unsupported arguments); nothing aborts. No launcher allocates, copies to the
// host or synchronizes, so every one can be captured in a CUDA graph; the
// values that change from step to step (token positions) are read from
// device memory.
//
// Layouts (docs/CUDA.md has the full picture):
//  * Weights: GGUF's bytes as they are, one row per output, rows padded to a
//    multiple of 16 bytes (row_stride); expert stacks are n_expert matrices,
//    expert_stride bytes apart.
//  * Activations: float rows [rows][stride]; for quantized weights in the
//    matrix-vector kernels, Q8_1 per 32 (int8 quants + half2 (d, d*sum q));
//    for the tensor-core matrix-matrix kernels, fp16 rows.
//  * KV cache: per layer K [n_ctx][n_head_kv*head_dim] and V alike, fp16.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace guild::cuda {

// ---- data views ---------------------------------------------------------------

// A weight matrix y = x·Wᵀ of n_out rows of n_in elements (or a stack of experts).
struct DevMatrix {
  const void* data = nullptr;
  uint32_t type = 0;          // GGUF type id (core/tensor_type.h)
  int64_t n_in = 0;
  int64_t n_out = 0;
  size_t row_stride = 0;      // bytes between rows (multiple of 16)
  size_t expert_stride = 0;   // bytes between experts of a stack (0 for one matrix)
  int n_expert = 1;
};

// Activations quantized to Q8_1 per 32 elements: row r's quants at
// qs + r*qs_stride (bytes, multiple of 16), its half2 (d, d*sum q) pairs at
// ds + r*ds_stride (half2 elements).
struct Q8Act {
  int8_t* qs = nullptr;
  uint32_t* ds = nullptr;  // half2 bit patterns
  int64_t qs_stride = 0;
  int64_t ds_stride = 0;
};

// One input of a matrix product in the formats a kernel may read. Only the
// format the kernel needs must be set (see act_format_gemv / act_format_gemm).
struct ActView {
  const float* f32 = nullptr;   int64_t f32_stride = 0;  // floats
  Q8Act q8;
  const uint16_t* f16 = nullptr; int64_t f16_stride = 0;  // halves
};

enum class ActFormat { F32, Q8_1, F16 };

// Expert routing of one step on device. ids/weights: [n_tokens*k] (token t's
// j-th choice at t*k+j). The grouping (moe_group) fills the rest.
struct MoeGroups {
  int32_t* ids = nullptr;
  float* weights = nullptr;
  int32_t* offsets = nullptr;   // [n_expert+1] slots of expert e: slots[offsets[e] .. offsets[e+1])
  int32_t* slots = nullptr;     // [n_tokens*k] slot ids grouped by expert
  int32_t* active = nullptr;    // [n_expert] experts with at least one slot, ascending
  int32_t* counters = nullptr;  // [2]: number of active experts, number of GEMM tiles
  int32_t* tiles = nullptr;     // [max_tiles] (expert << 16) | tile index within the expert
  int max_tiles = 0;            // capacity of tiles (moe_max_tiles)
};

// ---- capability and sizing --------------------------------------------------------

// Weight types of the matrix kernels (gemv*, gemm*, moe_*, get_rows): every
// type the CPU tables run — F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// IQ4_NL, MXFP4, Q2_K..Q6_K, IQ4_XS, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, TQ1_0, TQ2_0. The IQ1/IQ2/IQ3 kernels read grids that
// kernels_init() fills; before it, their launches return cudaErrorInitializationError.
bool matrix_type_supported(uint32_t type);
ActFormat act_format_gemv(uint32_t type);  // F32 (float weights) or Q8_1
ActFormat act_format_gemm(uint32_t type);  // F32 (F32 weights: exact SIMT path) or F16 (tensor cores)
// Largest number of columns (tokens / slots per expert) the matrix-vector path handles.
inline constexpr int kGemvMaxCols = 8;
// Matrices one gemv_multi launch computes at most (q, k, v).
inline constexpr int kGemvMaxSegments = 3;
// Token tile of the grouped expert GEMM; moe_max_tiles bounds its tile list.
inline constexpr int kMoeTileTokens = 32;
int moe_max_tiles(int n_tokens, int k, int n_expert);
// Scratch floats attention_decode needs for a context of n_ctx.
size_t attention_decode_workspace_floats(int n_head, int head_dim, int n_ctx);
// Head sizes the attention kernels support (decode: multiple of 8, <= 256;
// prefill: 32, 64, 96, 128).
bool attention_head_dim_supported(int head_dim, bool prefill);

// Raises the dynamic shared-memory limits of the kernels that need it and
// fills the device's IQ grids (synchronous copies). Called once per device
// before the first launch (CudaDecoder::create does); the launchers raise the
// limits themselves too, but the grid types need it (and never inside a graph capture).
// The switches are the runtime's A/B knobs for the kernels (core/tuning.h, passed
// in through DecoderOptions): a device with PDL off anywhere turns it off for all.
struct KernelSwitches {
  bool pdl = true;          // programmatic dependent launch where every device has sm_90+
  bool gemm_direct = true;  // the GEMM's direct fragment loads (off: the tile path for every type)
};
cudaError_t kernels_init(const KernelSwitches& switches = KernelSwitches{});

// ---- activations ------------------------------------------------------------------

// Quantizes rows of n floats (n a multiple of 32) to Q8_1.
cudaError_t quantize_q8_1(const float* x, int64_t x_stride, int rows, int n, const Q8Act& out, cudaStream_t s);
// Converts rows of n floats to fp16.
cudaError_t convert_f16(const float* x, int64_t x_stride, int rows, int n, uint16_t* y, int64_t y_stride,
                        cudaStream_t s);

// ---- matrix products ---------------------------------------------------------------

// The matrix-vector kernels start copying dense weights before the previous
// kernel has finished (programmatic dependent launch): weights must not change
// while a step runs (the expert kernels read their routing first).
// y[c][r] = (accumulate ? y[c][r] : 0) + dot(W row r, act row c), c < n_cols <= kGemvMaxCols.
// Reads act in act_format_gemv(w.type).
cudaError_t gemv(const DevMatrix& w, const ActView& act, int n_cols, float* y, int64_t y_stride, bool accumulate,
                 cudaStream_t s);
// y[c][r] = silu(gate_r · a_c) * (up_r · a_c): both products from one read of the input (same type).
cudaError_t gemv_glu(const DevMatrix& gate, const DevMatrix& up, const ActView& act, int n_cols, float* y,
                     int64_t y_stride, cudaStream_t s);
// gemv of n_w <= kGemvMaxSegments quantized matrices of one type, row size and
// input in one launch (y_i = act · W_iᵀ, e.g. the q, k and v projections).
cudaError_t gemv_multi(const DevMatrix* ws, int n_w, const ActView& act, int n_cols, float* const* ys,
                       const int64_t* y_strides, cudaStream_t s);
// The same for n_tokens of any count with tensor cores (fp16 in, fp32
// accumulate; F32 weights: fp32 SIMT). Reads act in act_format_gemm(w.type).
cudaError_t gemm(const DevMatrix& w, const ActView& act, int n_tokens, float* y, int64_t y_stride, bool accumulate,
                 cudaStream_t s);
// gemm of n_w <= kGemvMaxSegments matrices of one type and input size over
// the same activations in one launch (the q, k and v projections of a prompt).
bool gemm_multi_supported(const DevMatrix* ws, int n_w);
cudaError_t gemm_multi(const DevMatrix* ws, int n_w, const ActView& act, int n_tokens, float* const* ys,
                       const int64_t* y_strides, cudaStream_t s);

// Grouped expert products over the routing in g (moe_group must have run):
// for every slot (token t, choice j) routed to expert e,
//   y[slot][r] = dot(W_e row r, act row (slot / act_div))
// (act_div = k for the expert inputs of gate/up, 1 for the per-slot down input).
// Each active expert's weights are read once for all its slots.
// moe_gemv: small steps (any expert has at most a few slots; max_active = min(n_expert, n_slots)).
cudaError_t moe_gemv(const DevMatrix& w, const ActView& act, const MoeGroups& g, int act_div, int max_active,
                     int max_cols, float* y, int64_t y_stride, cudaStream_t s);
cudaError_t moe_gemv_glu(const DevMatrix& gate, const DevMatrix& up, const ActView& act, const MoeGroups& g,
                         int act_div, int max_active, int max_cols, float* y, int64_t y_stride, cudaStream_t s);
// One token (decode), no grouping: block row j computes choice j's expert
// ids[j] (j < k; -1: computed elsewhere, row left as it is) into y row j
// from act row j / act_div (act_div = k for gate/up: the token's one row).
cudaError_t moe_gemv_direct(const DevMatrix& w, const ActView& act, const int32_t* ids, int k, int act_div, float* y,
                            int64_t y_stride, cudaStream_t s);
cudaError_t moe_gemv_glu_direct(const DevMatrix& gate, const DevMatrix& up, const ActView& act, const int32_t* ids,
                                int k, int act_div, float* y, int64_t y_stride, cudaStream_t s);
// One token's down projection and weighted sum in one pass:
//   x[r] += sum over j < k with ids[j] >= 0 of weights[j] * dot(W_{ids[j]} row r, act row j).
cudaError_t moe_gemv_combine(const DevMatrix& w, const ActView& act, const int32_t* ids, const float* weights, int k,
                             float* x, cudaStream_t s);
// moe_gemm: prefill; tiles of kMoeTileTokens slots of one expert.
cudaError_t moe_gemm(const DevMatrix& w, const ActView& act, const MoeGroups& g, int act_div, float* y,
                     int64_t y_stride, cudaStream_t s);
// y[slot][r] = silu(gate_e row r · x) * (up_e row r · x) in one launch (the
// experts' gate and up of a prompt; SwiGLU in the epilogue). Needs gate and
// up quantized alike (moe_gemm_glu_supported), not F32.
bool moe_gemm_glu_supported(const DevMatrix& gate, const DevMatrix& up);
cudaError_t moe_gemm_glu(const DevMatrix& gate, const DevMatrix& up, const ActView& act, const MoeGroups& g,
                         int act_div, float* y, int64_t y_stride, cudaStream_t s);

// ---- elementwise, normalisation, position ------------------------------------------

// Per row: if add, x += add (written back); then y = x * rsqrt(mean(x^2) + eps) * w
// (w may be null), into any of y_f32 / y_q8 / y_f16 that are set. x, add and
// y_f32 rows are contiguous (stride n); y_q8 has its own strides, y_f16 rows
// are y_f16_stride halves apart.
cudaError_t rms_norm(float* x, const float* add, const float* w, float eps, int rows, int n, float* y_f32,
                     const Q8Act* y_q8, uint16_t* y_f16, int64_t y_f16_stride, cudaStream_t s);

struct RopeConfig {
  int n_rot = 0;            // rotated dims per head (even, <= head_dim)
  bool neox = true;         // pairs (i, i + n_rot/2); else adjacent (2i, 2i+1)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;  // YaRN (0 = off)
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int n_ctx_orig = 0;
};
// cos/sin table for positions *pos0 + i, i < n_tokens: cs[i][n_rot] (cos, sin pairs),
// computed as ops/rope.cpp does (theta by repeated multiplication in float).
cudaError_t rope_table(const RopeConfig& r, const int32_t* pos0, int n_tokens, float* cs, cudaStream_t s);
// Rotates n_heads heads of head_dim floats in each of n_tokens rows (row stride `stride`), in place.
cudaError_t rope_apply(const RopeConfig& r, const float* cs, float* x, int n_tokens, int n_heads, int head_dim,
                       int64_t stride, cudaStream_t s);

// After the q/k/v projections of n_tokens tokens at positions *pos0 + i:
// optional per-head RMS norm of q and k (q_norm/k_norm, [head_dim] each, may be null),
// rope of q and k, and K/V stored into the fp16 cache rows pos0 + i.
struct QkvPost {
  float* q = nullptr; int64_t q_stride = 0;           // [n_tokens][n_head*head_dim]
  const float* k = nullptr; int64_t k_stride = 0;     // [n_tokens][n_head_kv*head_dim]
  const float* v = nullptr; int64_t v_stride = 0;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float eps = 1e-6f;
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  uint16_t* k_cache = nullptr;  // layer base, row stride n_head_kv*head_dim
  uint16_t* v_cache = nullptr;
  int kv_rows = 0;  // a ring of this many rows: position p in row p % kv_rows (0: row p)
};
cudaError_t qkv_post(const QkvPost& p, const RopeConfig& r, const float* cs, const int32_t* pos0, int n_tokens,
                     cudaStream_t s);

// out[i] = silu(gate[i]) * up[i]
cudaError_t swiglu(const float* gate, const float* up, int64_t n, float* out, cudaStream_t s);
// x[i] += y[i]
cudaError_t add_inplace(float* x, const float* y, int64_t n, cudaStream_t s);

// ---- step parameters beyond the standard decoder (step_params.cu) ----------------------

// x[t * stride + i] += bias[i] for i < n, for each token t (x null: no target).
struct BiasRows {
  float* x = nullptr;
  int64_t stride = 0;
  const float* bias = nullptr;
  int n = 0;
};
// Up to three targets (q, k and v) of n_tokens rows in one launch.
cudaError_t add_bias_rows(const BiasRows& a, const BiasRows& b, const BiasRows& c, int n_tokens, cudaStream_t s);
// The gated unit between an FFN's gate/up and down (ops/glu.h's formulas).
enum class GluKind : int { Silu = 0, SwigluOai = 1 };
struct GluArgs {
  GluKind kind = GluKind::Silu;
  float alpha = 1.0f, limit = 0.0f;
};
// out[r][i] = glu(gate[r][i] + gate_bias[e][i], up[r][i] + up_bias[e][i]) for
// rows of n_ff, e = bias_ids[r] (each bias may be null; without bias_ids e = 0).
cudaError_t glu_rows(const float* gate, const float* up, int rows, int n_ff, const GluArgs& g, const float* gate_bias,
                     const float* up_bias, const int32_t* bias_ids, float* out, cudaStream_t s);
// moe_combine with a per-expert bias of the down projection:
//   x[t][d] += sum_j w[t*k+j] * (y[t*k+j][d] + bias[ids[t*k+j]][d])
// over the choices whose mask[t*k+j] >= 0 (mask null: all).
cudaError_t moe_combine_biased(const float* y, const float* weights, const float* bias, const int32_t* ids,
                               const int32_t* mask, int n_tokens, int k, int n, float* x, cudaStream_t s);
// Sigmoid gating (glm4moe, deepseek-v3; ops/moe.h route_sigmoid_topk_rows):
// p_e = sigmoid(logit_e); the k largest p_e + choice_bias[e] (bias may be
// null; ties to the lower id) in that order, weighted by their p_e, divided
// by the k's sum when renorm, times scale.
// out[r] = concat(a[r], b[r]) for rows of n floats each (out rows of 2n).
cudaError_t concat_rows(const float* a, const float* b, int rows, int n, float* out, cudaStream_t s);
// *p = 1 / sum_i exp(x[i] - max x): the softmax probability of the largest of n logits (NaN skipped).
cudaError_t top1_probability(const float* x, int n, float* p, cudaStream_t s);
cudaError_t moe_route_sigmoid(const float* logits, int n_tokens, int n_expert, int k, const float* choice_bias,
                              bool renorm, float scale, int32_t* ids, float* weights, cudaStream_t s);

// ---- attention ------------------------------------------------------------------------

struct AttnArgs {
  const float* q = nullptr; int64_t q_stride = 0;    // [n_tokens][n_head*head_dim]
  const uint16_t* k_cache = nullptr;                  // layer base, fp16 [n_ctx][n_head_kv*head_dim]
  const uint16_t* v_cache = nullptr;
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  int n_ctx = 0;                                      // cache capacity (positions)
  // Decode: the launch serves lengths (*pos0 + 1) in [n_kv_min, n_kv_max]
  // (0: n_ctx and n_kv_max). n_kv_max sizes the grid, n_kv_min picks the
  // heads per block (enough blocks already at the shortest length).
  int n_kv_min = 0, n_kv_max = 0;
  float scale = 1.0f;
  float* out = nullptr; int64_t out_stride = 0;       // [n_tokens][n_head*head_dim]
  // Sliding-window layers: a query at position p attends to keys
  // (p - window, p] only (0: all earlier positions).
  int window = 0;
  // Learned sinks (gpt-oss): one logit per query head [n_head], in every
  // softmax's denominator and never attended to (null: none).
  const float* sinks = nullptr;
  // A sliding-window layer's cache as a ring of kv_rows rows (position p in
  // row p % kv_rows; at least window + the pass's tokens). 0: row p, n_ctx rows.
  int kv_rows = 0;
};
// One query token at position *pos0, causal over [0, *pos0]: split-K flash
// decoding (chunks of 128 positions per block, up to 8 heads of a KV group per
// block: fewer when that leaves under 128 blocks at a.n_kv_min positions);
// the last block of each head set to finish merges the chunks. The grid
// covers a.n_kv_max positions, and *pos0 must be below it: the host knows the
// range (a captured step serves a range of positions), and a short range
// gives a small grid and more, smaller blocks. work:
// attention_decode_workspace_floats floats, zero before the first call (its
// tail holds the head sets' counters; every call leaves them zero), one call
// at a time per workspace, and the same n_head, head_dim and n_ctx for every
// call on it (they place the counters). If out_q8 is set, the output is also
// quantized to Q8_1 (head_dim a multiple of 32).
cudaError_t attention_decode(const AttnArgs& a, const int32_t* pos0, float* work, const Q8Act* out_q8,
                             cudaStream_t s);
// The same with qkv_post folded in (one token at *pos0, no qkv_post launch):
// a.q holds the raw q projection (p.q == a.q; left as it is), p.k / p.v the
// raw k and v; the kernel norms and rotates q and k as qkv_post does (the
// same values) and stores the position's K and V into the cache (p's cache
// pointers equal a's). cs: the position's rope row (rope_table).
cudaError_t attention_decode_post(const AttnArgs& a, const QkvPost& p, const RopeConfig& r, const float* cs,
                                  const int32_t* pos0, float* work, const Q8Act* out_q8, cudaStream_t s);
// n_tokens query tokens at positions *pos0 + i, causal: flash attention with
// tensor cores (fp16 Q/K/V, fp32 softmax and accumulation), 64 queries per block.
cudaError_t attention_prefill(const AttnArgs& a, const int32_t* pos0, int n_tokens, cudaStream_t s);

// ---- mixture of experts -----------------------------------------------------------------

// softmax over n_expert logits per token, top-k (ties to the lower id, ids in
// descending probability), weights renormalised to sum 1.
cudaError_t moe_route(const float* logits, int n_tokens, int n_expert, int k, int32_t* ids, float* weights,
                      cudaStream_t s);
// One token's routing in one launch (decode): y = rmsnorm(x) * norm_w (x: n_in
// floats of the router, 16-byte aligned; norm_w may be null) into xn and
// xn_q8 where set (rms_norm's formula; its sum of squares in another order, so
// equal to an ulp), logits = router · y, then
// moe_route's softmax top-k into ids/weights[0..k). Router weights F32, F16 or
// BF16 (moe_norm_route_supported). counter: one zeroed uint32 of device
// memory, left zero (one launch at a time may use it).
bool moe_norm_route_supported(const DevMatrix& router, int k);
cudaError_t moe_norm_route(const float* x, const float* norm_w, float eps, const DevMatrix& router, int k, float* xn,
                           const Q8Act* xn_q8, float* logits, int32_t* ids, float* weights, uint32_t* counter,
                           cudaStream_t s);
// Groups the slots of g.ids by expert (offsets, slots, active experts, GEMM tile list).
cudaError_t moe_group(const MoeGroups& g, int n_tokens, int k, int n_expert, cudaStream_t s);
// x[t][d] += sum_j weights[t*k+j] * y[(t*k+j)][d]  (y row stride n)
cudaError_t moe_combine(const float* y, const float* weights, int n_tokens, int k, int n, float* x, cudaStream_t s);
// The same, skipping slots whose slot_ids[t*k+j] < 0 (experts computed elsewhere,
// by the CPU expert pool in hybrid mode). A token with no GPU slot adds nothing.
cudaError_t moe_combine_masked(const float* y, const float* weights, const int32_t* slot_ids, int n_tokens, int k,
                               int n, float* x, cudaStream_t s);
// Hybrid expert placement: cache_ids[i] = slot_of[ids[i]] (the expert's slot in
// this layer's GPU expert cache, or -1 when the CPU computes it) for n_slots
// routing slots; counts[ids[i]] += 1 when counts is not null (routing
// statistics for calibration and the online cache policy).
cudaError_t moe_remap_ids(const int32_t* ids, int n_slots, const int32_t* slot_of, int32_t* cache_ids,
                          uint32_t* counts, cudaStream_t s);

// ---- hybrid MoE hand-off (hybrid.cu) --------------------------------------------------------

// The mailbox in host-mapped memory between the GPU and the CPU expert server.
// The GPU writes layer/n and then req_seq (release, system scope); the server
// answers by writing done_seq = req_seq after the output rows.
struct HybridMailbox {
  uint32_t req_seq;
  int32_t layer;
  int32_t n;
  uint32_t pad0[13];
  uint32_t done_seq;  // own 64-byte line: written by the CPU only
  uint32_t pad1[15];
};

// Copies one MoE layer's normed input rows (n x d), routing ids and weights to
// host-mapped memory and counts into *pending the choices whose expert has
// slot_of[e] < 0 (computed by the CPU). With host_ids (one token, n*k <= 32):
// the first host_max of those choices (in choice order) are the GPU's instead
// — host_ids[j] = their expert (else -1), exported to the CPU as id -1 and
// not counted — for the GPU to compute reading the experts from host memory.
cudaError_t hybrid_export(const float* xn, int n, int d, const int32_t* ids, const float* weights, int k,
                          const int32_t* slot_of, float* h_xn, int32_t* h_ids, float* h_w, int32_t* pending,
                          int32_t* host_ids, int host_max, cudaStream_t s);
// When *pending > 0: posts request ++*seq for (layer, n) in the mailbox.
cudaError_t hybrid_post(HybridMailbox* mb, int layer, int n, const int32_t* pending, uint32_t* seq, cudaStream_t s);
// When *pending > 0: waits (one thread) until the mailbox answers *seq; after
// timeout_ns sets *error_flag instead.
cudaError_t hybrid_wait(const HybridMailbox* mb, const int32_t* pending, const uint32_t* seq, int32_t* error_flag,
                        uint64_t timeout_ns, cudaStream_t s);
// When *pending > 0 and no error: x[i] += h_out[i] for count floats (h_out host-mapped).
cudaError_t hybrid_add(float* x, const float* h_out, int64_t count, const int32_t* pending, const int32_t* error_flag,
                       cudaStream_t s);

// ---- lookups ------------------------------------------------------------------------------

// out[i] = dequantized row ids[i] of table (any matrix type), out row stride out_stride.
cudaError_t get_rows(const DevMatrix& table, const int32_t* ids, int n, float* out, int64_t out_stride,
                     cudaStream_t s);
// out[r] = index of the first maximum of row r (n floats, stride n; NaN
// skipped, 0 when the row has no number). work: argmax_workspace_bytes(rows)
// of device memory, zero before the first call (every call leaves it zero).
// Any number of blocks per row: one launch, no host round trip.
size_t argmax_workspace_bytes(int rows);
cudaError_t argmax_rows(const float* x, int rows, int n, int32_t* out, uint64_t* work, cudaStream_t s);

}  // namespace guild::cuda
