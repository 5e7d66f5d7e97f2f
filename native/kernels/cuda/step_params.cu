// The kernels behind the step parameters of architectures beyond the
// standard decoder (models/recipe.h): bias rows after a projection, the
// gated unit with per-expert gate/up biases and the clamped SwiGLU
// (swiglu-oai), the experts' combine with a per-expert down bias (one
// thread per output element, memory-bound), and sigmoid gating (one warp
// per token).
#include <algorithm>
#include <initializer_list>

#include "common.cuh"
#include "route.cuh"

namespace guild::cuda {
namespace {

__global__ void add_bias_kernel(BiasRows b0, BiasRows b1, BiasRows b2, int n_tokens) {
  pdl_begin();
  const int t = blockIdx.y;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  // Three targets in one launch (q, k and v): blockIdx.z picks one.
  const BiasRows& b = blockIdx.z == 0 ? b0 : blockIdx.z == 1 ? b1 : b2;
  if (!b.x || i >= b.n || t >= n_tokens) return;
  b.x[static_cast<int64_t>(t) * b.stride + i] += b.bias[i];
}

__device__ __forceinline__ float glu_value(const GluArgs& g, float gate, float up) {
  if (g.kind == GluKind::Silu) return (gate / (1.0f + expf(-gate))) * up;
  // swiglu-oai: the gate clamped above only, up clamped both ways, + 1.
  const float x = fminf(gate, g.limit);
  const float u = fmaxf(fminf(up, g.limit), -g.limit);
  return x / (1.0f + expf(-g.alpha * x)) * (u + 1.0f);
}

__global__ void glu_rows_kernel(const float* __restrict__ gate, const float* __restrict__ up, int n_ff, GluArgs g,
                                const float* __restrict__ gate_bias, const float* __restrict__ up_bias,
                                const int32_t* __restrict__ bias_ids, float* __restrict__ out) {
  pdl_begin();
  const int r = blockIdx.y;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_ff) return;
  const int64_t at = static_cast<int64_t>(r) * n_ff + i;
  float a = gate[at], b = up[at];
  if (gate_bias || up_bias) {
    const int64_t e = static_cast<int64_t>(bias_ids ? bias_ids[r] : 0) * n_ff + i;
    if (gate_bias) a += gate_bias[e];
    if (up_bias) b += up_bias[e];
  }
  out[at] = glu_value(g, a, b);
}

// x[t] += sum_j w_j * (y_j + bias[ids_j]) over the unmasked choices, in
// choice order (the CPU executor's order: the bias joins each expert's
// output before it is weighted).
__global__ void moe_combine_biased_kernel(const float* __restrict__ y, const float* __restrict__ w,
                                          const float* __restrict__ bias, const int32_t* __restrict__ ids,
                                          const int32_t* __restrict__ mask, int k, int n, float* __restrict__ x) {
  pdl_begin();
  const int t = blockIdx.y;
  const int d = blockIdx.x * blockDim.x + threadIdx.x;
  if (d >= n) return;
  float acc = 0.0f;
  bool any = false;
  for (int j = 0; j < k; ++j) {
    const int64_t slot = static_cast<int64_t>(t) * k + j;
    if (mask && mask[slot] < 0) continue;
    const float v = __fmul_rn(__fadd_rn(y[slot * n + d], bias[static_cast<int64_t>(ids[slot]) * n + d]), w[slot]);
    acc = any ? __fadd_rn(acc, v) : v;
    any = true;
  }
  if (any) x[static_cast<int64_t>(t) * n + d] += acc;
}

// Sigmoid gating of one token per warp, as ops/moe.cpp's
// route_sigmoid_topk_rows: p_e = sigmoid(l_e) chooses by p_e + bias_e (the
// largest first, ties to the lower id, NaN never), weighs by p_e; the k
// weights summed in choice order when renorm, then times scale.
__global__ void moe_route_sigmoid_kernel(const float* __restrict__ logits, int n_tokens, int n_expert, int k,
                                         const float* __restrict__ bias, bool renorm, float scale,
                                         int32_t* __restrict__ ids, float* __restrict__ weights) {
  pdl_begin();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t = blockIdx.x * 4 + warp;
  if (t >= n_tokens) return;
  __shared__ int sel_id[4][kRouteMaxK];
  __shared__ float sel_p[4][kRouteMaxK];
  const float* l = logits + static_cast<int64_t>(t) * n_expert;
  float p[kRouteMaxPerLane], v[kRouteMaxPerLane];
#pragma unroll
  for (int i = 0; i < kRouteMaxPerLane; ++i) {
    const int e = lane + 32 * i;
    p[i] = 0.0f;
    v[i] = -INFINITY;
    if (e < n_expert) {
      p[i] = 1.0f / (1.0f + expf(-l[e]));
      const float c = bias ? p[i] + bias[e] : p[i];
      v[i] = c != c ? -INFINITY : c;
    }
  }
  unsigned taken = 0;
  for (int j = 0; j < k; ++j) {
    float bv = -INFINITY, bp = 0.0f;
    int bi = INT32_MAX;
#pragma unroll
    for (int i = 0; i < kRouteMaxPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < n_expert && !((taken >> i) & 1u) && (bi == INT32_MAX || v[i] > bv)) { bv = v[i]; bp = p[i]; bi = e; }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const float op = __shfl_xor_sync(0xffffffffu, bp, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > bv || (ov == bv && oi < bi) || (bi == INT32_MAX && oi != INT32_MAX)) { bv = ov; bp = op; bi = oi; }
    }
    if (lane == 0) { sel_id[warp][j] = bi; sel_p[warp][j] = bp; }
#pragma unroll
    for (int i = 0; i < kRouteMaxPerLane; ++i)
      if (lane + 32 * i == bi) taken |= 1u << i;
  }
  __syncwarp();
  if (lane != 0) return;
  float sum = 0.0f;
  if (renorm)
    for (int j = 0; j < k; ++j) sum += sel_p[warp][j];
  for (int j = 0; j < k; ++j) {
    float w = renorm ? sel_p[warp][j] / sum : sel_p[warp][j];
    if (scale != 1.0f) w *= scale;
    ids[static_cast<int64_t>(t) * k + j] = sel_id[warp][j];
    weights[static_cast<int64_t>(t) * k + j] = w;
  }
}

