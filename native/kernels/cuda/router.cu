// One token's MoE routing in one launch (decode): the FFN norm, the router
// product and the softmax top-k, which took three launches (rms_norm, gemv,
// moe_route) with a grid-wide wait between each.
//
// Each block normalises the token's row itself (into shared memory), writes
// its share of the normed row (f32 and Q8_1) for the expert kernels, computes
// kRouterWarps router rows (one warp per row, weights prefetched into L2
// before the wait for the previous kernel), and the last block to finish
// (a counter in device memory, left zero for the next launch) routes, all
// its threads ranking the experts at once.
#include "gemv_impl.cuh"
#include "route.cuh"

namespace guild::cuda {
namespace {

constexpr int kRouterWarps = 4;
constexpr int kRouterMaxIn = 11264;  // floats of the normed row in shared memory (44 KB of the 48)

struct NormRouteParams {
  const float* x;
  const float* norm_w;
  float eps;
  int n;
  const uint8_t* w;
  size_t row_stride;
  int n_expert, k;
  float* xn;
  int8_t* qs;
  half2* ds;
  float* logits;
  int32_t* ids;
  float* weights;
  uint32_t* counter;
};

// Softmax top-k of one token by a whole block, by ranks rather than k rounds
// of warp-wide maxima (k dependent shuffle chains): an expert's rank is the
// number of experts with a larger logit, or an equal one and a lower id (NaN
// counts as -inf), so ranks are a permutation and ranks < k are the choices
// in moe_route's order. sl: n_expert floats of shared memory.
__device__ __forceinline__ void route_token_block(const float* logits, int n_expert, int k, int32_t* ids,
                                                  float* weights, float* sl, float* red) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  __shared__ int sel_id[kRouteMaxK];
  __shared__ float sel_w[kRouteMaxK];
  float mx = -INFINITY;
  for (int e = tid; e < n_expert; e += kRouterWarps * 32) {
    const float v = __ldcg(logits + e);
    sl[e] = v != v ? -INFINITY : v;
    mx = fmaxf(mx, sl[e]);
  }
  mx = warp_max(mx);
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  mx = red[0];
#pragma unroll
  for (int i = 1; i < kRouterWarps; ++i) mx = fmaxf(mx, red[i]);
  __syncthreads();
  float sum = 0.0f;
  for (int e = tid; e < n_expert; e += kRouterWarps * 32) sum += expf(sl[e] - mx);
  sum = warp_sum(sum);
  if (lane == 0) red[warp] = sum;
  __syncthreads();
  sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kRouterWarps; ++i) sum += red[i];
  const float inv_sum = 1.0f / sum;
  for (int e = tid; e < n_expert; e += kRouterWarps * 32) {
    const float v = sl[e];
    int rank = 0;
    for (int j = 0; j < n_expert; ++j) {
      const float u = sl[j];
      rank += (u > v) | ((u == v) & (j < e));
    }
    if (rank < k) {
      sel_id[rank] = e;
      sel_w[rank] = expf(v - mx) * inv_sum;
    }
  }
  __syncthreads();
  if (warp == 0) {
    const float w = lane < k ? sel_w[lane] : 0.0f;
    const float wsum = warp_sum(w);
    if (lane < k) {
      ids[lane] = sel_id[lane];
      weights[lane] = w / wsum;
    }
  }
}

