// Q2_K and Q3_K (256-element super-blocks of 16 groups of 16, 2-bit quants;
// Q3_K adds a high bit and signed 6-bit scales): the matrix-vector unit and
// the run-of-32 dequantizer. Element 128h + 32s + l (h < 2, s < 4, l < 32)
// is (qs[32h + l] >> 2s) & 3, group 8h + 2s + l/16 (core/quant_blocks.h).
// Unit u = (h = u/2, j = u%2): the 16 quant bytes qs[32h + 16j ..], whose
// four 2-bit planes s are the groups 8h + 2s + j (16 elements each, at
// 128h + 32s + 16j). Q2_K blocks (84 bytes) are 4-byte aligned in a 16-byte
// aligned row, Q3_K blocks (110) 2-byte aligned.
#pragma once
#include "common.cuh"

namespace guild::cuda {

// Q2_K: x = d * (sc & 15) * q - dmin * (sc >> 4). The groups are 16 long and
// a Q8_1 run 32, so the minimum's activation sum is taken here (dp4a with ones).
template <> struct QUnit<kQ2_K> {
  static constexpr int QK = 256, BYTES = 84, UNITS = 4;
  struct W { uint32_t q[4]; uint32_t sc; uint32_t dm; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    const int h = u >> 1, j = u & 1;
    W w;
#pragma unroll
    for (int i = 0; i < 4; ++i) w.q[i] = ld_u32(b + 16 + 32 * h + 16 * j + 4 * i);
    // scales[8h + 2s + j], s = 0..3, from scales[8h .. 8h + 8)
    w.sc = __byte_perm(ld_u32(b + 8 * h), ld_u32(b + 8 * h + 4), j ? 0x7531 : 0x6420);
    w.dm = ld_u32(b + 80);
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    const int h = u >> 1, j = u & 1;
    const int8_t* a = aq + 128 * h + 16 * j;
    float fd = 0.0f, fm = 0.0f;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int4 av = *reinterpret_cast<const int4*>(a + 32 * s);
      const int a4[4] = {av.x, av.y, av.z, av.w};
      int isum = 0, asum = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        isum = dp4a(static_cast<int>((w.q[i] >> (2 * s)) & 0x03030303u), a4[i], isum);
        asum = byte_sum(a4[i], asum);
      }
      const int sc = static_cast<int>((w.sc >> (8 * s)) & 0xFF);
      const float da = __low2float(ads[4 * h + s]);
      fd += da * static_cast<float>((sc & 0xF) * isum);
      fm += da * static_cast<float>((sc >> 4) * asum);
    }
    return h2f(w.dm & 0xFFFF) * fd - h2f(w.dm >> 16) * fm;
  }
};

// Q3_K's signed 6-bit scale of group g (minus 32) from its 12 packed bytes
// held in three words: low 4 bits scales[g] & 15 (g < 8) or scales[g-8] >> 4,
// high 2 bits (scales[8 + g%4] >> 2(g/4)) & 3.
__device__ __forceinline__ int q3k_scale(uint32_t s0, uint32_t s1, uint32_t s2, int g) {
  const uint32_t lo = (kbyte(s0, s1, s2, g & 7) >> (4 * (g >> 3))) & 0xF;
  const uint32_t hi = (kbyte(s0, s1, s2, 8 + (g & 3)) >> (2 * (g >> 2))) & 3;
  return static_cast<int>(lo | (hi << 4)) - 32;
}

// Q3_K: x = d * sc * (q - 4 * (1 - hbit)), hbit of element 128h + 32s + l =
// (hmask[l] >> (4h + s)) & 1: the signed 3-bit value (q | hbit << 2) - 4.
template <> struct QUnit<kQ3_K> {
  static constexpr int QK = 256, BYTES = 110, UNITS = 4;
  struct W { uint32_t q[4], hm[4]; int sc[4]; uint32_t d; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    const int h = u >> 1, j = u & 1;
    W w;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w.q[i] = ld_u32_a2(b + 32 + 32 * h + 16 * j + 4 * i);
      w.hm[i] = ld_u32_a2(b + 16 * j + 4 * i);
    }
    const uint32_t s0 = ld_u32_a2(b + 96), s1 = ld_u32_a2(b + 100), s2 = ld_u32_a2(b + 104);
#pragma unroll
    for (int s = 0; s < 4; ++s) w.sc[s] = q3k_scale(s0, s1, s2, 8 * h + 2 * s + j);
    w.d = ld_u16(b + 108);
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    const int h = u >> 1, j = u & 1;
    const int8_t* a = aq + 128 * h + 16 * j;
    float f = 0.0f;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int4 av = *reinterpret_cast<const int4*>(a + 32 * s);
      const int a4[4] = {av.x, av.y, av.z, av.w};
      int isum = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t q3 = ((w.q[i] >> (2 * s)) & 0x03030303u) | (((w.hm[i] >> (4 * h + s)) & 0x01010101u) << 2);
        isum = dp4a(static_cast<int>(__vsubss4(q3, 0x04040404u)), a4[i], isum);
      }
      f += __low2float(ads[4 * h + s]) * static_cast<float>(w.sc[s] * isum);
    }
    return h2f(w.d) * f;
  }
};

// Run r of a row: super-block r / 8, k = r % 8 = (h = k/4, s = k%4): elements
// 128h + 32s + l, l < 32 (groups 8h + 2s and 8h + 2s + 1).
template <> struct Deq<kQ2_K> {
  static constexpr int QK = 256, BYTES = 84;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int h = (run & 7) >> 2, s = run & 3;
    const uint32_t dm = ld_u32(b + 80);
    const float d = h2f(dm & 0xFFFF), dmin = h2f(dm >> 16);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint32_t sc = b[8 * h + 2 * s + half];
      const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const uint32_t v = ld_u32(b + 16 + 32 * h + 16 * half + 4 * w);
#pragma unroll
        for (int i = 0; i < 4; ++i)
          out[16 * half + 4 * w + i] = __fsub_rn(__fmul_rn(dl, static_cast<float>((v >> (8 * i + 2 * s)) & 3)), ml);
      }
    }
  }
};

template <> struct Deq<kQ3_K> {
  static constexpr int QK = 256, BYTES = 110;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int h = (run & 7) >> 2, s = run & 3;
    const float d = h2f(ld_u16(b + 108));
    const uint32_t s0 = ld_u32_a2(b + 96), s1 = ld_u32_a2(b + 100), s2 = ld_u32_a2(b + 104);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float dl = d * static_cast<float>(q3k_scale(s0, s1, s2, 8 * h + 2 * s + half));
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const uint32_t v = ld_u32_a2(b + 32 + 32 * h + 16 * half + 4 * w);
        const uint32_t m = ld_u32_a2(b + 16 * half + 4 * w);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int lo = static_cast<int>((v >> (8 * i + 2 * s)) & 3);
          const int hbit = static_cast<int>((m >> (8 * i + 4 * h + s)) & 1);
          out[16 * half + 4 * w + i] = dl * static_cast<float>(lo - (hbit ? 0 : 4));
        }
      }
    }
  }
};

}  // namespace guild::cuda
