#include "artifact/weight_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "core/tensor_type.h"

namespace guild {
namespace {

int nearest(float v) { return static_cast<int>(std::lround(v)); }
int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// The element of largest magnitude, with its sign (first one on ties).
float signed_amax(const float* x, int n) {
  float best = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a > amax) { amax = a; best = x[i]; }
  }
  return best;
}

// ---- 32-element blocks -----------------------------------------------------------

// Q4_0: d = max / -8 (max = the signed extreme), q = round(x / d) + 8 in 0..15.
void q4_0(const float* x, BlockQ4_0* b) {
  const float max = signed_amax(x, 32);
  const float d = max / -8.0f;
  b->d = f32_to_fp16(d);
  const float dd = fp16_to_f32(b->d);
  const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
  for (int j = 0; j < 16; ++j) {
    const int lo = clampi(nearest(x[j] * id) + 8, 0, 15);
    const int hi = clampi(nearest(x[j + 16] * id) + 8, 0, 15);
    b->qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// Q5_0: d = max / -16, q = round(x / d) + 16 in 0..31; bit 4 of element j in bit j of qh.
void q5_0(const float* x, BlockQ5_0* b) {
  const float max = signed_amax(x, 32);
  b->d = f32_to_fp16(max / -16.0f);
  const float dd = fp16_to_f32(b->d);
  const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int lo = clampi(nearest(x[j] * id) + 16, 0, 31);
    const int hi = clampi(nearest(x[j + 16] * id) + 16, 0, 31);
    b->qs[j] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
    qh |= static_cast<uint32_t>(lo >> 4) << j;
    qh |= static_cast<uint32_t>(hi >> 4) << (j + 16);
  }
  std::memcpy(b->qh, &qh, 4);
}

// Q4_1 / Q5_1: d = (max - min) / levels, m = min, q = round((x - m) / d).
template <int kLevels, typename Block>
void q_1(const float* x, Block* b) {
  float mn = x[0], mx = x[0];
  for (int j = 1; j < 32; ++j) { mn = std::min(mn, x[j]); mx = std::max(mx, x[j]); }
  b->d = f32_to_fp16((mx - mn) / kLevels);
  b->m = f32_to_fp16(mn);
  const float dd = fp16_to_f32(b->d), m = fp16_to_f32(b->m);
  const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int lo = clampi(nearest((x[j] - m) * id), 0, kLevels);
    const int hi = clampi(nearest((x[j + 16] - m) * id), 0, kLevels);
    b->qs[j] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
    qh |= static_cast<uint32_t>(lo >> 4) << j;
    qh |= static_cast<uint32_t>(hi >> 4) << (j + 16);
  }
  if constexpr (kLevels == 31) std::memcpy(b->qh, &qh, 4);
}

// Q8_0: d = amax / 127, q = round(x / d).
void q8_0(const float* x, BlockQ8_0* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  b->d = f32_to_fp16(amax / 127.0f);
  const float dd = fp16_to_f32(b->d);
  const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
  for (int j = 0; j < 32; ++j) b->qs[j] = static_cast<int8_t>(clampi(nearest(x[j] * id), -127, 127));
}

// MXFP4 (OCP microscaling FP4): x = 2^(e - 127) * v with v one of the E2M1
// values +-{0, 0.5, 1, 1.5, 2, 3, 4, 6} (code bit 3 = sign). The exponent puts
// the block's largest magnitude in [4, 8) units of the scale: e - 127 =
// floor(log2(amax)) - 2, the format's reference choice (values from 6 to 8
// units saturate at 6). Codes are nearest, ties to the even code (E2M1's
// round-to-nearest-even); element j in the low nibble of qs[j], j + 16 in
// the high one, as in Q4_0.
uint8_t e2m1_code(float x, float inv_scale) {
  // Doubled magnitudes (kMXFP4Values[0..7]) and the midpoints between them.
  static constexpr float kMid2[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f};
  const float v2 = 2.0f * std::fabs(x) * inv_scale;
  int code = 0;
  while (code < 7 && v2 > kMid2[code]) ++code;
  if (code < 7 && v2 == kMid2[code] && code % 2 == 1) ++code;  // a tie goes to the even code
  return static_cast<uint8_t>(code == 0 ? 0 : (std::signbit(x) ? code | 8 : code));
}

