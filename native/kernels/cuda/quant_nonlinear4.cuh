// The table-driven 4-bit types: IQ4_NL (32-element blocks), IQ4_XS (256, with
// 6-bit group scales) and MXFP4 (32, E2M1 values with an E8M0 exponent).
// A 4-bit index selects one of 16 int8 levels; the levels are core/
// quant_blocks.h's kIQ4NLValues / kMXFP4Values, packed here into four words
// at compile time (one definition of the values) and looked up four at a time
// with byte permutes (lut16): the looked-up bytes go straight into dp4a.
// Alignment inside a 16-byte aligned row: IQ4_NL blocks (18 bytes) are 2-byte
// aligned, IQ4_XS (136) 8-byte, MXFP4 (17) 1-byte (ld_16_a1).
#pragma once
#include "common.cuh"

namespace guild::cuda {

constexpr uint32_t pack_levels(const int8_t* v, int word) {
  uint32_t w = 0;
  for (int i = 0; i < 4; ++i) w |= static_cast<uint32_t>(static_cast<uint8_t>(v[4 * word + i])) << (8 * i);
  return w;
}
constexpr uint32_t kIQ4NLWord0 = pack_levels(kIQ4NLValues, 0), kIQ4NLWord1 = pack_levels(kIQ4NLValues, 1),
                   kIQ4NLWord2 = pack_levels(kIQ4NLValues, 2), kIQ4NLWord3 = pack_levels(kIQ4NLValues, 3);
constexpr uint32_t kMXFP4Word0 = pack_levels(kMXFP4Values, 0), kMXFP4Word1 = pack_levels(kMXFP4Values, 1),
                   kMXFP4Word2 = pack_levels(kMXFP4Values, 2), kMXFP4Word3 = pack_levels(kMXFP4Values, 3);

// Four nibble indices (one per byte) -> four int8 levels.
__device__ __forceinline__ int iq4nl_levels(uint32_t idx) {
  return static_cast<int>(lut16(idx, kIQ4NLWord0, kIQ4NLWord1, kIQ4NLWord2, kIQ4NLWord3));
}
__device__ __forceinline__ int mxfp4_levels(uint32_t idx) {
  return static_cast<int>(lut16(idx, kMXFP4Word0, kMXFP4Word1, kMXFP4Word2, kMXFP4Word3));
}

// E8M0 exponent e as 2^(e-127) / 2 (the CPU's e8m0_to_f32_half: e = 0, 1 are
// the subnormals 2^-128, 2^-127).
__device__ __forceinline__ float e8m0_half(uint32_t e) {
  return __uint_as_float(e < 2 ? (0x00200000u << e) : ((e - 1) << 23));
}

// Four nibble indices -> the levels of IQ4_NL / IQ4_XS (MX false) or MXFP4 (MX true).
template <bool MX>
__device__ __forceinline__ int levels4(uint32_t idx) {
  return MX ? mxfp4_levels(idx) : iq4nl_levels(idx);
}

// Dot of 16 packed bytes of nibble indices (q[0..3]: elements 4i.. in the low
// nibbles, 16 + 4i.. in the high ones) with 32 activation quants.
template <bool MX>
__device__ __forceinline__ int nibble_levels_dot(const uint32_t* q, const int8_t* a) {
  const int4 a0 = *reinterpret_cast<const int4*>(a);
  const int4 a1 = *reinterpret_cast<const int4*>(a + 16);
  const int lo[4] = {a0.x, a0.y, a0.z, a0.w}, hi[4] = {a1.x, a1.y, a1.z, a1.w};
  int s = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    s = dp4a(levels4<MX>(q[i] & 0x0F0F0F0Fu), lo[i], s);
    s = dp4a(levels4<MX>((q[i] >> 4) & 0x0F0F0F0Fu), hi[i], s);
  }
  return s;
}

template <> struct QUnit<kIQ4_NL> {
  static constexpr int QK = 32, BYTES = 18, UNITS = 1;
  struct W { uint32_t q[4]; uint32_t d; };
  __device__ static __forceinline__ W load(const uint8_t* b, int) {
    W w;
#pragma unroll
    for (int i = 0; i < 4; ++i) w.q[i] = ld_u32_a2(b + 2 + 4 * i);
    w.d = ld_u16(b);
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int) {
    return h2f(w.d) * __low2float(ads[0]) * static_cast<float>(nibble_levels_dot<false>(w.q, aq));
  }
};

