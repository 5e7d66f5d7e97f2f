// The grid-quantized types IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and
// IQ3_S (256-element super-blocks of 8 sub-blocks of 32): the matrix-vector
// unit (unit u = sub-block u, one Q8_1 run; the grid runs looked up, signed
// and fed to dp4a as int8 lanes) and the run-of-32 dequantizer (bit-exact
// with cpu/generic/dequant_iq_grid.cpp: the sub-block factor first, one
// product with the grid value, then the sign).
//
// The codebooks: the host tables of cpu/generic/iq_grids.cpp (the only
// definition of their values) are copied into device memory at
// kernels_init() (quant_tables.cu). They live in global memory, read through
// the read-only cache: a warp's lanes index them at random, which constant
// memory would serialize (one address per access at full speed), and the
// largest (IQ1_S, 16 KiB) would crowd its 64 KiB.
// Device code is compiled per translation unit (no -rdc), so a __device__
// array is only visible in the unit that defines it: every .cu file that
// includes this header has its own copy (internal linkage) and a function
// that fills it (GUILD_IQ_GRID_UPLOADER below), called by quant_tables_init().
//
// Alignment: every block here is 2-byte aligned in a 16-byte aligned row
// (IQ1_M: 8-byte): 16-bit loads, ld_u32 only where 4-byte alignment holds.
#pragma once
#include "common.cuh"
#include "cpu/generic/iq_grids.h"

namespace guild::cuda {
namespace {

// Entry k: one run of 8 (uint2: bytes 0..3, 4..7) or 4 (uint32) values.
__device__ uint2 d_iq2xxs_grid[256];
__device__ uint2 d_iq2xs_grid[512];
__device__ uint2 d_iq2s_grid[1024];
__device__ unsigned d_iq3xxs_grid[256];
__device__ unsigned d_iq3s_grid[512];
__device__ uint2 d_iq1s_grid[2048];

static_assert(sizeof(d_iq2xxs_grid) == sizeof(iq_grids::kIQ2XXSGrid) && sizeof(d_iq2xs_grid) == sizeof(iq_grids::kIQ2XSGrid) &&
                  sizeof(d_iq2s_grid) == sizeof(iq_grids::kIQ2SGrid) && sizeof(d_iq3xxs_grid) == sizeof(iq_grids::kIQ3XXSGrid) &&
                  sizeof(d_iq3s_grid) == sizeof(iq_grids::kIQ3SGrid) && sizeof(d_iq1s_grid) == sizeof(iq_grids::kIQ1SGrid),
              "device grids mirror the host grids");

// This translation unit's grids, filled from the host tables (current device).
inline cudaError_t upload_iq_grids_of_this_unit() {
  cudaError_t e = cudaSuccess;
  auto put = [&](const void* symbol, const void* src, size_t bytes) {
    if (e == cudaSuccess) e = cudaMemcpyToSymbol(symbol, src, bytes);
  };
  put(d_iq2xxs_grid, iq_grids::kIQ2XXSGrid, sizeof(d_iq2xxs_grid));
  put(d_iq2xs_grid, iq_grids::kIQ2XSGrid, sizeof(d_iq2xs_grid));
  put(d_iq2s_grid, iq_grids::kIQ2SGrid, sizeof(d_iq2s_grid));
  put(d_iq3xxs_grid, iq_grids::kIQ3XXSGrid, sizeof(d_iq3xxs_grid));
  put(d_iq3s_grid, iq_grids::kIQ3SGrid, sizeof(d_iq3s_grid));
  put(d_iq1s_grid, iq_grids::kIQ1SGrid, sizeof(d_iq1s_grid));
  return e;
}

}  // namespace

// Defines the exported uploader of the including translation unit's grids
// (declared in quant_tables.h).
#define GUILD_IQ_GRID_UPLOADER(name) \
  cudaError_t name() { return upload_iq_grids_of_this_unit(); }

// The full sign byte of a 7-bit code: the 8th sign makes the number of minus
// signs even (iq_grids::kIQSignBytes[code]).
__device__ __forceinline__ uint32_t iq_sign_byte(uint32_t code) {
  return code | ((static_cast<uint32_t>(__popc(code)) & 1u) << 7);
}

// A run of 8 grid magnitudes (g) signed by the 8 bits of `signs`, as two words of int8 lanes.
__device__ __forceinline__ void signed_run8(uint2 g, uint32_t signs, uint32_t* v) {
  v[0] = negate_bytes(g.x, signs & 0xF);
  v[1] = negate_bytes(g.y, (signs >> 4) & 0xF);
}

// Sum over 8 words of int8 lanes times 32 activation quants at a (16-byte aligned).
__device__ __forceinline__ void dot32(const uint32_t* v, const int8_t* a, int* s_lo, int* s_hi) {
  const int4 a0 = *reinterpret_cast<const int4*>(a);
  const int4 a1 = *reinterpret_cast<const int4*>(a + 16);
  int lo = 0, hi = 0;
  lo = dp4a(static_cast<int>(v[0]), a0.x, lo);
  lo = dp4a(static_cast<int>(v[1]), a0.y, lo);
  lo = dp4a(static_cast<int>(v[2]), a0.z, lo);
  lo = dp4a(static_cast<int>(v[3]), a0.w, lo);
  hi = dp4a(static_cast<int>(v[4]), a1.x, hi);
  hi = dp4a(static_cast<int>(v[5]), a1.y, hi);
  hi = dp4a(static_cast<int>(v[6]), a1.z, hi);
  hi = dp4a(static_cast<int>(v[7]), a1.w, hi);
  *s_lo = lo;  // elements 0..15
  *s_hi = hi;  // elements 16..31
}

// Writes 32 floats: element 4i + j = scale(i) * byte j of mag[i], negated where
// bit 4i + j of signs is set (magnitudes are unsigned bytes). The CPU's
// order: (sub-block factor) * magnitude, then the sign (an exact negation).
template <typename ScaleOf>
__device__ __forceinline__ void emit_signed32(const uint32_t* mag, uint32_t signs, ScaleOf scale_of, float* out) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float sc = scale_of(i);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float v = sc * static_cast<float>((mag[i] >> (8 * j)) & 0xFF);
      out[4 * i + j] = (signs >> (4 * i + j)) & 1 ? -v : v;
    }
  }
}