void mxfp4(const float* x, BlockMXFP4* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  int e = 0;
  if (amax > 0.0f && std::isfinite(amax)) {
    int p = 0;
    std::frexp(amax, &p);  // amax = m * 2^p, m in [0.5, 1): floor(log2(amax)) = p - 1
    e = clampi(p - 1 - 2 + 127, 0, 254);  // 255 is E8M0's NaN
  }
  b->e = static_cast<uint8_t>(e);
  const float inv_scale = 1.0f / (2.0f * e8m0_to_f32_half(b->e));  // scale 2^(e - 127), a power of two
  for (int j = 0; j < 16; ++j)
    b->qs[j] = static_cast<uint8_t>(e2m1_code(x[j], inv_scale) | (e2m1_code(x[j + 16], inv_scale) << 4));
}

// ---- 256-element super-blocks ------------------------------------------------------

// Q4_K / Q5_K scale packing (the inverse of k4_scale_min in core/quant_blocks.h).
void pack_k4_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t out[12]) {
  std::memset(out, 0, 12);
  for (int g = 0; g < 4; ++g) {
    out[g] = static_cast<uint8_t>(sc[g] & 63);
    out[g + 4] = static_cast<uint8_t>(m[g] & 63);
  }
  for (int g = 4; g < 8; ++g) {
    out[g + 4] = static_cast<uint8_t>((sc[g] & 15) | ((m[g] & 15) << 4));
    out[g - 4] |= static_cast<uint8_t>((sc[g] >> 4) << 6);
    out[g] |= static_cast<uint8_t>((m[g] >> 4) << 6);
  }
}

// Q4_K (kLevels 15) / Q5_K (31): per group of 32, scale = (max - min) / levels
// and min = -min(x, 0); both as 6-bit multiples of the fp16 super-scales d and
// dmin (the largest group value / 63); q = round((x + min) / scale).
template <int kLevels, typename Block>
void q45_k(const float* x, Block* b) {
  float scale[8], mins[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int g = 0; g < 8; ++g) {
    const float* v = x + 32 * g;
    float mn = v[0], mx = v[0];
    for (int j = 1; j < 32; ++j) { mn = std::min(mn, v[j]); mx = std::max(mx, v[j]); }
    mn = std::min(mn, 0.0f);
    scale[g] = (mx - mn) / kLevels;
    mins[g] = -mn;
    max_scale = std::max(max_scale, scale[g]);
    max_min = std::max(max_min, mins[g]);
  }
  b->d = f32_to_fp16(max_scale / 63.0f);
  b->dmin = f32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_f32(b->d), dmin = fp16_to_f32(b->dmin);
  uint8_t sc[8], m[8];
  for (int g = 0; g < 8; ++g) {
    sc[g] = static_cast<uint8_t>(d > 0.0f ? clampi(nearest(scale[g] / d), 0, 63) : 0);
    m[g] = static_cast<uint8_t>(dmin > 0.0f ? clampi(nearest(mins[g] / dmin), 0, 63) : 0);
  }
  pack_k4_scales(sc, m, b->scales);
  uint8_t q[256];
  for (int g = 0; g < 8; ++g) {
    const float ds = d * sc[g], dm = dmin * m[g];
    const float id = ds > 0.0f ? 1.0f / ds : 0.0f;
    for (int j = 0; j < 32; ++j) q[32 * g + j] = static_cast<uint8_t>(clampi(nearest((x[32 * g + j] + dm) * id), 0, kLevels));
  }
  // Element 64c + l: low nibble of qs[32c + l]; 64c + 32 + l: high nibble.
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      b->qs[32 * c + l] = static_cast<uint8_t>((q[64 * c + l] & 15) | ((q[64 * c + 32 + l] & 15) << 4));
  if constexpr (kLevels == 31) {
    std::memset(b->qh, 0, 32);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        b->qh[l] |= static_cast<uint8_t>((q[64 * c + l] >> 4) << (2 * c));
        b->qh[l] |= static_cast<uint8_t>((q[64 * c + 32 + l] >> 4) << (2 * c + 1));
      }
  }
}

