// Softmax top-k routing of one token by one warp (moe_route). The fused
// moe_norm_route ranks with a whole block instead (router.cu); both take the
// largest logits, ties to the lower id, NaN as -inf.
#pragma once
#include "common.cuh"

namespace guild::cuda {

constexpr int kRouteMaxPerLane = 16;  // n_expert <= 512
constexpr int kRouteMaxK = 32;

// softmax over the n_expert logits l (read through L2: another block may have
// just written them), the k largest (ties to the lower id, in descending
// order), their probabilities renormalised to sum 1 into ids/weights[0..k).
// sel_id/sel_l: kRouteMaxK entries of shared memory for this warp.
__device__ __forceinline__ void route_token_warp(const float* l, int n_expert, int k, int32_t* ids, float* weights,
                                                 int* sel_id, float* sel_l) {
  const int lane = threadIdx.x & 31;
  float v[kRouteMaxPerLane];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kRouteMaxPerLane; ++i) {
    const int e = lane + 32 * i;
    v[i] = e < n_expert ? __ldcg(l + e) : -INFINITY;
    if (v[i] != v[i]) v[i] = -INFINITY;  // a NaN logit is never chosen over a number
    mx = fmaxf(mx, v[i]);
  }
  mx = warp_max(mx);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kRouteMaxPerLane; ++i)
    if (lane + 32 * i < n_expert) sum += expf(v[i] - mx);
  sum = warp_sum(sum);
  const float inv_sum = 1.0f / sum;
  unsigned taken = 0;
  for (int j = 0; j < k; ++j) {
    // Best remaining expert: largest logit, lowest id on ties.
    float bv = -INFINITY;
    int bi = INT32_MAX;
#pragma unroll
    for (int i = 0; i < kRouteMaxPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < n_expert && !((taken >> i) & 1u) && (bi == INT32_MAX || v[i] > bv)) { bv = v[i]; bi = e; }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > bv || (ov == bv && oi < bi) || (bi == INT32_MAX && oi != INT32_MAX)) { bv = ov; bi = oi; }
    }
    if (lane == 0) { sel_id[j] = bi; sel_l[j] = bv; }
#pragma unroll
    for (int i = 0; i < kRouteMaxPerLane; ++i)
      if (lane + 32 * i == bi) taken |= 1u << i;
  }
  __syncwarp();
  float w = 0.0f;
  if (lane < k) w = expf(sel_l[lane] - mx) * inv_sum;
  const float wsum = warp_sum(w);
  if (lane < k) {
    ids[lane] = sel_id[lane];
    weights[lane] = w / wsum;
  }
}

}  // namespace guild::cuda