// ---- IQ2_XXS: sub-block u = 8 bytes at 2 + 8u: 4 grid indices, then a u32
// of four 7-bit sign codes and the scale s (bits 28..31): d * (0.5 + s) * 0.25.
template <> struct QUnit<kIQ2_XXS> {
  static constexpr int QK = 256, BYTES = 66, UNITS = 8;
  struct W { uint32_t v[8]; float s; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    const uint32_t idx = ld_u32_a2(b + 2 + 8 * u), meta = ld_u32_a2(b + 6 + 8 * u);
    W w;
#pragma unroll
    for (int r = 0; r < 4; ++r)
      signed_run8(__ldg(&d_iq2xxs_grid[(idx >> (8 * r)) & 0xFF]), iq_sign_byte((meta >> (7 * r)) & 127), w.v + 2 * r);
    w.s = h2f(ld_u16(b)) * (0.5f + static_cast<float>(meta >> 28)) * 0.25f;
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    int lo, hi;
    dot32(w.v, aq + 32 * u, &lo, &hi);
    return w.s * __low2float(ads[u]) * static_cast<float>(lo + hi);
  }
};

template <> struct Deq<kIQ2_XXS> {
  static constexpr int QK = 256, BYTES = 66;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int u = run & 7;
    const uint32_t idx = ld_u32_a2(b + 2 + 8 * u), meta = ld_u32_a2(b + 6 + 8 * u);
    uint32_t mag[8], signs = 0;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint2 g = __ldg(&d_iq2xxs_grid[(idx >> (8 * r)) & 0xFF]);
      mag[2 * r] = g.x;
      mag[2 * r + 1] = g.y;
      signs |= iq_sign_byte((meta >> (7 * r)) & 127) << (8 * r);
    }
    const float db = h2f(ld_u16(b)) * (0.5f + static_cast<float>(meta >> 28)) * 0.25f;
    emit_signed32(mag, signs, [&](int) { return db; }, out);
  }
};