__global__ void concat_rows_kernel(const float* __restrict__ a, const float* __restrict__ b, int n, float* __restrict__ out) {
  pdl_begin();
  const int r = blockIdx.y;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 2 * n) return;
  const int64_t src = static_cast<int64_t>(r) * n + (i < n ? i : i - n);
  out[static_cast<int64_t>(r) * 2 * n + i] = i < n ? a[src] : b[src];
}

constexpr int kTop1Threads = 1024;

// One block: the maximum, then the sum of exp(x - max) in a fixed order.
__global__ void __launch_bounds__(kTop1Threads) top1_probability_kernel(const float* __restrict__ x, int n, float* p) {
  pdl_begin();
  __shared__ float red[kTop1Threads / 32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float mx = -INFINITY;
  for (int i = tid; i < n; i += kTop1Threads) {
    const float v = x[i];
    if (v == v) mx = fmaxf(mx, v);
  }
  mx = warp_max(mx);
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  mx = red[0];
  for (int i = 1; i < kTop1Threads / 32; ++i) mx = fmaxf(mx, red[i]);
  __syncthreads();
  float sum = 0.0f;
  for (int i = tid; i < n; i += kTop1Threads) {
    const float v = x[i];
    if (v == v) sum += expf(v - mx);
  }
  sum = warp_sum(sum);
  if (lane == 0) red[warp] = sum;
  __syncthreads();
  if (tid == 0) {
    float total = 0.0f;
    for (int i = 0; i < kTop1Threads / 32; ++i) total += red[i];
    *p = total > 0.0f && mx > -INFINITY && mx < INFINITY ? 1.0f / total : 0.0f;
  }
}

}  // namespace

