// RoPE and the per-head q/k post-processing on the device, shared by
// qkv_post (ops.cu) and decode attention (attention.cu), so both give the
// same bits.
#pragma once
#include "common.cuh"
#include "cuda_kernels.h"

namespace guild::cuda {

constexpr int kMaxHeadDim = 256;

struct RopeDev {
  int n_rot;
  bool neox;
  float theta_scale, freq_scale, ext_factor, attn_factor, corr_low, corr_high, mscale_ext;
};
// The device form of a RopeConfig (ops.cu).
RopeDev rope_dev(const RopeConfig& r);

__device__ __forceinline__ float yarn_ramp_dev(float low, float high, int i0) {
  const float y = (static_cast<float>(i0 / 2) - low) / fmaxf(0.001f, high - low);
  return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

// Rotates the head held in smem `v` (head_dim floats) by one warp.
__device__ __forceinline__ void rope_head_warp(const RopeDev& r, const float* cs, float* v, int lane) {
  const int half = r.n_rot / 2;
  for (int p = lane; p < half; p += 32) {
    const int a = r.neox ? p : 2 * p;
    const int b = r.neox ? p + half : 2 * p + 1;
    const float c = cs[2 * p], s = cs[2 * p + 1];
    const float x0 = v[a], x1 = v[b];
    v[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    v[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  }
}

// One q or k head after its projection, by one warp: src's D values into v
// (shared memory), RMS-normed over the head when nw is set, then rotated
// (cs: this position's cos/sin pairs) when r.n_rot > 0.
__device__ __forceinline__ void head_post_warp(const float* src, const float* nw, float eps, int D, const RopeDev& r,
                                               const float* cs, float* v, int lane) {
  float ss = 0.0f;
  for (int i = lane; i < D; i += 32) {
    const float x = src[i];
    v[i] = x;
    ss += x * x;
  }
  if (nw) {
    const float mean = warp_sum(ss) / static_cast<float>(D);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = lane; i < D; i += 32) v[i] = __fmul_rn(__fmul_rn(v[i], scale), nw[i]);
  }
  __syncwarp();
  if (r.n_rot > 0) rope_head_warp(r, cs, v, lane);
  __syncwarp();
}

}  // namespace guild::cuda