// ---- IQ2_XS: run r: u16 qs[r] = 9-bit index | 7-bit sign code << 9; scales[u]
// (byte 66 + u): low nibble for runs 0, 1 of the sub-block, high for 2, 3.
template <> struct QUnit<kIQ2_XS> {
  static constexpr int QK = 256, BYTES = 74, UNITS = 8;
  struct W { uint32_t v[8]; float s0, s1; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    const uint32_t q01 = ld_u32_a2(b + 2 + 8 * u), q23 = ld_u32_a2(b + 6 + 8 * u);
    W w;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint32_t q = ((r < 2 ? q01 : q23) >> (16 * (r & 1))) & 0xFFFF;
      signed_run8(__ldg(&d_iq2xs_grid[q & 511]), iq_sign_byte(q >> 9), w.v + 2 * r);
    }
    const uint32_t sc = b[66 + u];
    const float d = h2f(ld_u16(b));
    w.s0 = d * (0.5f + static_cast<float>(sc & 0xF)) * 0.25f;
    w.s1 = d * (0.5f + static_cast<float>(sc >> 4)) * 0.25f;
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    int lo, hi;
    dot32(w.v, aq + 32 * u, &lo, &hi);
    return __low2float(ads[u]) * (w.s0 * static_cast<float>(lo) + w.s1 * static_cast<float>(hi));
  }
};

template <> struct Deq<kIQ2_XS> {
  static constexpr int QK = 256, BYTES = 74;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int u = run & 7;
    const uint32_t q01 = ld_u32_a2(b + 2 + 8 * u), q23 = ld_u32_a2(b + 6 + 8 * u);
    uint32_t mag[8], signs = 0;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint32_t q = ((r < 2 ? q01 : q23) >> (16 * (r & 1))) & 0xFFFF;
      const uint2 g = __ldg(&d_iq2xs_grid[q & 511]);
      mag[2 * r] = g.x;
      mag[2 * r + 1] = g.y;
      signs |= iq_sign_byte(q >> 9) << (8 * r);
    }
    const uint32_t sc = b[66 + u];
    const float d = h2f(ld_u16(b));
    const float db0 = d * (0.5f + static_cast<float>(sc & 0xF)) * 0.25f;
    const float db1 = d * (0.5f + static_cast<float>(sc >> 4)) * 0.25f;
    emit_signed32(mag, signs, [&](int i) { return i < 4 ? db0 : db1; }, out);  // words 0..3: runs 0, 1
  }
};

// ---- IQ2_S: run r of sub-block u: index qs[4u + r] | ((qh[u] >> 2r) & 3) << 8,
// sign byte qs[32 + 4u + r]; scales as IQ2_XS (byte 74 + u).
template <> struct QUnit<kIQ2_S> {
  static constexpr int QK = 256, BYTES = 82, UNITS = 8;
  struct W { uint32_t v[8]; float s0, s1; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    const uint32_t iw = ld_u32_a2(b + 2 + 4 * u), sw = ld_u32_a2(b + 34 + 4 * u), qh = b[66 + u];
    W w;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint32_t idx = ((iw >> (8 * r)) & 0xFF) | (((qh >> (2 * r)) & 3) << 8);
      signed_run8(__ldg(&d_iq2s_grid[idx]), (sw >> (8 * r)) & 0xFF, w.v + 2 * r);
    }
    const uint32_t sc = b[74 + u];
    const float d = h2f(ld_u16(b));
    w.s0 = d * (0.5f + static_cast<float>(sc & 0xF)) * 0.25f;
    w.s1 = d * (0.5f + static_cast<float>(sc >> 4)) * 0.25f;
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    int lo, hi;
    dot32(w.v, aq + 32 * u, &lo, &hi);
    return __low2float(ads[u]) * (w.s0 * static_cast<float>(lo) + w.s1 * static_cast<float>(hi));
  }
};

template <> struct Deq<kIQ2_S> {
  static constexpr int QK = 256, BYTES = 82;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int u = run & 7;
    const uint32_t iw = ld_u32_a2(b + 2 + 4 * u), sw = ld_u32_a2(b + 34 + 4 * u), qh = b[66 + u];
    uint32_t mag[8];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint2 g = __ldg(&d_iq2s_grid[((iw >> (8 * r)) & 0xFF) | (((qh >> (2 * r)) & 3) << 8)]);
      mag[2 * r] = g.x;
      mag[2 * r + 1] = g.y;
    }
    const uint32_t sc = b[74 + u];
    const float d = h2f(ld_u16(b));
    const float db0 = d * (0.5f + static_cast<float>(sc & 0xF)) * 0.25f;
    const float db1 = d * (0.5f + static_cast<float>(sc >> 4)) * 0.25f;
    emit_signed32(mag, sw, [&](int i) { return i < 4 ? db0 : db1; }, out);
  }
};

