// The kernels behind the step parameters of architectures beyond the
// standard decoder (models/recipe.h): bias rows after a projection, the
// gated unit with per-expert gate/up biases and the clamped SwiGLU
// (swiglu-oai), and the experts' combine with a per-expert down bias.
// Elementwise and memory-bound: one thread per output element.
#include <algorithm>
#include <initializer_list>

#include "common.cuh"

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

}  // namespace

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
