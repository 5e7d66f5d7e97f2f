// Q4_1 and Q5_1 (32-element blocks with a minimum, x = d * q + m): the
// matrix-vector unit (one lane = one block, dp4a against Q8_1; the minimum
// times the run's d * sum q from the activations' half2) and the run-of-32
// dequantizer (bit-exact with the CPU: q * d rounded, then + m rounded).
// Block layouts: core/quant_blocks.h. Blocks are 20 / 24 bytes, so inside a
// 16-byte aligned row every block starts 4- / 8-byte aligned: 32-bit loads.
#pragma once
#include "common.cuh"

namespace guild::cuda {

template <> struct QUnit<kQ4_1> {
  static constexpr int QK = 32, BYTES = 20, UNITS = 1;
  struct W { uint32_t q[4]; uint32_t dm; };
  __device__ static __forceinline__ W load(const uint8_t* b, int) {
    W w;
    w.dm = ld_u32(b);
#pragma unroll
    for (int i = 0; i < 4; ++i) w.q[i] = ld_u32(b + 4 + 4 * i);
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int) {
    const int4 a0 = *reinterpret_cast<const int4*>(aq);
    const int4 a1 = *reinterpret_cast<const int4*>(aq + 16);
    const int lo[4] = {a0.x, a0.y, a0.z, a0.w}, hi[4] = {a1.x, a1.y, a1.z, a1.w};
    constexpr uint32_t M = 0x0F0F0F0Fu;
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s = dp4a(static_cast<int>(w.q[i] & M), lo[i], s);
      s = dp4a(static_cast<int>((w.q[i] >> 4) & M), hi[i], s);
    }
    const float2 ds = __half22float2(ads[0]);
    return h2f(w.dm & 0xFFFF) * ds.x * static_cast<float>(s) + h2f(w.dm >> 16) * ds.y;
  }
};

// Q5_1: the 5th bit of element j is bit j of qh (a little-endian u32).
template <> struct QUnit<kQ5_1> {
  static constexpr int QK = 32, BYTES = 24, UNITS = 1;
  struct W { uint32_t q[4]; uint32_t qh, dm; };
  __device__ static __forceinline__ W load(const uint8_t* b, int) {
    W w;
    w.dm = ld_u32(b);
    w.qh = ld_u32(b + 4);
#pragma unroll
    for (int i = 0; i < 4; ++i) w.q[i] = ld_u32(b + 8 + 4 * i);
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int) {
    const int4 a0 = *reinterpret_cast<const int4*>(aq);
    const int4 a1 = *reinterpret_cast<const int4*>(aq + 16);
    const int lo[4] = {a0.x, a0.y, a0.z, a0.w}, hi[4] = {a1.x, a1.y, a1.z, a1.w};
    constexpr uint32_t M = 0x0F0F0F0Fu;
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // word i holds elements 4i..4i+3 (low nibbles) and 16+4i.. (high nibbles)
      const uint32_t q_lo = (w.q[i] & M) | (spread4((w.qh >> (4 * i)) & 0xF) << 4);
      const uint32_t q_hi = ((w.q[i] >> 4) & M) | (spread4((w.qh >> (16 + 4 * i)) & 0xF) << 4);
      s = dp4a(static_cast<int>(q_lo), lo[i], s);
      s = dp4a(static_cast<int>(q_hi), hi[i], s);
    }
    const float2 ds = __half22float2(ads[0]);
    return h2f(w.dm & 0xFFFF) * ds.x * static_cast<float>(s) + h2f(w.dm >> 16) * ds.y;
  }
};

template <> struct Deq<kQ4_1> {
  static constexpr int QK = 32, BYTES = 20;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + run * BYTES;
    const uint32_t dm = ld_u32(b);
    const float d = h2f(dm & 0xFFFF), m = h2f(dm >> 16);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t v = ld_u32(b + 4 + 4 * w);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        out[4 * w + j] = __fadd_rn(__fmul_rn(static_cast<float>((v >> (8 * j)) & 0xF), d), m);
        out[16 + 4 * w + j] = __fadd_rn(__fmul_rn(static_cast<float>((v >> (8 * j + 4)) & 0xF), d), m);
      }
    }
  }
};

template <> struct Deq<kQ5_1> {
  static constexpr int QK = 32, BYTES = 24;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + run * BYTES;
    const uint32_t dm = ld_u32(b);
    const float d = h2f(dm & 0xFFFF), m = h2f(dm >> 16);
    const uint32_t qh = ld_u32(b + 4);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t v = ld_u32(b + 8 + 4 * w);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int e = 4 * w + j;
        const uint32_t lo = ((v >> (8 * j)) & 0xF) | (((qh >> e) & 1) << 4);
        const uint32_t hi = ((v >> (8 * j + 4)) & 0xF) | (((qh >> (e + 16)) & 1) << 4);
        out[e] = __fadd_rn(__fmul_rn(static_cast<float>(lo), d), m);
        out[16 + e] = __fadd_rn(__fmul_rn(static_cast<float>(hi), d), m);
      }
    }
  }
};

}  // namespace guild::cuda
