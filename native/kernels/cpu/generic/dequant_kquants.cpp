// Reference dequantizers for the K-quants (256-element super-blocks).
// Same float operation sequence as ggml's to_float: the per-group scale and
// min are formed first (super-scale * 6/4-bit integer), then each element is
// scale*q (- min). Requires -ffp-contract=off (set in CMake).
#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "cpu/generic/generic_kernels.h"

namespace guild::cpu_generic {

void dequant_q2_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ2_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const float dmin = fp16_to_f32(b[i].dmin);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = b[i].qs + 32 * h;
      for (int s = 0; s < 4; ++s) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = b[i].scales[8 * h + 2 * s + half];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) {
            const int v = (q[16 * half + l] >> (2 * s)) & 3;
            *dst++ = dl * static_cast<float>(v) - ml;
          }
        }
      }
    }
  }
}

void dequant_q3_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ3_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    int8_t sc[16];
    q3k_scales(b[i].scales, sc);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = b[i].qs + 32 * h;
      for (int s = 0; s < 4; ++s) {
        const int hbit = 4 * h + s;
        for (int half = 0; half < 2; ++half) {
          const float dl = d * static_cast<float>(sc[8 * h + 2 * s + half]);
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const int lo = (q[l] >> (2 * s)) & 3;
            const int v = lo - (((b[i].hmask[l] >> hbit) & 1) ? 0 : 4);
            *dst++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

// Q4_K and Q5_K share the scale/min packing; hi_bits adds the Q5_K 5th bit.
template <bool kFive, typename Block>
static void dequant_q45_k(const Block* b, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const float dmin = fp16_to_f32(b[i].dmin);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = b[i].qs + 32 * c;
      uint8_t sc, m;
      k4_scale_min(2 * c, b[i].scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      k4_scale_min(2 * c + 1, b[i].scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        int v = q[l] & 0xF;
        if constexpr (kFive) v += ((b[i].qh[l] >> (2 * c)) & 1) << 4;
        dst[l] = d1 * static_cast<float>(v) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        int v = q[l] >> 4;
        if constexpr (kFive) v += ((b[i].qh[l] >> (2 * c + 1)) & 1) << 4;
        dst[32 + l] = d2 * static_cast<float>(v) - m2;
      }
      dst += 64;
    }
  }
}

void dequant_q4_k(const void* src, float* dst, int64_t n) {
  dequant_q45_k<false>(static_cast<const BlockQ4_K*>(src), dst, n);
}

void dequant_q5_k(const void* src, float* dst, int64_t n) {
  dequant_q45_k<true>(static_cast<const BlockQ5_K*>(src), dst, n);
}

void dequant_q6_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b[i].ql + 64 * h;
      const uint8_t* qh = b[i].qh + 32 * h;
      const int8_t* sc = b[i].scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int g = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        // (d * scale) * q, left to right as ggml evaluates it.
        dst[l] = d * static_cast<float>(sc[g + 0]) * static_cast<float>(q1);
        dst[l + 32] = d * static_cast<float>(sc[g + 2]) * static_cast<float>(q2);
        dst[l + 64] = d * static_cast<float>(sc[g + 4]) * static_cast<float>(q3);
        dst[l + 96] = d * static_cast<float>(sc[g + 6]) * static_cast<float>(q4);
      }
      dst += 128;
    }
  }
}

}  // namespace guild::cpu_generic