// ---- IQ3_XXS: runs of 4; qs[8u + k] (bytes 2 + 8u ..) index the 256-entry
// grid; the u32 at 66 + 4u holds four 7-bit sign codes (one per 8 elements:
// grid runs 2r, 2r + 1) and the scale s: d * (0.5 + s) * 0.5.
template <> struct QUnit<kIQ3_XXS> {
  static constexpr int QK = 256, BYTES = 98, UNITS = 8;
  struct W { uint32_t v[8]; float s; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    const uint32_t i0 = ld_u32_a2(b + 2 + 8 * u), i1 = ld_u32_a2(b + 6 + 8 * u), meta = ld_u32_a2(b + 66 + 4 * u);
    W w;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t idx = ((k < 4 ? i0 : i1) >> (8 * (k & 3))) & 0xFF;
      const uint32_t signs = iq_sign_byte((meta >> (7 * (k >> 1))) & 127) >> (4 * (k & 1));
      w.v[k] = negate_bytes(__ldg(&d_iq3xxs_grid[idx]), signs);
    }
    w.s = h2f(ld_u16(b)) * (0.5f + static_cast<float>(meta >> 28)) * 0.5f;
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    int lo, hi;
    dot32(w.v, aq + 32 * u, &lo, &hi);
    return w.s * __low2float(ads[u]) * static_cast<float>(lo + hi);
  }
};

template <> struct Deq<kIQ3_XXS> {
  static constexpr int QK = 256, BYTES = 98;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int u = run & 7;
    const uint32_t i0 = ld_u32_a2(b + 2 + 8 * u), i1 = ld_u32_a2(b + 6 + 8 * u), meta = ld_u32_a2(b + 66 + 4 * u);
    uint32_t mag[8], signs = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) mag[k] = __ldg(&d_iq3xxs_grid[((k < 4 ? i0 : i1) >> (8 * (k & 3))) & 0xFF]);
#pragma unroll
    for (int r = 0; r < 4; ++r) signs |= iq_sign_byte((meta >> (7 * r)) & 127) << (8 * r);
    const float db = h2f(ld_u16(b)) * (0.5f + static_cast<float>(meta >> 28)) * 0.5f;
    emit_signed32(mag, signs, [&](int) { return db; }, out);
  }
};

// ---- IQ3_S: run k of sub-block u: index qs[8u + k] | ((qh[u] >> k) & 1) << 8;
// signs of elements 32u + 8e .. + 7 in signs[4u + e] (byte 74 + 4u + e), so
// run k's four signs are bits 4k.. of the u32 at 74 + 4u; scale: nibble u%2
// of scales[u/2] (byte 106 + u/2): d * (1 + 2s).
template <> struct QUnit<kIQ3_S> {
  static constexpr int QK = 256, BYTES = 110, UNITS = 8;
  struct W { uint32_t v[8]; float s; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    const uint32_t i0 = ld_u32_a2(b + 2 + 8 * u), i1 = ld_u32_a2(b + 6 + 8 * u), qh = b[66 + u];
    const uint32_t sw = ld_u32_a2(b + 74 + 4 * u);
    W w;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t idx = (((k < 4 ? i0 : i1) >> (8 * (k & 3))) & 0xFF) | (((qh >> k) & 1) << 8);
      w.v[k] = negate_bytes(__ldg(&d_iq3s_grid[idx]), sw >> (4 * k));
    }
    const uint32_t sc = b[106 + (u >> 1)];
    w.s = h2f(ld_u16(b)) * static_cast<float>(1 + 2 * static_cast<int>((sc >> (4 * (u & 1))) & 0xF));
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    int lo, hi;
    dot32(w.v, aq + 32 * u, &lo, &hi);
    return w.s * __low2float(ads[u]) * static_cast<float>(lo + hi);
  }
};