// Q6_K: 16 groups of 16; group scale = signed extreme / -32 as an int8
// multiple of d (the largest |group scale| / 127); q = round(x / scale) + 32.
void q6_k(const float* x, BlockQ6_K* b) {
  float scale[16];
  float amax_scale = 0.0f, signed_max_scale = 0.0f;
  for (int g = 0; g < 16; ++g) {
    scale[g] = signed_amax(x + 16 * g, 16) / -32.0f;
    if (std::fabs(scale[g]) > amax_scale) { amax_scale = std::fabs(scale[g]); signed_max_scale = scale[g]; }
  }
  b->d = f32_to_fp16(signed_max_scale / -127.0f);
  const float d = fp16_to_f32(b->d);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  uint8_t q[256];
  for (int g = 0; g < 16; ++g) {
    const int s = clampi(nearest(scale[g] * id), -127, 127);
    b->scales[g] = static_cast<int8_t>(s);
    const float ds = d * static_cast<float>(s);
    const float ids = ds != 0.0f ? 1.0f / ds : 0.0f;
    for (int j = 0; j < 16; ++j) q[16 * g + j] = static_cast<uint8_t>(clampi(nearest(x[16 * g + j] * ids) + 32, 0, 63));
  }
  for (int h = 0; h < 2; ++h) {
    uint8_t* ql = b->ql + 64 * h;
    uint8_t* qh = b->qh + 32 * h;
    const uint8_t* e = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((e[l] & 15) | ((e[l + 64] & 15) << 4));
      ql[l + 32] = static_cast<uint8_t>((e[l + 32] & 15) | ((e[l + 96] & 15) << 4));
      qh[l] = static_cast<uint8_t>((e[l] >> 4) | ((e[l + 32] >> 4) << 2) | ((e[l + 64] >> 4) << 4) | ((e[l + 96] >> 4) << 6));
    }
  }
}

// Q2_K: 16 groups of 16, x = d*sc*q - dmin*m with q in 0..3 and 4-bit sc, m.
// Per group the range [min(x, 0), max] in 3 steps; the group scales and
// offsets are then themselves quantized to 4 bits against d and dmin.
void q2_k(const float* x, BlockQ2_K* b) {
  float scale[16], offset[16];
  float max_scale = 0, max_offset = 0;
  for (int g = 0; g < 16; ++g) {
    float lo = 0, hi = -INFINITY;
    for (int l = 0; l < 16; ++l) {
      lo = std::min(lo, x[16 * g + l]);
      hi = std::max(hi, x[16 * g + l]);
    }
    scale[g] = std::max(0.0f, hi - lo) / 3.0f;
    offset[g] = -lo;
    max_scale = std::max(max_scale, scale[g]);
    max_offset = std::max(max_offset, offset[g]);
  }
  b->d = f32_to_fp16(max_scale / 15.0f);
  b->dmin = f32_to_fp16(max_offset / 15.0f);
  const float d = fp16_to_f32(b->d), dmin = fp16_to_f32(b->dmin);
  std::memset(b->qs, 0, sizeof b->qs);
  for (int g = 0; g < 16; ++g) {
    const int sc = d > 0 ? std::clamp(static_cast<int>(std::lround(scale[g] / d)), 0, 15) : 0;
    const int m = dmin > 0 ? std::clamp(static_cast<int>(std::lround(offset[g] / dmin)), 0, 15) : 0;
    b->scales[g] = static_cast<uint8_t>(sc | (m << 4));
    const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
    // Group g = 8h + 2s + half holds elements 128h + 32s + 16half + l, stored
    // in qs[32h + 16half + l] at bits 2s.
    const int h = g / 8, s = (g % 8) / 2, half = g % 2;
    for (int l = 0; l < 16; ++l) {
      const int q = dl > 0 ? std::clamp(static_cast<int>(std::lround((x[16 * g + l] + ml) / dl)), 0, 3) : 0;
      b->qs[32 * h + 16 * half + l] |= static_cast<uint8_t>(q << (2 * s));
    }
  }
}

