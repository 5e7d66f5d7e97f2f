#include "ops/rope.h"

#include <algorithm>
#include <cmath>

namespace guild {
namespace {

// YaRN's correction range: the dimension index at which a rotation completes
// n_rot turns over the original context.
float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return n_dims * std::log(n_ctx_orig / (n_rot * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}

float yarn_ramp(float low, float high, int i0) {
  const float y = (i0 / 2 - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

}  // namespace

void rope_cache(const RopeParams& p, int64_t pos, float* cos_sin) {
  // theta_i = pos * base^(-2i/n_rot), built by repeated multiplication in
  // float, the order llama.cpp uses, so positions agree to the last bit.
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float corr_low = 0.0f, corr_high = 0.0f;
  if (p.ext_factor != 0.0f) {
    corr_low = std::max(0.0f, std::floor(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base)));
    corr_high = std::min(static_cast<float>(p.n_rot - 1),
                         std::ceil(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base)));
  }
  float theta_extrap = static_cast<float>(pos);
  for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
    const float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float ramp_mix = yarn_ramp(corr_low, corr_high, i0) * p.ext_factor;
      theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cos_sin[i0] = std::cos(theta) * mscale;
    cos_sin[i0 + 1] = std::sin(theta) * mscale;
    theta_extrap *= theta_scale;
  }
}

void rope_apply(const RopeParams& p, const float* cos_sin, float* x, int n_heads, int head_dim) {
  const int half = p.n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
      const float c = cos_sin[i0], s = cos_sin[i0 + 1];
      const int a = p.style == RopeStyle::Neox ? i0 / 2 : i0;
      const int b = p.style == RopeStyle::Neox ? i0 / 2 + half : i0 + 1;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace guild