template <> struct Deq<kIQ3_S> {
  static constexpr int QK = 256, BYTES = 110;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int u = run & 7;
    const uint32_t i0 = ld_u32_a2(b + 2 + 8 * u), i1 = ld_u32_a2(b + 6 + 8 * u), qh = b[66 + u];
    uint32_t mag[8];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      mag[k] = __ldg(&d_iq3s_grid[(((k < 4 ? i0 : i1) >> (8 * (k & 3))) & 0xFF) | (((qh >> k) & 1) << 8)]);
    const uint32_t sc = b[106 + (u >> 1)];
    const float db = h2f(ld_u16(b)) * static_cast<float>(1 + 2 * static_cast<int>((sc >> (4 * (u & 1))) & 0xF));
    emit_signed32(mag, ld_u32_a2(b + 74 + 4 * u), [&](int) { return db; }, out);
  }
};

// ---- IQ1_S / IQ1_M: grid values -1/0/+1 (int8 lanes) plus a shift of +-1/8
// per run: x = dl * (grid + shift). The dot keeps it integer: 8 * sum (g +
// shift) a = 8 * sum g a +- sum a (the activation sums by dp4a with ones).

// Writes 8 floats of a run: dl * (int8 byte j of g + shift) (the CPU's emit_shifted).
__device__ __forceinline__ void emit_shifted8(uint2 g, float shift, float dl, float* out) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const uint32_t w = j < 4 ? g.x : g.y;
    out[j] = dl * (static_cast<float>(static_cast<int8_t>(w >> (8 * (j & 3)))) + shift);
  }
}

// IQ1_S: sub-block u: indices qs[4u + r] | ((qh[u] >> 3r) & 7) << 8, qh[u]
// (u16 at 34 + 2u) bits 12..14 the scale s, bit 15 the shift's sign: dl = d * (2s + 1).
template <> struct QUnit<kIQ1_S> {
  static constexpr int QK = 256, BYTES = 50, UNITS = 8;
  struct W { uint32_t v[8]; float s; uint32_t neg; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    const uint32_t iw = ld_u32_a2(b + 2 + 4 * u), qh = ld_u16(b + 34 + 2 * u);
    W w;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint2 g = __ldg(&d_iq1s_grid[((iw >> (8 * r)) & 0xFF) | (((qh >> (3 * r)) & 7) << 8)]);
      w.v[2 * r] = g.x;
      w.v[2 * r + 1] = g.y;
    }
    w.s = h2f(ld_u16(b)) * static_cast<float>(2 * static_cast<int>((qh >> 12) & 7) + 1);
    w.neg = qh & 0x8000u;
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    const int8_t* a = aq + 32 * u;
    int lo, hi;
    dot32(w.v, a, &lo, &hi);
    const int4 a0 = *reinterpret_cast<const int4*>(a);
    const int4 a1 = *reinterpret_cast<const int4*>(a + 16);
    int asum = 0;
    asum = byte_sum(a0.x, asum); asum = byte_sum(a0.y, asum); asum = byte_sum(a0.z, asum); asum = byte_sum(a0.w, asum);
    asum = byte_sum(a1.x, asum); asum = byte_sum(a1.y, asum); asum = byte_sum(a1.z, asum); asum = byte_sum(a1.w, asum);
    const int t = 8 * (lo + hi) + (w.neg ? -asum : asum);
    return w.s * __low2float(ads[u]) * static_cast<float>(t) * 0.125f;
  }
};

template <> struct Deq<kIQ1_S> {
  static constexpr int QK = 256, BYTES = 50;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int u = run & 7;
    const uint32_t iw = ld_u32_a2(b + 2 + 4 * u), qh = ld_u16(b + 34 + 2 * u);
    const float dl = h2f(ld_u16(b)) * static_cast<float>(2 * static_cast<int>((qh >> 12) & 7) + 1);
    const float shift = qh & 0x8000u ? -iq_grids::kIQ1Delta : iq_grids::kIQ1Delta;
#pragma unroll
    for (int r = 0; r < 4; ++r)
      emit_shifted8(__ldg(&d_iq1s_grid[((iw >> (8 * r)) & 0xFF) | (((qh >> (3 * r)) & 7) << 8)]), shift, dl, out + 8 * r);
  }
};