// IQ4_XS: unit u = group u (32 elements, 16 quant bytes at 8 + 16u).
template <> struct QUnit<kIQ4_XS> {
  static constexpr int QK = 256, BYTES = 136, UNITS = 8;
  struct W { uint32_t q[4]; uint32_t dh, sl; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    W w;
    w.dh = ld_u32(b);      // d | scales_h << 16
    w.sl = ld_u32(b + 4);  // scales_l[0..3]
#pragma unroll
    for (int i = 0; i < 4; ++i) w.q[i] = ld_u32(b + 8 + 16 * u + 4 * i);
    return w;
  }
  // 6-bit scale of group g: low nibble (scales_l[g/2] >> 4(g%2)) = bits 4g.. of
  // the scales_l word, high 2 bits (scales_h >> 2g); minus 32.
  __device__ static __forceinline__ int scale(uint32_t dh, uint32_t sl, int g) {
    return static_cast<int>(((sl >> (4 * g)) & 0xF) | (((dh >> (16 + 2 * g)) & 3) << 4)) - 32;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    const int s = nibble_levels_dot<false>(w.q, aq + 32 * u);
    return h2f(w.dh & 0xFFFF) * static_cast<float>(scale(w.dh, w.sl, u)) * __low2float(ads[u]) * static_cast<float>(s);
  }
};

template <> struct QUnit<kMXFP4> {
  static constexpr int QK = 32, BYTES = 17, UNITS = 1;
  struct W { uint32_t q[4]; uint32_t e; };
  __device__ static __forceinline__ W load(const uint8_t* b, int) {
    W w;
    ld_16_a1(b + 1, w.q);
    w.e = b[0];
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int) {
    return e8m0_half(w.e) * __low2float(ads[0]) * static_cast<float>(nibble_levels_dot<true>(w.q, aq));
  }
};

// Dequantizers (bit-exact with the CPU: one rounded product, scale x level, per element).
// 32 elements from 16 index bytes q[0..3]: out[4i + j] (low nibbles), out[16 + 4i + j] (high).
template <bool MX>
__device__ __forceinline__ void nibble_levels_run(const uint32_t* q, float scale, float* out) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t lo = static_cast<uint32_t>(levels4<MX>(q[i] & 0x0F0F0F0Fu));
    const uint32_t hi = static_cast<uint32_t>(levels4<MX>((q[i] >> 4) & 0x0F0F0F0Fu));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float vl = static_cast<float>(static_cast<int8_t>(lo >> (8 * j)));
      const float vh = static_cast<float>(static_cast<int8_t>(hi >> (8 * j)));
      out[4 * i + j] = scale * vl;
      out[16 + 4 * i + j] = scale * vh;
    }
  }
}

template <> struct Deq<kIQ4_NL> {
  static constexpr int QK = 32, BYTES = 18;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + run * BYTES;
    uint32_t q[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) q[i] = ld_u32_a2(b + 2 + 4 * i);
    nibble_levels_run<false>(q, h2f(ld_u16(b)), out);
  }
};

template <> struct Deq<kIQ4_XS> {
  static constexpr int QK = 256, BYTES = 136;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int g = run & 7;
    const uint32_t dh = ld_u32(b);
    const float dl = h2f(dh & 0xFFFF) * static_cast<float>(QUnit<kIQ4_XS>::scale(dh, ld_u32(b + 4), g));
    uint32_t q[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) q[i] = ld_u32(b + 8 + 16 * g + 4 * i);
    nibble_levels_run<false>(q, dl, out);
  }
};

template <> struct Deq<kMXFP4> {
  static constexpr int QK = 32, BYTES = 17;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + run * BYTES;
    uint32_t q[4];
    ld_16_a1(b + 1, q);
    nibble_levels_run<true>(q, e8m0_half(b[0]), out);
  }
};

}  // namespace guild::cuda
