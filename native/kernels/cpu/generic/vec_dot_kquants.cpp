// Reference dot products of K-quant / IQ4_XS super-blocks with Q8_K
// activations (llama.cpp's pairing). Per super-block everything is integer
// and exact:
//   isum = sum_g scale_g * sum_{i in g} q_i * a_i
//   msum = sum_g min_g * bsums(g)            (Q2_K, Q4_K, Q5_K)
// then sum += (d_w * d_a) * isum - (dmin_w * d_a) * msum in float.
// Q3_K's "-4 unless the high bit is set" and Q6_K's "-32" offsets are applied
// to the quants directly (still exact integers).
#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "cpu/generic/generic_kernels.h"

namespace guild::cpu_generic {

float vec_dot_q2_k(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ2_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0, msum = 0;
    for (int g = 0; g < 16; ++g) {
      // group g covers elements 16g..16g+15: h = g/8, s = (g%8)/2, half = g%2.
      const int h = g >> 3, s = (g & 7) >> 1, half = g & 1;
      const uint8_t* q = x[i].qs + 32 * h + 16 * half;
      const int8_t* qa = y[i].qs + 16 * g;
      int gs = 0;
      for (int l = 0; l < 16; ++l) gs += ((q[l] >> (2 * s)) & 3) * qa[l];
      isum += (x[i].scales[g] & 0xF) * gs;
      msum += (x[i].scales[g] >> 4) * y[i].bsums[g];
    }
    const float da = y[i].d;
    sum += da * fp16_to_f32(x[i].d) * static_cast<float>(isum) -
           da * fp16_to_f32(x[i].dmin) * static_cast<float>(msum);
  }
  return sum;
}

float vec_dot_q3_k(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ3_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t sc[16];
    q3k_scales(x[i].scales, sc);
    int isum = 0;
    for (int g = 0; g < 16; ++g) {
      const int h = g >> 3, s = (g & 7) >> 1, half = g & 1;
      const int hbit = 4 * h + s;
      const int8_t* qa = y[i].qs + 16 * g;
      int gs = 0;
      for (int l = 16 * half; l < 16 * half + 16; ++l) {
        const int v = ((x[i].qs[32 * h + l] >> (2 * s)) & 3) - (((x[i].hmask[l] >> hbit) & 1) ? 0 : 4);
        gs += v * qa[l - 16 * half];
      }
      isum += sc[g] * gs;
    }
    sum += y[i].d * fp16_to_f32(x[i].d) * static_cast<float>(isum);
  }
  return sum;
}

namespace {

template <bool kFive, typename Block>
float dot_q45_k(int64_t n, const Block* x, const BlockQ8_K* y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0, msum = 0;
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      k4_scale_min(g, x[i].scales, &sc, &m);
      const int c = g >> 1, hi = g & 1;
      const uint8_t* q = x[i].qs + 32 * c;
      const int8_t* qa = y[i].qs + 32 * g;
      int gs = 0;
      for (int l = 0; l < 32; ++l) {
        int v = hi ? (q[l] >> 4) : (q[l] & 0xF);
        if constexpr (kFive) v += ((x[i].qh[l] >> g) & 1) << 4;
        gs += v * qa[l];
      }
      isum += sc * gs;
      msum += m * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
    }
    const float da = y[i].d;
    sum += da * fp16_to_f32(x[i].d) * static_cast<float>(isum) -
           da * fp16_to_f32(x[i].dmin) * static_cast<float>(msum);
  }
  return sum;
}

}  // namespace

float vec_dot_q4_k(int64_t n, const void* w, const void* a) {
  return dot_q45_k<false>(n, static_cast<const BlockQ4_K*>(w), static_cast<const BlockQ8_K*>(a));
}

float vec_dot_q5_k(int64_t n, const void* w, const void* a) {
  return dot_q45_k<true>(n, static_cast<const BlockQ5_K*>(w), static_cast<const BlockQ8_K*>(a));
}

float vec_dot_q6_k(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[i].ql + 64 * h;
      const uint8_t* qh = x[i].qh + 32 * h;
      const int8_t* sc = x[i].scales + 8 * h;
      const int8_t* qa = y[i].qs + 128 * h;
      int gs[8] = {};
      for (int l = 0; l < 32; ++l) {
        const int g = l >> 4;
        gs[g + 0] += (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32) * qa[l];
        gs[g + 2] += (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * qa[l + 32];
        gs[g + 4] += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * qa[l + 64];
        gs[g + 6] += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * qa[l + 96];
      }
      for (int g = 0; g < 8; ++g) isum += sc[g] * gs[g];
    }
    sum += y[i].d * fp16_to_f32(x[i].d) * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_iq4_xs(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ4_XS*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int isum = 0;
    for (int g = 0; g < 8; ++g) {
      const uint8_t* qs = x[i].qs + 16 * g;
      const int8_t* qa = y[i].qs + 32 * g;
      int gs = 0;
      for (int l = 0; l < 16; ++l) {
        gs += kIQ4NLValues[qs[l] & 0xF] * qa[l];
        gs += kIQ4NLValues[qs[l] >> 4] * qa[l + 16];
      }
      isum += iq4xs_scale(x[i], g) * gs;
    }
    sum += y[i].d * fp16_to_f32(x[i].d) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace guild::cpu_generic