template <uint32_t T>
__global__ void __launch_bounds__(kRouterWarps * 32) moe_norm_route_kernel(const NormRouteParams p) {
  constexpr int EB = (T == kF32) ? 4 : 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = blockIdx.x * kRouterWarps + warp;
  const uint8_t* wr = p.w + static_cast<size_t>(row) * p.row_stride;
  if (row < p.n_expert)  // the router never changes while a step runs
    prefetch_l2_range(wr, static_cast<size_t>(p.n) * EB, lane);
  pdl_begin();

  extern __shared__ __align__(16) float xs[];
  __shared__ float red[kRouterWarps];
  __shared__ float route_logits[32 * kRouteMaxPerLane];
  __shared__ bool last;
  // rms_norm's values: x * (1 / sqrt(mean(x^2) + eps)), then * w, each rounded.
  float ss = 0.0f;
  for (int i = 4 * threadIdx.x; i < p.n; i += 4 * kRouterWarps * 32) {
    const float4 v = *reinterpret_cast<const float4*>(p.x + i);
    *reinterpret_cast<float4*>(xs + i) = v;
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  ss = warp_sum(ss);
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kRouterWarps; ++i) total += red[i];
  const float scale = 1.0f / sqrtf(total / static_cast<float>(p.n) + p.eps);
  for (int i = threadIdx.x; i < p.n; i += kRouterWarps * 32) {
    float v = __fmul_rn(xs[i], scale);
    if (p.norm_w) v = __fmul_rn(v, p.norm_w[i]);
    xs[i] = v;
  }
  __syncthreads();

  // This block's share of the normed row for the expert kernels.
  const int stride = gridDim.x * kRouterWarps * 32;
  if (p.xn)
    for (int i = blockIdx.x * kRouterWarps * 32 + threadIdx.x; i < p.n; i += stride) p.xn[i] = xs[i];
  if (p.qs)
    for (int r = blockIdx.x * kRouterWarps + warp; r < p.n / 32; r += gridDim.x * kRouterWarps)
      q8_1_warp(xs[32 * r + lane], p.qs + 32 * r + lane, p.ds + r);

  if (row < p.n_expert) {
    const float acc = warp_sum(gemv_detail::float_row_lane_dot<T>(wr, xs, p.n, lane));
    if (lane == 0) p.logits[row] = acc;
  }

  // The last block routes (threadfence reduction: every block's logits are
  // visible before its count).
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(p.counter, 1u) + 1 == gridDim.x;
  __syncthreads();
  if (!last) return;
  __threadfence();
  route_token_block(p.logits, p.n_expert, p.k, p.ids, p.weights, route_logits, red);
  if (threadIdx.x == 0) *p.counter = 0;
}

}  // namespace

bool moe_norm_route_supported(const DevMatrix& router, int k) {
  const bool float_type = router.type == kF32 || router.type == kF16 || router.type == kBF16;
  return float_type && router.data && router.n_in > 0 && router.n_in % 4 == 0 && router.n_in <= kRouterMaxIn &&
         router.n_out >= 1 && router.n_out <= 32 * kRouteMaxPerLane && k >= 1 && k <= kRouteMaxK &&
         k <= router.n_out && router.row_stride % 16 == 0 && reinterpret_cast<uintptr_t>(router.data) % 16 == 0 &&
         router.row_stride >= static_cast<size_t>(router.n_in) * (router.type == kF32 ? 4 : 2);
}

cudaError_t moe_norm_route(const float* x, const float* norm_w, float eps, const DevMatrix& router, int k, float* xn,
                           const Q8Act* xn_q8, float* logits, int32_t* ids, float* weights, uint32_t* counter,
                           cudaStream_t s) {
  GUILD_CUDA_RETURN_IF(!x || !logits || !ids || !weights || !counter, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(reinterpret_cast<uintptr_t>(x) % 16 != 0, cudaErrorInvalidValue);
  GUILD_CUDA_RETURN_IF(!moe_norm_route_supported(router, k), cudaErrorNotSupported);
  const int n = static_cast<int>(router.n_in);
  GUILD_CUDA_RETURN_IF(xn_q8 && (n % 32 != 0 || !xn_q8->qs || !xn_q8->ds), cudaErrorInvalidValue);
  NormRouteParams p{};
  p.x = x;
  p.norm_w = norm_w;
  p.eps = eps;
  p.n = n;
  p.w = static_cast<const uint8_t*>(router.data);
  p.row_stride = router.row_stride;
  p.n_expert = static_cast<int>(router.n_out);
  p.k = k;
  p.xn = xn;
  p.qs = xn_q8 ? xn_q8->qs : nullptr;
  p.ds = xn_q8 ? reinterpret_cast<half2*>(xn_q8->ds) : nullptr;
  p.logits = logits;
  p.ids = ids;
  p.weights = weights;
  p.counter = counter;
  const dim3 grid(static_cast<unsigned>(ceil_div(p.n_expert, kRouterWarps)));
  const dim3 block(kRouterWarps * 32);
  const size_t smem = static_cast<size_t>(n) * 4;
  switch (router.type) {
    case kF32: launch_pdl(moe_norm_route_kernel<kF32>, grid, block, smem, s, p); break;
    case kF16: launch_pdl(moe_norm_route_kernel<kF16>, grid, block, smem, s, p); break;
    default: launch_pdl(moe_norm_route_kernel<kBF16>, grid, block, smem, s, p); break;
  }
  return launch_status();
}

}  // namespace guild::cuda
