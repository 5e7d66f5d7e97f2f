// Rotary position embedding. NEOX style rotates the pairs (i, i + n_rot/2);
// NORM style rotates adjacent pairs (2i, 2i + 1). Only the first n_rot
// elements of each head rotate (partial rope); the rest pass through.
#pragma once
#include <cstdint>

namespace guild {

enum class RopeStyle : uint8_t { Norm, Neox };

struct RopeParams {
  RopeStyle style = RopeStyle::Neox;
  int32_t n_rot = 0;          // rotated dimensions per head
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;    // 1 / linear scaling factor
  // YaRN (ext_factor 0 = off).
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int32_t n_ctx_orig = 0;
};

// Precomputes cos/sin for one position: cache has n_rot floats (cos, sin pairs).
void rope_cache(const RopeParams& p, int64_t pos, float* cos_sin);

// Rotates n_heads heads of head_dim floats in place, using a cache from rope_cache.
void rope_apply(const RopeParams& p, const float* cos_sin, float* x, int n_heads, int head_dim);

}  // namespace guild