// IQ1_M: run r of sub-block u: nib = (qh[2u + r/2] >> 4(r%2)) & 15 = bits 4r..
// of the u16 at 32 + 2u; index qs[4u + r] | (nib & 7) << 8, nib & 8 the shift's
// sign. The fp16 super-scale is the top nibbles of the four u16 words of
// scales (bytes 48..55, iq1m_super_scale); word u/2 holds the sub-block's
// 3-bit scales at 6(u%2) (runs 0, 1) and 6(u%2) + 3 (runs 2, 3): dl = d * (2s + 1).
struct IQ1MScales {
  float dl0, dl1;
};
__device__ __forceinline__ IQ1MScales iq1m_scales(const uint8_t* b, int u) {
  const uint32_t s01 = ld_u32(b + 48), s23 = ld_u32(b + 52);  // 8-byte aligned blocks
  const uint32_t super = (s01 >> 12 & 0xF) | ((s01 >> 24) & 0xF0) | ((s23 >> 4) & 0xF00) | ((s23 >> 16) & 0xF000);
  const float d = h2f(super);
  const uint32_t w = ((u >> 1) < 2 ? s01 : s23) >> (16 * ((u >> 1) & 1));
  const int sh = 6 * (u & 1);
  return IQ1MScales{d * static_cast<float>(2 * static_cast<int>((w >> sh) & 7) + 1),
                    d * static_cast<float>(2 * static_cast<int>((w >> (sh + 3)) & 7) + 1)};
}

template <> struct QUnit<kIQ1_M> {
  static constexpr int QK = 256, BYTES = 56, UNITS = 8;
  struct W { uint32_t v[8]; float dl0, dl1; uint32_t neg; };
  __device__ static __forceinline__ W load(const uint8_t* b, int u) {
    const uint32_t iw = ld_u32(b + 4 * u), qh = ld_u16(b + 32 + 2 * u);
    W w;
    w.neg = 0;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint32_t nib = (qh >> (4 * r)) & 0xF;
      const uint2 g = __ldg(&d_iq1s_grid[((iw >> (8 * r)) & 0xFF) | ((nib & 7) << 8)]);
      w.v[2 * r] = g.x;
      w.v[2 * r + 1] = g.y;
      w.neg |= ((nib >> 3) & 1) << r;
    }
    const IQ1MScales s = iq1m_scales(b, u);
    w.dl0 = s.dl0;
    w.dl1 = s.dl1;
    return w;
  }
  __device__ static __forceinline__ float dot(const W& w, const int8_t* aq, const half2* ads, int u) {
    const int8_t* a = aq + 32 * u;
    const int4 a0 = *reinterpret_cast<const int4*>(a);
    const int4 a1 = *reinterpret_cast<const int4*>(a + 16);
    const int av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    int t[2] = {0, 0};  // 8 * sum (g +- 1/8) a over runs 0, 1 and 2, 3
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      int gs = dp4a(static_cast<int>(w.v[2 * r]), av[2 * r], 0);
      gs = dp4a(static_cast<int>(w.v[2 * r + 1]), av[2 * r + 1], gs);
      const int as = byte_sum(av[2 * r + 1], byte_sum(av[2 * r], 0));
      t[r >> 1] += 8 * gs + ((w.neg >> r) & 1 ? -as : as);
    }
    return __low2float(ads[u]) * (w.dl0 * static_cast<float>(t[0]) + w.dl1 * static_cast<float>(t[1])) * 0.125f;
  }
};

template <> struct Deq<kIQ1_M> {
  static constexpr int QK = 256, BYTES = 56;
  __device__ static __forceinline__ void run32(const uint8_t* row, int run, float* out) {
    const uint8_t* b = row + (run >> 3) * BYTES;
    const int u = run & 7;
    const uint32_t iw = ld_u32(b + 4 * u), qh = ld_u16(b + 32 + 2 * u);
    const IQ1MScales s = iq1m_scales(b, u);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint32_t nib = (qh >> (4 * r)) & 0xF;
      const float shift = nib & 8 ? -iq_grids::kIQ1Delta : iq_grids::kIQ1Delta;
      emit_shifted8(__ldg(&d_iq1s_grid[((iw >> (8 * r)) & 0xFF) | ((nib & 7) << 8)]), shift, r < 2 ? s.dl0 : s.dl1,
                    out + 8 * r);
    }
  }
};

}  // namespace guild::cuda