template <typename Block, typename Fn>
void blocks(const float* src, int64_t n, int block_elems, void* dst, Fn fn) {
  Block* b = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / block_elems; ++i) fn(src + i * block_elems, b + i);
}

}  // namespace

namespace {

bool builtin(TensorType t) {
  switch (t) {
    case TensorType::F32: case TensorType::F16: case TensorType::BF16: case TensorType::Q4_0: case TensorType::Q4_1:
    case TensorType::Q5_0: case TensorType::Q5_1: case TensorType::Q8_0: case TensorType::Q2_K: case TensorType::Q4_K:
    case TensorType::Q5_K: case TensorType::Q6_K: case TensorType::MXFP4:
      return true;
    default:
      return false;
  }
}

// Quantizers registered by code that has the codebooks (register_weight_quantizer).
WeightQuantizeFn g_registered[kTensorTypeIdLimit] = {};

}  // namespace

void register_weight_quantizer(uint32_t type_id, WeightQuantizeFn fn) {
  if (type_id < kTensorTypeIdLimit && !builtin(static_cast<TensorType>(type_id))) g_registered[type_id] = fn;
}

bool weight_quant_supported(uint32_t type_id) {
  if (type_id >= kTensorTypeIdLimit) return false;
  return builtin(static_cast<TensorType>(type_id)) || g_registered[type_id] != nullptr;
}

bool quantize_weight_row(uint32_t type_id, const float* src, int64_t n, void* dst) {
  if (!weight_quant_supported(type_id)) return false;
  const TensorTypeInfo& info = tensor_type_info(type_id);
  if (n < 0 || n % info.block_elems != 0) return false;
  if (g_registered[type_id]) {
    g_registered[type_id](src, n, dst);
    return true;
  }
  switch (static_cast<TensorType>(type_id)) {
    case TensorType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case TensorType::F16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_fp16(src[i]);
      break;
    }
    case TensorType::BF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      break;
    }
    case TensorType::Q4_0: blocks<BlockQ4_0>(src, n, 32, dst, q4_0); break;
    case TensorType::Q4_1: blocks<BlockQ4_1>(src, n, 32, dst, q_1<15, BlockQ4_1>); break;
    case TensorType::Q5_0: blocks<BlockQ5_0>(src, n, 32, dst, q5_0); break;
    case TensorType::Q5_1: blocks<BlockQ5_1>(src, n, 32, dst, q_1<31, BlockQ5_1>); break;
    case TensorType::Q8_0: blocks<BlockQ8_0>(src, n, 32, dst, q8_0); break;
    case TensorType::MXFP4: blocks<BlockMXFP4>(src, n, 32, dst, mxfp4); break;
    case TensorType::Q2_K: blocks<BlockQ2_K>(src, n, 256, dst, q2_k); break;
    case TensorType::Q4_K: blocks<BlockQ4_K>(src, n, 256, dst, q45_k<15, BlockQ4_K>); break;
    case TensorType::Q5_K: blocks<BlockQ5_K>(src, n, 256, dst, q45_k<31, BlockQ5_K>); break;
    case TensorType::Q6_K: blocks<BlockQ6_K>(src, n, 256, dst, q6_k); break;
    default: return false;
  }
  return true;
}

}  // namespace guild
