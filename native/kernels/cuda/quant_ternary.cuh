// The ternary types TQ1_0 and TQ2_0 (256-element blocks, x = d * (t - 1), t in
// 0..2): the matrix-vector unit (unit u = elements 32u..32u+31, one Q8_1
// run; the values t - 1 as int8 lanes into dp4a) and the run-of-32
// dequantizer. Layouts: core/quant_blocks.h. Both blocks (54 / 66 bytes) are
// 2-byte aligned in a 16-byte aligned row: 16-bit loads.
#pragma once
#include "common.cuh"

namespace guild::cuda {

// TQ1_0: trit n of byte v is ((v * 3^n) mod 256) * 3 >> 8, for the four bytes
// of a word at once, as int8 lanes t - 1.
__device__ __forceinline__ uint32_t tq1_trits4(uint32_t word, int n) {
  const uint32_t pow3 = n == 0 ? 1u : n == 1 ? 3u : n == 2 ? 9u : n == 3 ? 27u : 81u;
  uint32_t out = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t q = (((word >> (8 * i)) & 0xFFu) * pow3) & 0xFFu;
    out |= ((((q * 3u) >> 8) - 1u) & 0xFFu) << (8 * i);
  }
  return out;
}

// The 32 values t - 1 of run u as eight words of int8 lanes. Runs 0..4:
// trit u of qs[0..32); elements 160..239: 160 + 16n + m is trit n of
// qs[32 + m] (runs 5, 6: n = 2(u-5), 2(u-5)+1; run 7's first half: n = 4);
// elements 240 + 4n + j (run 7's second half): trit n of qh[j].
__device__ __forceinline__ void tq1_run(const uint8_t* b, int u, uint32_t* v) {
  if (u < 5) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = tq1_trits4(ld_u32_a2(b + 4 * i), u);
  } else {
    const int n0 = 2 * (u - 5);
    const uint32_t qh = ld_u32_a2(b + 48);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = ld_u32_a2(b + 32 + 4 * i);
      v[i] = tq1_trits4(w, n0);
      v[4 + i] = u < 7 ? tq1_trits4(w, n0 + 1) : tq1_trits4(qh, i);
    }
  }
}

// TQ2_0: element 128h + 32l + m = (qs[32h + m] >> 2l) & 3; run u = 4h + l.
__device__ __forceinline__ void tq2_run(const uint8_t* b, int u, uint32_t* v) {
  const int h = u >> 2, l = u & 3;
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = __vsubss4((ld_u32_a2(b + 32 * h + 4 * i) >> (2 * l)) & 0x03030303u, 0x01010101u);
}

template <uint32_t T>
struct TernaryUnit {
  static constexpr int QK = 256, UNITS = 8;
  static constexpr int BYTES = T == kTQ1_0 ? 54 : 66;
  static constexpr int D_OFFSET = T == kTQ1_0 ? 52 : 64;
  struct W { uint32_t v[8]; uint32_t d; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    W w;
    if constexpr (T == kTQ1_0) tq1_run(b, u, w.v);
    else tq2_run(b, u, w.v);
    w.d = ld_u16(b + D_OFFSET);
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    const int4 a0 = *reinterpret_cast<const int4*>(aq + 32 * u);
    const int4 a1 = *reinterpret_cast<const int4*>(aq + 32 * u + 16);
    const int a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    int s = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) s = dp4a(static_cast<int>(w.v[i]), a[i], s);
    return h2f(w.d) * __low2float(ads[u]) * static_cast<float>(s);
  }
  // CPU: float(t - 1) * d per element.
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    uint32_t v[8];
    if constexpr (T == kTQ1_0) tq1_run(b, run & 7, v);
    else tq2_run(b, run & 7, v);
    const float d = h2f(ld_u16(b + D_OFFSET));
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<float>(static_cast<int8_t>(v[i] >> (8 * j))) * d;
  }
};

template <> struct QUnit<kTQ1_0> : TernaryUnit<kTQ1_0> {};
template <> struct QUnit<kTQ2_0> : TernaryUnit<kTQ2_0> {};
template <> struct Deq<kTQ1_0> : TernaryUnit<kTQ1_0> {};
template <> struct Deq<kTQ2_0> : TernaryUnit<kTQ2_0> {};

}  // namespace guild::cuda