cudaError_t concat_rows(const float* a, const float* b, int rows, int n, float* out, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!a || !b || !out || rows < 0 || rows > 65535 || n < 1, cudaErrorInvalidValue);
  if (rows == 0) return cudaSuccess;
  launch_pdl(concat_rows_kernel, dim3(ceil_div(2 * n, 256), rows), dim3(256), 0, s, a, b, n, out);
  return launch_status();
}

cudaError_t top1_probability(const float* x, int n, float* p, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!x || !p || n < 1, cudaErrorInvalidValue);
  launch_pdl(top1_probability_kernel, dim3(1), dim3(kTop1Threads), 0, s, x, n, p);
  return launch_status();
}

cudaError_t moe_route_sigmoid(const float* logits, int n_tokens, int n_expert, int k, const float* choice_bias,
                              bool renorm, float scale, int32_t* ids, float* weights, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!logits || !ids || !weights || n_expert < 1 || n_expert > 32 * kRouteMaxPerLane || k < 1 ||
                           k > kRouteMaxK || k > n_expert || n_tokens < 0,
                       cudaErrorInvalidValue);
  if (n_tokens == 0) return cudaSuccess;
  launch_pdl(moe_route_sigmoid_kernel, dim3(ceil_div(n_tokens, 4)), dim3(128), 0, s, logits, n_tokens, n_expert, k,
             choice_bias, renorm, scale, ids, weights);
  return launch_status();
}

cudaError_t add_bias_rows(const BiasRows& a, const BiasRows& b, const BiasRows& c, int n_tokens, cudaStream_t s) {
  int widest = 0, targets = 0;
  for (const BiasRows* r : {&a, &b, &c}) {
    if (!r->x) continue;
    GUILD_CUDA_RETURN_IF(!r->bias || r->n < 1 || r->stride < r->n, cudaErrorInvalidValue);
    widest = std::max(widest, r->n);
    ++targets;
  }
  GUILD_CUDA_RETURN_IF(n_tokens < 0 || n_tokens > 65535, cudaErrorInvalidValue);
  if (targets == 0 || n_tokens == 0) return cudaSuccess;
  launch_pdl(add_bias_kernel, dim3(ceil_div(widest, 256), n_tokens, 3), dim3(256), 0, s, a, b, c, n_tokens);
  return launch_status();
}

cudaError_t glu_rows(const float* gate, const float* up, int rows, int n_ff, const GluArgs& g, const float* gate_bias,
                     const float* up_bias, const int32_t* bias_ids, float* out, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!gate || !up || !out || rows < 0 || rows > 65535 || n_ff < 1, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(g.kind != GluKind::Silu && g.kind != GluKind::SwigluOai, cudaErrorInvalidValue);
  if (rows == 0) return cudaSuccess;
  launch_pdl(glu_rows_kernel, dim3(ceil_div(n_ff, 256), rows), dim3(256), 0, s, gate, up, n_ff, g, gate_bias, up_bias,
             bias_ids, out);
  return launch_status();
}

cudaError_t moe_combine_biased(const float* y, const float* weights, const float* bias, const int32_t* ids,
                               const int32_t* mask, int n_tokens, int k, int n, float* x, cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!y || !weights || !bias || !ids || !x || k < 1 || n < 1, cudaErrorInvalidValue);
  if (n_tokens == 0) return cudaSuccess;
  GUILD_CUDA_RETURN_IF(n_tokens > 65535, cudaErrorInvalidValue);
  launch_pdl(moe_combine_biased_kernel, dim3(ceil_div(n, 256), n_tokens), dim3(256), 0, s, y, weights, bias, ids, mask,
             k, n, x);
  return launch_status();
}

}  // namespace guild::cuda
